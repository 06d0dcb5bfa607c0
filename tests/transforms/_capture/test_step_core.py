"""The C step core (transforms/_capture/_core_*.c) records exactly what the Python reference
(`_step_core.PyStepCore`) records: every corpus case with stages, a quarter again without, saved to the
same text by both; and how a process chooses its core.

CI sets WORKBENCH_REQUIRE_CORE=1 (scripts/test.sh): there the C core must be built and
current, so these tests compare it and nothing is skipped.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest
from corpus import CASES
from sweeps import sweep

import transforms as T
from transforms._capture import _step_core
from transforms._recording import _call_steps

C_CORE, WHY_NOT = _step_core._c_core()
REQUIRED = os.environ.get("WORKBENCH_REQUIRE_CORE") == "1"
needs_c = pytest.mark.skipif(C_CORE is None and not REQUIRED, reason=f"no C core: {WHY_NOT}")


def test_the_c_core_is_there_when_required():
    if REQUIRED:
        assert C_CORE is not None, WHY_NOT
        assert _step_core.step_core_class() is C_CORE


def _recorded_text(core: type, run, stages: bool, monkeypatch) -> str:
    monkeypatch.setattr(_call_steps, "step_core_class", lambda: core)
    with T.record(stages=stages) as session:
        try:
            run()
        except Exception:  # the corpus's failing cases: their records are compared too
            pass
    # Stage records carry how long each capture took: the one field that differs (and so
    # do the byte offsets of the index after it, left out).
    text = session.to_json_text()
    # JAX's error messages name tracers by id.
    return _IDS.sub("object id <id>", _TIMES.sub("<t>", text[:text.rindex(',"lazy_at":')]))


_IDS = re.compile(r"object id \d+")
_TIMES = re.compile(r"(?<=[,\[:])-?\d+\.\d+(e-?\d+)?(?=[,\]}])")


# Every case of the corpus with stages (its steps, and what its tapes read, go to the core),
# and every fourth again with steps only (no tape: the levels' own path to the core).
CORE_CASES = [(case, True) for case in CASES] + [(case, False) for case in CASES[::4]]


@needs_c
@pytest.mark.parametrize("case, stages", sweep(
    CORE_CASES, [f"{c.name}-{'stages' if s else 'steps'}" for c, s in CORE_CASES]))
def test_both_cores_record_the_same(case, stages, monkeypatch):
    def run():
        return case.run(T)
    # The first run warms JAX's caches. NB: from one line: a compiled stage's text holds the
    # Python frames it was traced under, this one's line among them.
    texts = [_recorded_text(core, run, stages, monkeypatch)
             for core in (_step_core.PyStepCore, _step_core.PyStepCore, C_CORE)]
    assert texts[2] == texts[1]


@needs_c
def test_both_cores_agree_on_a_tower_a_custom_rule_a_scope_and_a_failure(monkeypatch):
    @jax.custom_jvp
    def soft(x):
        return jnp.log1p(jnp.exp(x))

    @soft.defjvp
    def soft_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return soft(x), t * jax.nn.sigmoid(x)

    def f(x):
        with jax.named_scope("block"), jax.named_scope("inner"):
            y = jnp.sin(x) * 2.0
        return jnp.sum(soft(y)) + jnp.float32(0.5) * x[0]

    def run():
        x = jnp.arange(6.0).reshape(2, 3)
        T.vmap(T.grad(f))(x)
        jax.make_jaxpr(T.jacfwd(T.grad(f)))(x[0])
        T.jit(T.vmap(f))(x)
        T.grad(lambda x: jnp.dot(x, jnp.ones(4)))(x[0])  # raises: shapes (3,) and (4,)

    texts = [_recorded_text(core, run, False, monkeypatch)
             for core in (_step_core.PyStepCore, _step_core.PyStepCore, C_CORE)]
    assert texts[2] == texts[1]
    assert '"custom_jvp_call"' in texts[2] and "TypeError" in texts[2]
    assert '"block/inner"' in texts[2]  # the steps' scope path (their name stacks: vmap(block)/inner ...)


@needs_c
def test_both_cores_agree_on_the_module_paths_of_nnx_and_equinox_models(monkeypatch):
    """Step.module, read from the stack by both cores: nested modules, a list of them, a
    custom rule's body (user code inside a step), a backward pass and a vmap."""
    nnx = pytest.importorskip("flax.nnx")
    eqx = pytest.importorskip("equinox")

    class Block(nnx.Module):
        def __init__(self, rngs):
            self.dense = nnx.Linear(3, 3, rngs=rngs)

        def __call__(self, x):
            return jax.nn.relu(self.dense(x))  # relu: a custom_jvp, its rule's steps

    class Model(nnx.Module):
        def __init__(self, rngs):
            self.blocks = nnx.List([Block(rngs), Block(rngs)])

        def __call__(self, x):
            for block in self.blocks:
                x = block(x)
            return jnp.sum(x)

    model = Model(nnx.Rngs(0))
    mlp = eqx.nn.MLP(3, 1, 4, 1, key=jax.random.key(0))

    def run():
        x = jnp.ones((2, 3))
        T.jit(T.value_and_grad(lambda m: m(x)))(model)
        eqx.filter_grad(lambda m: jnp.sum(T.vmap(m)(x)))(mlp)  # a vmap of the model, recorded

    texts = [_recorded_text(core, run, False, monkeypatch)
             for core in (_step_core.PyStepCore, _step_core.PyStepCore, C_CORE)]
    assert texts[2] == texts[1]
    for path in ('"Model/blocks[1]/dense"', '"Model/blocks[0]"', '"MLP/layers[1]"'):
        assert path in texts[2]


@needs_c
def test_the_c_core_has_the_reference_layout():
    from transforms._capture import _core
    assert _core.STRIDE == _step_core.STRIDE
    assert _core.SOURCE_SHA == _step_core.core_source_sha()


@needs_c
def test_the_c_core_says_what_is_wrong_with_its_arguments():
    from transforms._capture import _core
    with pytest.raises(TypeError):
        _core.StepCore(object(), print, print, [])  # jit_entries must be a dict
    with pytest.raises(AttributeError):
        _core.StepCore(object(), print, print, {})  # not a describer


def test_a_stale_c_core_is_not_used(monkeypatch):
    monkeypatch.setattr(_step_core, "core_source_sha", lambda: "0" * 64)
    cls, why = _step_core._c_core()
    assert cls is None and ("other sources" in why or "not built" in why)
    monkeypatch.setenv("WORKBENCH_REQUIRE_CORE", "1")
    monkeypatch.delenv("WORKBENCH_CORE", raising=False)
    with pytest.raises(ImportError, match="WORKBENCH_REQUIRE_CORE=1"):
        _step_core.step_core_class.__wrapped__()


def test_without_the_c_core_a_process_warns_and_records_with_python(monkeypatch):
    monkeypatch.setattr(_step_core, "core_source_sha", lambda: "0" * 64)
    monkeypatch.delenv("WORKBENCH_REQUIRE_CORE", raising=False)
    monkeypatch.delenv("WORKBENCH_CORE", raising=False)
    with pytest.warns(RuntimeWarning, match="Python step core"):
        assert _step_core.step_core_class.__wrapped__() is _step_core.PyStepCore


def test_workbench_core_python_chooses_the_reference():
    code = ("import transforms._capture._step_core as s; import transforms as T, jax.numpy as jnp; "
            "print(s.step_core_class().__name__); "
            "w = T.record(stages=False)\n"
            "with w as session: T.grad(lambda x: jnp.sin(x))(1.0)\n"
            "print(session.step_count > 0)")
    env = dict(os.environ, WORKBENCH_CORE="python")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["PyStepCore", "True"]


def test_the_doors_facts_the_c_core_reads_hold_on_this_jax():
    from jax.extend import source_info_util

    from transforms import _jax as _i
    holder, context, attribute = _i.NAME_STACK_PLACE
    with source_info_util.extend_name_stack("outer"):
        assert getattr(getattr(holder, context), attribute) is \
            source_info_util.current_name_stack()
    x = jnp.ones(3)
    tracers = []
    jax.vmap(lambda v: tracers.append(v) or v)(jnp.ones((2, 3)))
    jax.jvp(lambda p: tracers.append(p) or p, (x,), (x,))
    for tracer in tracers:
        assert _i.TRACER_PART_NAMES[0] in dir(tracer) or hasattr(tracer, "_trace")
        assert hasattr(tracer, "aval")
    batched, paired = tracers
    assert {"val", "batch_dim"} <= set(dir(batched)) and {"primal", "tangent"} <= set(dir(paired))
    plain = jax.make_jaxpr(lambda v: jax.jit(jnp.sin)(v) * 2)(x).eqns[0].params
    assert not _i.is_inline_jit_params(plain) and _i.is_inline_jit_params({"inline": True})
    for params in ({"inline": True}, plain):  # a bool as it is; an enum member (0.12) by its id
        token = _i.inline_token(params)
        assert token is params["inline"] or token == id(params["inline"])
