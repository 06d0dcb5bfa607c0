"""The table of transformation kinds (transforms/model/_kinds.py) against what JAX does.

Each fact an entry states is checked on JAX itself: where the derivative sits in the
output, which stages a call records, whether the backward pass runs at the enclosing
level, which trace and tracer kind a level has. Options are kept as live values: no
recorded call parses their text back.
"""
from __future__ import annotations

import ast
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transforms as T
from transforms._capture._spec import Options
from transforms.model import _kinds as kinds

X = jnp.array([0.5, 1.0, 2.0])


def f(x):
    return jnp.sum(jnp.sin(x))


def f_aux(x):
    return jnp.sum(jnp.sin(x)), 7.0


DERIVATIVES = [name for name, k in kinds.KINDS.items() if k.derivative is not None]


def test_the_table_imports_nothing():
    code = ("import sys, transforms.model._kinds; "
            "print(sorted(m for m in sys.modules if m.startswith(('jax', 'numpy'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_public_kind_is_a_wrapper_of_jaxs_own():
    assert set(kinds.PUBLIC_KINDS) == {"grad", "value_and_grad", "vmap", "jit", "jvp", "vjp",
                                       "linearize", "jacfwd", "jacrev", "hessian"}
    for name in kinds.PUBLIC_KINDS:
        assert getattr(T, name).__name__ == getattr(jax, name).__name__
        assert name in T.__all__
    assert {k.name for k in kinds.KINDS.values() if not k.public} == {"vjp_backward",
                                                                      "linearize_jvp"}


@pytest.mark.parametrize("name", DERIVATIVES)
@pytest.mark.parametrize("has_aux", [False, True])
def test_the_derivative_sits_where_the_entry_says(name, has_aux):
    entry = kinds.KINDS[name]
    out = getattr(jax, name)(f_aux if has_aux else f, has_aux=has_aux)(X)
    part = out
    for i in entry.derivative.path(has_aux):
        part = part[i]
    expected = jax.hessian(f)(X) if entry.derivative.nesting == 2 else jnp.cos(X)
    np.testing.assert_allclose(part, expected, rtol=1e-6)
    # the key-path prefix (shardings) names exactly the derivative's leaves
    prefix = entry.gradient_prefix(has_aux)
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(out)[0]]
    inside = [p for p in paths if p.startswith(prefix)]
    assert len(inside) == len(jax.tree_util.tree_leaves(part))


def _recorded(name):
    with T.record() as session:
        if name in ("jvp",):
            T.jvp(f, (X,), (X,))
        elif name in ("vjp", "linearize"):
            getattr(T, name)(f, X)
        else:
            getattr(T, name)(f)(X)
    return session.calls[0]


@pytest.mark.parametrize("name", [n for n in kinds.PUBLIC_KINDS if n != "jit"])
def test_autodiff_stages_are_the_entrys(name):
    call = _recorded(name)
    ad_roles = ("jvp", "linearized", "linear", "transposed")
    roles = tuple(s.role for s in call.stages if s.role in ad_roles)
    assert roles == kinds.KINDS[name].ad_stages
    assert all(s.available for s in call.stages), [s.reason for s in call.stages]


def test_jit_compiles_and_nothing_else_does():
    assert [n for n, k in kinds.KINDS.items() if k.compiles] == ["jit"]
    roles = {s.role for s in _recorded("jit").stages}
    assert {"stablehlo", "hlo", "cost", "memory"} <= roles
    assert not roles & {"stablehlo", "hlo"} & {s.role for s in _recorded("grad").stages}


@pytest.mark.parametrize("name", [n for n, k in kinds.KINDS.items()
                                  if k.wrapper and k.derivative is not None])
def test_the_backward_pass_runs_at_the_enclosing_level_when_the_entry_says(name):
    with T.record(stages=False) as session:
        T.vmap(getattr(T, name)(f))(jnp.stack([X, X]))
    call = session.calls[0]
    vmap_level = next(lv.index for lv in call.levels if lv.kind == "vmap")
    backward = [s for s in call.steps if s.level == vmap_level and s.phase == "backward"]
    assert bool(backward) == kinds.KINDS[name].backward_at_enclosing


def test_levels_and_tracers_are_the_traces_the_table_names():
    with T.record(stages=False) as session:
        T.vmap(T.grad(f))(jnp.stack([X, X]))
        T.jit(f)(X)
        T.jvp(f, (X,), (X,))
    seen = set()
    for call in session.calls:
        for level in call.levels:
            trace = kinds.TRACES_BY_CLASS[level.trace_type]
            if level.kind in ("eval", "vmap", "grad", "jvp"):
                assert level.kind == trace.level
            kinds_in = {v.kind for s in call.steps if s.level == level.index for v in s.inputs
                        if v.is_tracer and v.level == level.index}
            assert kinds_in <= {trace.tracer}, (level.label, kinds_in)
            seen |= kinds_in
    assert seen == {"batched", "linearize", "jaxpr", "jvp"}
    for kind in seen:
        entry = kinds.tracer_kind(kind)
        assert entry.transformation in kinds.PUBLIC_KINDS
        assert entry.display.endswith("Tracer")


def test_options_are_never_parsed_back_from_text(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("ast.literal_eval called while recording")
    monkeypatch.setattr(ast, "literal_eval", refuse)

    def g(x, y):
        return jnp.sum(jnp.sin(x) * y), {"aux": x}
    with T.record() as session:
        T.grad(g, argnums=(0, 1), has_aux=True)(X, X)
        T.jacrev(g, argnums=np.int64(1), has_aux=True)(X, X)
        T.jit(T.value_and_grad(g, has_aux=True))(X, X)
    grad_call, jac_call, jit_call = session.calls
    assert [t.name for t in grad_call.trees if t.role == "gradient"] == ["x", "y"]
    assert [t.name for t in jac_call.trees if t.role == "jacobian"] == ["y"]
    assert jit_call.transform == "jit" and [s.name for s in jit_call.stages][-1] == \
        "memory(jit(value_and_grad(f)))"
    assert grad_call.options == (("argnums", "(0, 1)"), ("has_aux", "True"))
    assert all(s.available for s in grad_call.stages), [s.reason for s in grad_call.stages]


def test_options_compare_by_their_text_and_keep_their_values():
    a, b = Options({"in_axes": [0, None]}), Options({"in_axes": [0, None]})
    assert a == b and hash(a) == hash(b) and a.pairs == (("in_axes", "[0, None]"),)
    assert a.get("in_axes") == [0, None]
    assert Options({"argnums": np.int64(2)}).argnums == 2
    assert Options({"has_aux": True}, {"has_aux": True, "holomorphic": False}).given == {
        "has_aux": True, "holomorphic": False}
