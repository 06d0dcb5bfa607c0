"""Stages by default, from what the call traced: the user's Python runs exactly
as many times as without the workbench, JAX's caches see the same hits and
misses, and each signature's stages are captured once and shared.

The oracle is JAX itself: the same program run with jax.* (how often a
function's body runs, jit's cache size, its cache-miss explanations), JAX's
make_jaxpr of the same transformation, and JAX's own compile of a sharded jit.
"""
from __future__ import annotations

import collections
import contextlib
import logging
import warnings
import weakref
from typing import Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

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


@pytest.mark.parametrize("index", range(len(NAMES)), ids=NAMES)
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


# --- custom_jvp / custom_vjp: bodies and rules replayed, never run again ------------

def custom_loss(with_vjp=True):
    """A loss through custom rules, each body and rule counting its runs: `f`'s rule
    calls `f` (as jax.nn.relu's does), `h`'s and `g`'s never run their bodies."""
    runs = collections.Counter()

    @jax.custom_jvp
    def f(x):
        runs["f"] += 1
        return jnp.sin(x) * 2.0

    @f.defjvp
    def f_jvp(primals, tangents):
        runs["f_jvp"] += 1
        return f(primals[0]), jnp.cos(primals[0]) * 2.0 * tangents[0]

    @jax.custom_jvp
    def h(x):
        runs["h"] += 1
        return jnp.tanh(x)

    @h.defjvp
    def h_jvp(primals, tangents):
        runs["h_jvp"] += 1
        y = jnp.tanh(primals[0])
        return y, (1 - y ** 2) * tangents[0]

    @jax.custom_vjp
    def g(x):
        runs["g"] += 1
        return jnp.sin(x)

    def g_fwd(x):
        runs["g_fwd"] += 1
        return jnp.sin(x), jnp.cos(x)

    def g_bwd(cos_x, t):
        runs["g_bwd"] += 1
        return (cos_x * t,)
    g.defvjp(g_fwd, g_bwd)

    def loss(x, y):
        out = jnp.sum(f(x) * y) + jnp.sum(h(x)) + jnp.sum(jax.nn.relu(x))
        return out + jnp.sum(g(x)) if with_vjp else out  # no jvp of a custom_vjp in JAX
    return loss, runs


# (case, whether the loss has a custom_vjp, the program)
CUSTOM_CALLS = [
    ("grad", True, lambda T, f: T.grad(f)(X, Y)),
    ("value_and_grad", True, lambda T, f: T.value_and_grad(f, argnums=(0, 1))(X, Y)),
    ("jit_grad", True, lambda T, f: T.jit(T.grad(f))(X, Y)),
    ("vmap_grad", True, lambda T, f: T.vmap(T.grad(f))(XS, YS)),
    ("grad_jit", True, lambda T, f: T.grad(T.jit(f))(X, Y)),
    ("jit_vmap_grad", True, lambda T, f: T.jit(T.vmap(T.grad(f)))(XS, YS)),
    ("vmap", True, lambda T, f: T.vmap(f)(XS, YS)),
    ("jacrev", True, lambda T, f: T.jacrev(f)(X, Y)),
    ("jacfwd", False, lambda T, f: T.jacfwd(f)(X, Y)),
    ("hessian", False, lambda T, f: T.hessian(f)(X, Y)),
    ("jvp", False, lambda T, f: T.jvp(f, (X, Y), (Y, X))),
    ("vjp_and_pullback", True, lambda T, f: T.vjp(f, X, Y)[1](1.0)),
    ("linearize_and_push", False, lambda T, f: T.linearize(f, X, Y)[1](X, Y)),
]


@pytest.mark.parametrize("with_vjp, program", [c[1:] for c in CUSTOM_CALLS],
                         ids=[c[0] for c in CUSTOM_CALLS])
def test_custom_bodies_and_rules_run_as_often_as_without_the_workbench(with_vjp, program):
    plain_loss, plain = custom_loss(with_vjp)
    program(jax, plain_loss)
    loss, ours = custom_loss(with_vjp)
    with transforms.record() as session:
        program(transforms, loss)
    assert session.calls and all(c.stages for c in session.calls)
    assert plain["f"] >= 1 and plain["h"] + plain["h_jvp"] >= 1  # the counters count
    assert ours == plain


def _grad_oracle(loss, held: bool) -> dict:
    """JAX's own jaxprs of grad's stages of loss(x, Y) in x; `held`: y is an input
    (under jit it is traced), else a constant (an eager call's value)."""
    mj = jax.make_jaxpr
    if held:
        def jvp(p, t, y):
            return jax.jvp(lambda x: loss(x, y), p, t)
        jvp_jaxpr = mj(jvp)((X,), (X,), Y)
        linearized = mj(lambda p, y: jax.linearize(lambda x: loss(x, y), p))(X, Y)
    else:
        def at(x):
            return loss(x, Y)
        jvp_jaxpr = mj(lambda p, t: jax.jvp(at, p, t))((X,), (X,))
        linearized = mj(lambda p: jax.linearize(at, p))(X)

    def at_y(x):
        return loss(x, Y)
    return {"f": mj(loss)(X, Y), "jvp(f)": jvp_jaxpr, "linearize(f)": linearized,
            "linear(f)": mj(jax.linearize(at_y, X)[1])(X),
            "transpose(linear(f))": mj(jax.vjp(at_y, X)[1])(jnp.float32(1.0)),
            "grad(f)": mj(jax.grad(loss))(X, Y)}


def _linear_oracle(loss, tangents) -> dict:
    mj = jax.make_jaxpr
    return {"f": mj(loss)(X, Y),
            "jvp(f)": mj(lambda p, t: jax.jvp(loss, p, t))((X, Y), tangents),
            "linearize(f)": mj(lambda *p: jax.linearize(loss, *p))(X, Y),
            "linear(f)": mj(jax.linearize(loss, X, Y)[1])(X, Y),
            "transpose(linear(f))": mj(jax.vjp(loss, X, Y)[1])(jnp.float32(1.0))}


CUSTOM_ORACLES = [
    # (case, with_vjp, program, oracle of the stages it must have)
    ("grad", True, lambda T, f: T.grad(f)(X, Y), lambda f: _grad_oracle(f, held=False)),
    ("jit_grad", True, lambda T, f: T.jit(T.grad(f))(X, Y), lambda f: _grad_oracle(f, held=True)),
    ("vmap_grad", True, lambda T, f: T.vmap(T.grad(f))(XS, YS), lambda f: {
        "f": jax.make_jaxpr(f)(X, Y), "grad(f)": jax.make_jaxpr(jax.grad(f))(X, Y),
        "vmap(grad(f))": jax.make_jaxpr(jax.vmap(jax.grad(f)))(XS, YS)}),
    ("jvp", False, lambda T, f: T.jvp(f, (X, Y), (Y, X)), lambda f: {
        k: v for k, v in _linear_oracle(f, (Y, X)).items() if k in ("f", "jvp(f)")}),
    ("vjp", False, lambda T, f: T.vjp(f, X, Y), lambda f: {
        k: v for k, v in _linear_oracle(f, (X, Y)).items() if k != "linearize(f)"}),
    ("linearize", False, lambda T, f: T.linearize(f, X, Y), lambda f: {
        k: v for k, v in _linear_oracle(f, (X, Y)).items() if k != "transpose(linear(f))"}),
]


@pytest.mark.parametrize("with_vjp, program, oracle", [c[1:] for c in CUSTOM_ORACLES],
                         ids=[c[0] for c in CUSTOM_ORACLES])
def test_replayed_custom_rules_stage_jaxs_own_jaxprs(with_vjp, program, oracle):
    loss, runs = custom_loss(with_vjp)
    with transforms.record() as session:
        program(transforms, loss)
    stages = session.calls[0].stages
    expected = oracle(custom_loss(with_vjp)[0])
    for name, closed in expected.items():
        stage = find_stage(stages, name)
        assert stage.available, (name, stage.reason)
        assert stage.jaxpr.text == str(closed), name
    assert "custom_jvp_call" in find_stage(stages, "f").jaxpr.text


def test_a_body_that_never_ran_is_staged_from_its_rule_and_the_stage_says_so():
    loss, runs = custom_loss()
    with transforms.record() as session:
        transforms.grad(loss)(X, Y)
    assert runs["g"] == 0 and runs["h"] == 0  # grad ran g_fwd and h_jvp, never g or h
    stages = session.calls[0].stages
    note = find_stage(stages, "f").note
    assert ("custom_loss.<locals>.g's body did not run at this call "
            "(custom_loss.<locals>.g_fwd, its custom_vjp fwd rule, ran instead), and stages "
            "never run your Python again: the custom_vjp_call body shown here is the part of "
            "custom_loss.<locals>.g_fwd that computes custom_loss.<locals>.g's outputs.") in note
    assert "custom_loss.<locals>.h's body did not run" in note
    assert not find_stage(stages, "jvp(f)").note  # the stages that hold only rules: no note


def test_a_rule_that_did_not_run_is_not_run_for_a_stage():
    """vjp's pullback runs g_bwd after the vjp call's stages are captured."""
    loss, runs = custom_loss()
    with transforms.record() as session:
        transforms.vjp(loss, X, Y)
    assert runs["g_bwd"] == 0
    stage = find_stage(session.calls[0].stages, "transpose(linear(f))")
    assert not stage.available
    assert stage.reason == (
        "RuleNotRun: custom_loss.<locals>.g_bwd (a custom_vjp bwd rule) cannot be staged: it "
        "did not run at this call at these argument types (a bwd rule runs in the backward "
        "pass: after jax.vjp, when its pullback is called, later than the vjp call's stages "
        "are made), and stages never run the user's Python again")


def _pullback_stages(session) -> list:
    return [find_stage(c.stages, "transpose(linear(f))") for c in session.calls]


@pytest.mark.parametrize("cotangent", [1.0, jnp.float32(1.0)], ids=["python_float", "array"])
def test_a_bwd_rule_its_pullback_ran_completes_the_vjp_calls_stages(tmp_path, cotangent):
    """The bwd runs when the pullback is called, after the vjp call's stages were made:
    its run, kept as a tape, completes them (as JAX's own jaxprs, at the cotangent the
    pullback was given), in the vjp call, in the pullback's call and in a dump."""
    loss, runs = custom_loss()
    with transforms.record() as session:
        _, pullback = transforms.vjp(loss, X, Y)
        pullback(cotangent)
    assert runs["g_bwd"] == 1  # once, by JAX's pullback; no stage ran it
    forward, backward = session.calls
    assert backward.transform == "vjp_backward" and forward.stages is backward.stages
    expected = {k: v for k, v in _linear_oracle(custom_loss()[0], (X, Y)).items()
                if k != "linearize(f)"}
    expected["transpose(linear(f))"] = jax.make_jaxpr(
        jax.vjp(custom_loss()[0], X, Y)[1])(cotangent)
    note = ("staged at the cotangent the pullback was called with (float32[] weakly typed), "
            "the types its custom rules ran at, not at the outputs' types")
    assert find_stage(forward.stages, "transpose(linear(f))").note == (
        note if isinstance(cotangent, float) else "")
    path = tmp_path / "session.json"
    session.save(path)
    for calls in (session.calls, load(path).calls):
        for call in calls:
            for name, closed in expected.items():
                stage = find_stage(call.stages, name)
                assert stage.available, (name, stage.reason)
                assert stage.jaxpr.text == str(closed), name
    assert "custom_vjp_bwd" in {level.kind for level in backward.levels}


def test_completing_the_vjp_calls_stages_that_fails_is_noted_on_the_pullbacks_call(
        monkeypatch):
    """A fault of ours while the pullback's rules complete the vjp call's stages: the stages
    stay as they were, and the pullback's call says what was lost (nothing silent)."""
    from transforms._stages import _chain

    def broken(*args, **kwargs):
        raise RuntimeError("no stages today")

    loss, _ = custom_loss()
    with transforms.record() as session:
        _, pullback = transforms.vjp(loss, X, Y)
        monkeypatch.setattr(_chain, "_capture_group", broken)
        pullback(1.0)
    forward, backward = session.calls
    assert not find_stage(forward.stages, "transpose(linear(f))").available
    assert forward.diagnostics == ()
    assert [(d.kind, d.message) for d in backward.diagnostics] == [(
        "internal", "the workbench failed completing the forward call's stages with the "
        "pullback's rules: RuntimeError: no stages today")]


def test_the_issue_repro_every_stage_of_vjp_and_its_pullback_is_available():
    @jax.custom_vjp
    def g(x):
        return jnp.sin(x)

    def g_fwd(x):
        return jnp.sin(x), jnp.cos(x)

    def g_bwd(c, t):
        return (c * t,)
    g.defvjp(g_fwd, g_bwd)

    def loss(x):
        return jnp.sum(g(x) * 2)
    with transforms.record() as session:
        _, pullback = transforms.vjp(loss, X)
        pullback(1.0)
    assert [s.name for s in session.calls[0].stages if not s.available] == []
    assert session.calls[1].stages is session.calls[0].stages
    stage = find_stage(session.calls[0].stages, "transpose(linear(f))")
    assert stage.jaxpr.text == str(jax.make_jaxpr(jax.vjp(loss, X)[1])(1.0))
    # the bwd's equation (the last) names no step of the vjp call: its steps are the pullback's
    assert stage.jaxpr.text.splitlines()[-2].strip().startswith("f:f32[3] = mul b e")
    assert stage.eqn_steps[-1] == -1 and all(0 <= n for n in stage.eqn_steps[:-1])


def test_a_pullback_completes_the_stages_every_call_of_its_signature_holds():
    """Two vjp calls of one signature share their stages, captured by the first: its
    pullback completes them for every call holding them, and for later calls."""
    loss, runs = custom_loss()
    with transforms.record() as session:
        _, first = transforms.vjp(loss, X, Y)
        _, second = transforms.vjp(loss, X + 1, Y)
        second(1.0)  # its bwd is not the one the first call's stages replay (JAX's own
        # WrappedFun for each vjp call): nothing is completed by it
        assert not any(s.available for s in _pullback_stages(session))
        first(1.0)
        transforms.vjp(loss, X, Y)  # a later call shares the completed ones
    assert runs["g_bwd"] == 2
    assert [c.parent for c in session.calls] == [None, None, 1, 0, None]
    assert len({id(c.stages) for c in session.calls}) == 1
    expected = str(jax.make_jaxpr(jax.vjp(custom_loss()[0], X, Y)[1])(1.0))
    assert all(s.available and s.jaxpr.text == expected for s in _pullback_stages(session))


def test_a_pullback_that_fails_leaves_the_stage_waiting():
    @jax.custom_vjp
    def g(x):
        return jnp.sin(x)
    calls = []

    def g_bwd(c, t):
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("bwd failed")
        return (c * t,)
    g.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), g_bwd)
    with transforms.record() as session:
        _, pullback = transforms.vjp(lambda x: jnp.sum(g(x)), X)
        with pytest.raises(ValueError, match="bwd failed"):
            pullback(1.0)
        assert not any(s.available for s in _pullback_stages(session))
        pullback(1.0)
    assert len(calls) == 2
    forward, failed, backward = session.calls
    assert failed.errors and not backward.errors
    stage = find_stage(forward.stages, "transpose(linear(f))")
    assert stage.available and stage.jaxpr.text == str(jax.make_jaxpr(
        jax.vjp(lambda x: jnp.sum(g(x)), X)[1])(1.0))
    assert backward.stages is forward.stages is failed.stages  # one tuple for the signature


def test_a_rule_given_one_array_twice_is_not_replayed():
    loss, runs = custom_loss(with_vjp=False)
    with transforms.record() as session:
        transforms.jvp(loss, (X, Y), (X, Y))  # X is both a primal and a tangent of f_jvp
    assert runs["f_jvp"] == 1
    stage = find_stage(session.calls[0].stages, "jvp(f)")
    assert not stage.available and "was given one array as two of its arguments" in stage.reason


# --- a Python float the transformation does not trace: a literal, and said so -----------

def scaled_sin(x, y):
    return jnp.sum(jnp.sin(x) * y)


def sin_only(x, y):
    return jnp.sum(jnp.sin(x))


FLOAT_NOTE = ("y=2.0 is a Python float that {kind} does not trace: scaled_sin ran with it as "
              "a constant, so these stages hold it as a literal, not an input (jax.make_jaxpr "
              "traces a float argument as an input)")


@pytest.mark.parametrize("kind, program", [
    ("grad", lambda T: T.grad(scaled_sin)(X, 2.0)),
    ("vmap", lambda T: T.vmap(scaled_sin, in_axes=(0, None))(XS, 2.0)),
    ("grad", lambda T: T.vmap(T.grad(scaled_sin), in_axes=(0, None))(XS, 2.0)),
], ids=["grad", "vmap", "vmap_grad"])
def test_a_python_float_the_transformation_does_not_trace_is_a_noted_literal(kind, program):
    seen = []
    jax.grad(lambda x, y: seen.append(type(y)) or scaled_sin(x, y))(X, 2.0)
    assert seen == [float]  # JAX itself runs f with the float, not a tracer of it
    with transforms.record() as session:
        program(transforms)
    jaxpr_stages = [s for s in session.calls[0].stages if s.jaxpr is not None]
    assert jaxpr_stages and all(s.note == FLOAT_NOTE.format(kind=kind) for s in jaxpr_stages)
    assert "mul c 2.0:f32[]" in find_stage(session.calls[0].stages, "f").jaxpr.text


@pytest.mark.parametrize("program", [
    lambda T: T.grad(scaled_sin, argnums=(0, 1))(X, 2.0),  # traced: an input
    lambda T: T.jit(scaled_sin)(X, 2.0),
    lambda T: T.grad(sin_only)(X, 2.0),  # not used at all: nothing baked in
], ids=["differentiated", "jit", "unused"])
def test_a_traced_or_unused_float_has_no_note(program):
    with transforms.record() as session:
        program(transforms)
    assert not any(s.note for s in session.calls[0].stages)


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


def test_a_jit_the_program_drops_inside_the_block_keeps_its_stages_and_frees_at_once():
    """Its stages are read when the program drops it: what JAX frees then is freed then."""
    x = jnp.ones(10)
    f = (lambda x: lambda: x * 2)(x)  # x lives in f's closure
    x_ref = weakref.ref(x)
    del x
    with transforms.record() as session:
        g = transforms.jit(f)
        g()
        del f, g
        assert x_ref() is None  # JAX's cache of the trace (x among its constants) is gone
        transforms.jit(lambda y: jnp.sin(y))(1.0)  # a temporary, dropped at once
    for call in session.calls:
        roles = {s.role: s.available for s in call.stages}
        assert roles["f"] and roles["hlo"], [(s.name, s.reason) for s in call.stages]
