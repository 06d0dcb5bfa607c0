"""Stages by default, from what the call traced: the user's Python runs exactly
as many times as without the workbench, JAX's caches see the same hits and
misses, and each signature's stages are captured once and shared.

The oracle is JAX itself: the same program run with jax.* (how often a
function's body runs, jit's cache size, its cache-miss explanations), JAX's
make_jaxpr of the same transformation, and JAX's own compile of a sharded jit.

Custom rules replayed, Python floats as literals: test_stage_capture_rules.py.
"""
from __future__ import annotations

import collections
import contextlib
import logging
import warnings
from typing import Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from sweeps import sweep

import transforms
from transforms._capture import active_session
from transforms.model import default_pair, find_stage, load

REVERSE = ("f", "jvp(f)", "linearize(f)", "linear(f)", "transpose(linear(f))")


class Counted:
    """A user function with a counter in its body."""

    def __init__(self):
        self.runs = 0

    def __call__(self, x, y):
        self.runs += 1
        return jnp.sum(jnp.sin(x) * y) + jnp.sum(x ** 2)


X, Y = jnp.arange(3.0), jnp.ones(3)
XS, YS = jnp.ones((2, 3)), jnp.ones((2, 3))


def _calls(T):
    """(name, program) pairs: each program calls a composition of T's transforms twice."""
    def twice(build, *args):
        def run(f):
            g = build(f)
            g(*args)
            g(*args)
        return run
    return [
        ("grad", twice(lambda f: T.grad(f), X, Y)),
        ("value_and_grad", twice(lambda f: T.value_and_grad(f, argnums=(0, 1)), X, Y)),
        ("vmap", twice(lambda f: T.vmap(f), XS, YS)),
        ("jit", twice(lambda f: T.jit(f), X, Y)),
        ("vmap_grad", twice(lambda f: T.vmap(T.grad(f)), XS, YS)),
        ("jit_grad", twice(lambda f: T.jit(T.grad(f)), X, Y)),
        ("grad_jit", twice(lambda f: T.grad(T.jit(f)), X, Y)),
        ("jit_vmap", twice(lambda f: T.jit(T.vmap(f)), XS, YS)),
        ("jit_vmap_grad", twice(lambda f: T.jit(T.vmap(T.grad(f))), XS, YS)),
        ("jacrev", twice(lambda f: T.jacrev(f), X, Y)),
        ("hessian", twice(lambda f: T.hessian(f), X, Y)),
        ("jvp", lambda f: T.jvp(f, (X, Y), (X, Y))),
        ("vjp_and_pullback", lambda f: T.vjp(f, X, Y)[1](1.0)),
        ("linearize_and_push", lambda f: T.linearize(f, X, Y)[1](X, Y)),
    ]


NAMES = [name for name, _ in _calls(jax)]


@pytest.mark.parametrize("index", sweep(list(range(len(NAMES))), NAMES, every=4))
def test_the_users_function_runs_as_often_as_without_the_workbench(index):
    plain, ours = Counted(), Counted()
    _calls(jax)[index][1](plain)
    with transforms.record() as session:
        _calls(transforms)[index][1](ours)
    assert session.calls and all(c.stages for c in session.calls)
    assert ours.runs == plain.runs


def test_jits_cache_sees_the_same_hits_and_misses(caplog):
    def f(x):
        return jnp.sin(x) * 2

    def run(T):
        jitted = T.jit(f)
        for x in (X, X, XS, X, XS, jnp.ones(4)):
            jitted(x)
        return jitted._cache_size()

    jax.config.update("jax_explain_cache_misses", True)
    try:
        with caplog.at_level(logging.WARNING):
            plain_size = run(jax)
            plain_misses = sum("TRACING CACHE MISS" in r.getMessage() for r in caplog.records)
            caplog.clear()
            with transforms.record() as session:
                our_size = run(transforms)
            our_misses = sum("TRACING CACHE MISS" in r.getMessage() for r in caplog.records)
    finally:
        jax.config.update("jax_explain_cache_misses", False)
    assert our_size == plain_size == 3
    assert our_misses == plain_misses
    assert [len(c.stages) for c in session.calls] == [5, 5, 5]


# (case, a program calling T's transforms with a jit inside another transformation; each
# run makes its functions afresh, so JAX's caches hold nothing of an earlier run's)
INNER_JITS = [
    ("jit", lambda T: T.jit(lambda x: jnp.sin(x) * 2)(X)),
    ("grad_jit", lambda T: T.grad(T.jit(lambda x: jnp.sin(x)))(3.0)),
    ("grad_jit_twice", lambda T: [T.grad(T.jit(lambda x: jnp.cos(x)))(x) for x in (3.0, 4.0)]),
    ("vjp_checkpoint_jit", lambda T: [T.vjp(jax.checkpoint(T.jit(lambda x: 2 * x)), 1.0)[0]
                                      for _ in range(5)]),
    ("vmap_jit", lambda T: T.vmap(T.jit(lambda x: jnp.tanh(x)))(XS)),
    ("jit_with_inner_jit", lambda T: T.jit(lambda x: T.jit(lambda y: jnp.exp(y))(x) + 1)(X)),
    ("jit_value_and_grad_jit", lambda T: T.jit(T.value_and_grad(
        lambda x: jnp.sum(T.jit(lambda y: jnp.sin(y))(x))))(X)),
    ("vjp_pullback_custom_bwd_jit", lambda T: _pullback_through_a_custom_bwd(T)),
]


def _pullback_through_a_custom_bwd(T):
    """A jit inside a custom_vjp's bwd, which only the pullback runs (its stages wait for it)."""
    @jax.custom_vjp
    def g(x):
        return jnp.sin(x)
    g.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)),
             lambda c, t: (T.jit(lambda u: c * u)(t),))
    return T.vjp(lambda x: jnp.sum(T.jit(lambda y: g(y) * 2)(x)), X)[1](1.0)


@contextlib.contextmanager
def _jax_counts() -> Iterator[Callable[[], dict]]:
    """JAX's own counters (its test suite's): lowerings and compilations since entered."""
    from jax._src import test_util as jtu
    with jtu.count_jit_and_pmap_lowerings() as lowerings, \
            jtu.count_jit_compilation_cache_miss() as compilations:
        yield lambda: {"lowerings": lowerings(), "compilations": compilations()}


@pytest.mark.parametrize("program", [c[1] for c in INNER_JITS], ids=[c[0] for c in INNER_JITS])
def test_jax_lowers_and_compiles_as_often_as_without_the_workbench(program):
    # a jit inside a transformation is never lowered by itself in JAX, so stage capture
    # must not lower it; a top-level jit's stages are JAX's own lowering, from its caches
    with transforms.record() as session:  # JAX's caches are keyed on the block: all in one
        program(jax)  # JAX's own jits (jnp's) lowered under this key, for both sides
        with _jax_counts() as plain:
            program(jax)
        plain_counts = plain()
        with _jax_counts() as ours:
            program(transforms)
    assert session.calls and all(c.stages for c in session.calls)
    assert plain_counts["lowerings"] > 0
    assert ours() == plain_counts  # read after the block's end, which reads a jit's stages


def test_a_jit_inside_grad_says_what_jax_compiles_instead():
    with transforms.record() as session:
        transforms.grad(transforms.jit(jnp.sin))(3.0)
    hlo = find_stage(session.calls[0].stages, "hlo(jit(f))")
    assert not hlo.available
    assert hlo.reason == ("JAX does not compile jit(sin) by itself inside grad: it compiles its "
                          "forward and backward parts (in the linearize and transpose stages); a "
                          "call of jit(sin) outside any transformation has these stages")
    assert find_stage(session.calls[0].stages, "transpose(linear(jit(f)))").available


def test_a_default_record_keeps_stages():
    with transforms.record() as session:
        transforms.grad(Counted())(X, Y)
    assert tuple(s.name for s in session.calls[0].stages) == REVERSE + ("grad(f)",)
    with transforms.record(stages=False) as session:
        transforms.grad(Counted())(X, Y)
    assert session.calls[0].stages == ()


def test_a_thousand_calls_of_one_signature_capture_once(tmp_path):
    f = Counted()
    g = transforms.grad(f)
    with transforms.record() as session:
        for i in range(1000):
            g(X * i, Y)
        assert active_session().stages.captures == 1
        # a new signature (another shape) is captured on its own
        g(XS[0, :2], Y[:2])
        assert active_session().stages.captures == 2
    assert f.runs == 1001
    first = session.calls[0].stages
    assert all(c.stages is first for c in session.calls[:1000])
    assert session.calls[1000].stages is not first
    path = tmp_path / "loop.json"
    session.save(path)
    loaded = load(path)
    assert loaded.calls[999].stages == first
    assert loaded.calls[999].stages is loaded.calls[0].stages  # stored once in the dump


def test_a_lambda_made_afresh_each_step_is_one_signature():
    def loss(w, x):
        return jnp.sum(jnp.tanh(x * w))
    with transforms.record() as session:
        for i in range(5):
            batch = jnp.ones(3) * i
            transforms.grad(lambda w: loss(w, batch))(X)
        captures = active_session().stages.captures
    assert captures == 1
    assert len({id(c.stages) for c in session.calls}) == 1


def test_a_static_value_is_part_of_the_signature():
    def power(x, n):
        for _ in range(n):
            x = x * x
        return jnp.sum(x)
    with transforms.record() as session:
        for n in (1, 2, 2, 3):
            transforms.grad(power)(X, n)
    counts = [find_stage(c.stages, "f").eqn_count for c in session.calls]
    assert counts == [2, 3, 3, 4]
    assert session.calls[1].stages is session.calls[2].stages


def test_stages_are_jaxs_own_at_the_point():
    f = Counted()
    with transforms.record() as session:
        transforms.value_and_grad(f)(X, Y)
    stages = session.calls[0].stages
    assert find_stage(stages, "f").jaxpr.text == str(jax.make_jaxpr(Counted())(X, Y))
    assert find_stage(stages, "value_and_grad(f)").jaxpr.text == str(
        jax.make_jaxpr(jax.value_and_grad(Counted()))(X, Y))


# --- autodiff inside jit: the usual training step ------------------------------------

def mlp_loss(params, x, y):
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    pred = h @ params["w2"]
    return jnp.mean((pred - y) ** 2)


def mlp_params():
    k1, k2 = jax.random.split(jax.random.key(0))
    return {"w1": jax.random.normal(k1, (4, 8)) * 0.1, "b1": jnp.zeros(8),
            "w2": jax.random.normal(k2, (8, 2)) * 0.1}


def make_train_step(T, runs):
    """A flax/optax-style step: value_and_grad inside a jit, an SGD update."""
    def loss(params, x, y):
        runs["loss"] += 1
        return mlp_loss(params, x, y)

    @T.jit
    def train_step(params, x, y):
        runs["step"] += 1
        value, grads = T.value_and_grad(loss)(params, x, y)
        params = jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)
        return params, value
    return train_step, loss


def test_a_jitted_training_step_has_the_inner_value_and_grads_stages():
    x, y = jnp.ones((16, 4)), jnp.zeros((16, 2))
    plain_runs, our_runs = {"loss": 0, "step": 0}, {"loss": 0, "step": 0}
    plain_step, _ = make_train_step(jax, plain_runs)
    step, loss = make_train_step(transforms, our_runs)
    params = plain_params = mlp_params()
    with transforms.record() as session:
        for _ in range(3):
            params, value = step(params, x, y)
            plain_params, plain_value = plain_step(plain_params, x, y)
    assert our_runs == plain_runs == {"loss": 1, "step": 1}
    np.testing.assert_allclose(value, plain_value)
    (call,) = session.calls
    names = [s.name for s in call.stages]
    assert names == ["f", "stablehlo(jit(f))", "hlo(jit(f))", "cost(jit(f))", "memory(jit(f))",
                     "loss", "jvp(loss)", "linearize(loss)", "linear(loss)",
                     "transpose(linear(loss))", "value_and_grad(loss)"]
    assert all(s.available for s in call.stages), [(s.name, s.reason) for s in call.stages]
    p, args = mlp_params(), (x, y)
    assert find_stage(call.stages, "f").jaxpr.text == str(
        make_train_step(jax, {"loss": 0, "step": 0})[0].trace(p, *args).jaxpr)
    assert find_stage(call.stages, "value_and_grad(loss)").jaxpr.text == str(
        jax.make_jaxpr(jax.value_and_grad(mlp_loss))(p, *args))
    assert find_stage(call.stages, "loss").jaxpr.text == str(jax.make_jaxpr(mlp_loss)(p, *args))
    # the inner gradient tree, paired with the parameters
    (pair,) = [q for q in call.pairs if q.kind == "gradient"]
    assert pair.title == "loss: params vs its gradient"
    assert [r.path for r in pair.rows] == ["", "['b1']", "['w1']", "['w2']"]
    assert {r.status for r in pair.rows} == {"same"}
    # the graph and the TUI compare the inner function with its transformed program
    before, after = default_pair(call.stages)
    assert (call.stages[before].name, call.stages[after].name) == ("loss",
                                                                     "value_and_grad(loss)")


def test_custom_rules_inside_a_closure_over_jits_values_are_replayed():
    """A training step's loss as a lambda closing over the batch (tracers of the jit),
    through jax.nn.relu's custom_jvp: the closure's values are the group's, not the rule's."""
    def build(T, runs):
        @T.jit
        def step(params, x, y):
            def loss(p):
                runs["loss"] += 1
                return mlp_loss(p, x, y)
            value, grads = T.value_and_grad(loss)(params)
            return value, grads
        return step
    x, y = jnp.ones((16, 4)), jnp.zeros((16, 2))
    plain, ours = collections.Counter(), collections.Counter()
    build(jax, plain)(mlp_params(), x, y)
    with transforms.record() as session:
        build(transforms, ours)(mlp_params(), x, y)
    assert ours == plain
    stages = session.calls[0].stages
    assert all(s.available for s in stages), [(s.name, s.reason) for s in stages if not s.available]
    assert [s.name for s in stages if "loss" in s.name] == [
        "loss", "jvp(loss)", "linearize(loss)", "linear(loss)", "transpose(linear(loss))",
        "value_and_grad(loss)"]


# --- vjp's pullback: the forward call's stages, at the primal's types ----------------

def test_a_pullbacks_stages_are_at_the_primals_types():
    def f(x):
        return jnp.sum(x) * x.shape[0]

    with transforms.record() as session:
        out, pullback = transforms.vjp(f, jnp.ones((3, 3)))
        pullback(jnp.float32(1.0))
    forward, backward = session.calls
    assert backward.transform == "vjp_backward" and backward.parent == 0
    assert backward.stages is forward.stages
    stage = find_stage(backward.stages, "f")
    assert stage.available and stage.jaxpr.in_avals == ("float32[3,3]",)
    assert stage.jaxpr.text == str(jax.make_jaxpr(f)(jnp.ones((3, 3))))
    transposed = find_stage(backward.stages, "transpose(linear(f))")
    assert transposed.jaxpr.in_avals == ("float32[]",)
    assert transposed.jaxpr.out_avals == ("float32[3,3]",)


# --- sharded jit: the program JAX compiles for these arguments -------------------------

def _collectives(text: str) -> list[str]:
    kinds = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
    return [k for line in text.splitlines() for k in kinds if f" {k}(" in line
            or f" {k}-start(" in line]


def data_parallel_loss(w, x):
    return jnp.sum(jnp.tanh(x * w))  # x's rows are sharded: summing them is an all-reduce


def _mesh_cases():
    devices = np.array(jax.devices()[:8])
    cases = [("Mesh", lambda: Mesh(devices, ("data",)))]
    cases.append(("make_mesh", lambda: jax.make_mesh((8,), ("data",))))
    return cases


@pytest.mark.parametrize("make_mesh", [m for _, m in _mesh_cases()],
                         ids=[n for n, _ in _mesh_cases()])
@pytest.mark.parametrize("how", ["grad_under_jit", "device_put_plain_jit"])
def test_a_sharded_jit_compiles_with_the_arguments_shardings(make_mesh, how):
    mesh = make_mesh()
    x = jax.device_put(jnp.ones((16, 4)), NamedSharding(mesh, P("data", None)))
    w = jnp.ones((4,))
    if how == "device_put_plain_jit":
        w = jax.device_put(w, NamedSharding(mesh, P()))

    def build(T):
        return T.jit(T.grad(data_parallel_loss)) if how == "grad_under_jit" else \
            T.jit(data_parallel_loss)
    oracle = _collectives(build(jax).lower(w, x).compile().as_text())
    with transforms.record() as session:
        build(transforms)(w, x)
    (call,) = session.calls
    (hlo,) = [s for s in call.stages if s.role == "hlo"]
    assert hlo.available, hlo.reason
    assert all(s.available for s in call.stages), [(s.name, s.reason) for s in call.stages]
    assert "all-reduce" in oracle
    assert [c.kind for c in hlo.collectives] == oracle
    by_name = {r.name: r for r in call.shardings}
    assert by_name["x"].spec == "P('data', None)" and by_name["x"].mesh_shape == (8,)


@pytest.mark.parametrize("context", ["set_mesh", "with_mesh"])
def test_a_sharded_jit_under_a_mesh_context(context):
    mesh = Mesh(np.array(jax.devices()[:8]), ("data",))
    x = jax.device_put(jnp.ones((16, 4)), NamedSharding(mesh, P("data", None)))
    runs = []

    def loss(w, x):
        runs.append(1)
        return data_parallel_loss(w, x)

    with transforms.record() as session:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # `with mesh:` on new JAX
            with jax.set_mesh(mesh) if context == "set_mesh" else mesh:
                transforms.jit(transforms.grad(loss))(jnp.ones(4), x)
    assert len(runs) == 1
    (hlo,) = [s for s in session.calls[0].stages if s.role == "hlo"]
    assert hlo.available, hlo.reason
    assert "all-reduce" in [c.kind for c in hlo.collectives]


def test_a_capture_that_would_retrace_is_refused_not_run():
    runs = []

    def f(x):
        runs.append(1)
        return x * 2

    jitted = transforms.jit(f)
    with transforms.record() as session:
        jitted(X)
        jitted.clear_cache()  # JAX forgets the trace before the stages are read
    assert len(runs) == 1
    f_stage = find_stage(session.calls[0].stages, "f")
    assert not f_stage.available
    assert "stages never run the user's function again" in f_stage.reason


# --- the workbench on a default dump ----------------------------------------------------

TRAIN = """
import jax, jax.numpy as jnp
runs = []
def loss(params, x, y):
    runs.append(1)
    return jnp.mean((jnp.tanh(x @ params["w"] + params["b"]) - y) ** 2)
@jax.jit
def step(params, x, y):
    value, grads = jax.value_and_grad(loss)(params, x, y)
    return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), value
params = {"w": jnp.ones((3, 2)), "b": jnp.zeros(2)}
for _ in range(3):
    params, value = step(params, jnp.ones((4, 3)), jnp.zeros((4, 2)))
g = jax.grad(loss)
for _ in range(3):
    g(params, jnp.ones((4, 3)), jnp.zeros((4, 2)))
print("loss ran", len(runs), "times")
"""


@pytest.fixture(scope="module")
def default_dump(tmp_path_factory):
    from workbench.cli import main
    folder = tmp_path_factory.mktemp("run")
    script = folder / "train.py"
    script.write_text(TRAIN)
    dump = folder / "t.json"
    assert main(["run", "-q", "-o", str(dump), str(script)]) == 0
    return dump


def test_a_default_workbench_run_dump_carries_stages(default_dump, capsys):
    session = load(default_dump)
    assert [c.transform for c in session.calls] == ["jit", "grad", "grad", "grad"]
    assert all(c.stages for c in session.calls)
    assert session.calls[2].stages is session.calls[1].stages
    from workbench.cli import main
    assert main(["show", str(default_dump)]) == 0
    out = capsys.readouterr().out
    # the counts are JAX's own (they differ between JAX versions): show prints what was recorded
    stages = {s.name: s for s in session.calls[0].stages + session.calls[1].stages}
    inner = stages["value_and_grad(loss)"].eqn_count
    backward = stages["transpose(linear(f))"].eqn_count
    assert f"    value_and_grad(loss)     {inner} eqns" in out
    assert f"    transpose(linear(f))  {backward} eqns" in out
    assert "  stages: 6, shared with call 1 (same signature)" in out


def test_run_without_stages(tmp_path):
    from workbench.cli import main
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    dump = tmp_path / "t.json"
    assert main(["run", "-q", "--no-stages", "-o", str(dump), str(script)]) == 0
    assert all(not c.stages for c in load(dump).calls)


@pytest.mark.parametrize("view", ["jaxpr", "stages", "tower", "pytree", "devices"])
@pytest.mark.parametrize("call", [0, 1])
def test_graph_works_on_a_default_dump_for_every_view(default_dump, tmp_path, view, call):
    from workbench.cli import main
    out = tmp_path / f"{view}.svg"
    assert main(["graph", str(default_dump), "--view", view, "--call", str(call),
                 "-o", str(out)]) == 0
    assert out.read_text().lstrip().startswith(("<?xml", "<svg"))


def test_graph_stages_without_a_pair_lists_the_stage_names(tmp_path, capsys):
    from workbench.cli import main
    with transforms.record() as session:
        transforms.jit(lambda x: x * 2)(X)
    path = tmp_path / "jit.json"
    session.save(path)
    assert main(["graph", str(path), "--view", "stages", "-o", str(tmp_path / "s.svg")]) == 2
    err = capsys.readouterr().err
    assert "has no function with two jaxpr stages to compare (jaxpr stages: f)" in err
