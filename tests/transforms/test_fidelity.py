"""Recording changes nothing JAX does (issue 12): jax.* is the oracle, inside record() as outside.

Each section here and in test_fidelity_jit.py and test_fidelity_frames.py is one cause found by
running JAX's own test suite with our transforms swapped in (scripts/jax_suite.py): here, Trace
methods we did not handle and our objects in what JAX builds. The `recording` fixture (outside,
recorded, with stages) is in conftest.py.
"""
from __future__ import annotations

import functools
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.ad_checkpoint import checkpoint_name

import transforms as T
from transforms import _jax as _door


def _same(a, b):
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)


# --- 1. every method of JAX's Trace base class ---------------------------------------

def test_every_method_of_jax_trace_base_class_is_handled():
    """Fails when a JAX release adds a Trace method: decide how RecordingTrace handles it."""
    unknown = _door.trace_base_names() - _door.TRACE_METHODS.keys()
    assert unknown == set(), f"JAX's Trace has new names: {sorted(unknown)}"
    assert _door.UNKNOWN_TRACE_METHODS == []
    base = vars(_door.Trace)
    for name, how in _door.TRACE_METHODS.items():
        if how in ("recorded", "forwarded") and name in base:
            assert name in vars(_door.RecordingTrace), name


def test_a_base_method_we_do_not_know_is_forwarded_not_raised(monkeypatch):
    Trace = _door.Trace

    def process_future(self, primitive, tracers, params):
        raise NotImplementedError("must override")

    monkeypatch.setattr(Trace, "process_future", process_future, raising=False)
    try:
        assert _door._forward_unknown_base_methods() == ["process_future"]

        class Parent(Trace):
            def process_future(self, primitive, tracers, params):
                return ("parent", params["n"])

        class Level:
            label = "x#1"

            def begin_step(self, *args):
                return args

            def end_step(self, *args):
                pass

        recorder = _door.RecordingTrace(Parent(), Level())
        assert recorder.process_future(jax.lax.sin_p, [], {"n": 3}) == ("parent", 3)
    finally:
        if "process_future" in vars(_door.RecordingTrace):
            delattr(_door.RecordingTrace, "process_future")


def _remat_scan(c, xs):
    return jax.checkpoint(lambda c, xs: lax.scan(lambda c, x: (jnp.sin(c * x), c), c, xs))(
        c, xs)[0]


REMAT_SCAN_CASES = {
    "grad": (lambda M: M.grad(_remat_scan), (1.0, jnp.arange(4.0))),
    "jit_grad": (lambda M: M.jit(M.grad(_remat_scan)), (1.0, jnp.arange(4.0))),
    "vmap_grad": (lambda M: M.vmap(M.grad(_remat_scan), in_axes=(0, None)),
                  (jnp.array([1.0, 0.5]), jnp.arange(4.0))),
}


@pytest.mark.parametrize("name", sorted(REMAT_SCAN_CASES))
def test_remat_of_scan_inside_record_is_jaxs(name, recording):
    """The usual way to scan over layers: a call-like primitive under grad (process_call)."""
    build, args = REMAT_SCAN_CASES[name]
    _same(build(T)(*args), build(jax)(*args))
    if recording is not None:
        assert recording.calls and all(c.ok for c in recording.calls)


def _eval_jaxpr_p():
    # NB: jax._src: the primitive JAX's own EvalJaxprPrimitiveTest binds.
    from jax._src.lax.eval_jaxpr import eval_jaxpr_p
    return eval_jaxpr_p


def _bind_eval_jaxpr(x):
    closed = jax.make_jaxpr(lambda x: [x ** 3])(x)
    # the parameter was renamed jaxpr -> call_jaxpr after jax 0.10
    key = "jaxpr" if jax.__version_info__ < (0, 11) else "call_jaxpr"
    return _eval_jaxpr_p().bind(x, **{key: closed})[0]


@pytest.mark.parametrize("name", ["grad", "vmap", "jit", "jacfwd", "jacrev", "hessian"])
def test_primitive_binding_a_jaxpr_is_jaxs(name, recording):
    x = jnp.array([1.0, 2.0, 3.0]) if name == "vmap" else jnp.array(2.0)
    _same(getattr(T, name)(_bind_eval_jaxpr)(x), getattr(jax, name)(_bind_eval_jaxpr)(x))


def test_jvp_of_a_primitive_binding_a_jaxpr_is_jaxs(recording):
    x = jnp.array(2.0)
    _same(T.jvp(_bind_eval_jaxpr, (x,), (1.0,)), jax.jvp(_bind_eval_jaxpr, (x,), (1.0,)))


@pytest.mark.skipif(not hasattr(_door.Trace, "process_call"),
                    reason="this JAX's Trace has no process_call (0.12 removed it)")
def test_core_call_bound_under_each_transform_is_jaxs(recording):
    """A core.call-style bind (JAX 0.10's call_p takes a WrappedFun): process_call."""
    from jax.extend import linear_util as lu
    from jax.extend.core.primitives import call_p, closed_call_p

    def body(y):
        return [jnp.sin(y) * y]

    def f(x):
        dbg = jax.api_util.debug_info("test", body, (x,), {})
        y = call_p.bind(x, subfuns=(lu.wrap_init(body, debug_info=dbg),))[0]
        return closed_call_p.bind(y, subfuns=(lu.wrap_init(body, debug_info=dbg),))[0]

    for name in ("grad", "jit", "jacrev"):
        _same(getattr(T, name)(f)(2.0), getattr(jax, name)(f)(2.0))
    xs = jnp.arange(3.0)
    _same(T.vmap(f)(xs), jax.vmap(f)(xs))
    _same(T.jvp(f, (2.0,), (1.0,)), jax.jvp(f, (2.0,), (1.0,)))


def test_eval_jaxpr_of_transformed_jaxprs_is_jaxs(recording):
    closed = jax.make_jaxpr(jax.grad(_remat_scan))(1.0, jnp.arange(4.0))

    def run(c):
        return jax.core.eval_jaxpr(closed.jaxpr, closed.consts, c, jnp.arange(4.0))[0]
    cs = jnp.array([1.0, 0.5, 0.25])
    _same(T.vmap(run)(cs), jax.vmap(run)(cs))
    _same(T.grad(run)(0.5), jax.grad(run)(0.5))


# --- 2. nothing of ours in what JAX builds ----------------------------------------------

def _dots(x):
    for _ in range(3):
        x = jnp.sin(jnp.dot(x, x, precision=lax.Precision.HIGHEST))
    return x


def _named(x):
    sin = lambda v: checkpoint_name(jnp.sin(v), "sin")  # noqa: E731
    return sin(sin(x) * sin(x))


POLICIES = {
    "checkpoint_dots": (jax.checkpoint_policies.checkpoint_dots, _dots),
    "checkpoint_dots_with_no_batch_dims": (
        jax.checkpoint_policies.checkpoint_dots_with_no_batch_dims, _dots),
    "dots_saveable": (jax.checkpoint_policies.dots_saveable, _dots),
    "everything_saveable": (jax.checkpoint_policies.everything_saveable, _dots),
    "nothing_saveable": (jax.checkpoint_policies.nothing_saveable, _dots),
    "save_only_these_names": (jax.checkpoint_policies.save_only_these_names("sin"), _named),
    "save_anything_except_these_names": (
        jax.checkpoint_policies.save_anything_except_these_names("sin"), _named),
    "custom_save_cos": (lambda prim, *_, **__: str(prim) == "cos", _named),
}


def _policy_args(fun):
    return (jnp.ones((2, 2)),) if fun is _dots else (1.0,)


@pytest.mark.parametrize("name", sorted(POLICIES))
@pytest.mark.parametrize("remat", [jax.checkpoint, jax.remat], ids=["checkpoint", "remat"])
def test_remat_policy_saves_what_jax_saves(name, remat):
    """The linear jaxpr linearize returns, and the residuals JAX saves, under recording."""
    from jax._src.ad_checkpoint import saved_residuals  # NB: jax._src, as JAX's RematTest
    policy, fun = POLICIES[name]
    f = remat(fun, policy=policy)
    args = _policy_args(fun)
    _, theirs = jax.linearize(f, *args)
    with T.record() as session:
        _, ours = T.linearize(f, *args)
        ours_saved = saved_residuals(T.vmap(f), *[jnp.stack([a, a]) for a in map(jnp.asarray,
                                                                                  args)])
    theirs_saved = saved_residuals(jax.vmap(f), *[jnp.stack([a, a]) for a in map(jnp.asarray,
                                                                                  args)])
    assert len(session.calls) == 2
    assert str(ours.func.args[0]) == str(theirs.func.args[0])
    assert [(str(a), why) for a, why in ours_saved] == [(str(a), why) for a, why in theirs_saved]


def _objects_in(value, seen=None):
    """Every object reachable from jaxpr params (jaxprs, tuples, dicts, partials, callables)."""
    seen = set() if seen is None else seen
    stack = [value]
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        yield v
        if isinstance(v, jax.extend.core.ClosedJaxpr):
            stack.append(v.jaxpr)
            stack.extend(v.consts)
        elif isinstance(v, jax.extend.core.Jaxpr):
            for eqn in v.eqns:
                stack.extend(eqn.params.values())
        elif isinstance(v, (tuple, list)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, functools.partial):
            stack.extend((v.func, *v.args, *v.keywords.values()))
        elif callable(v):
            stack.extend(c.cell_contents for c in getattr(v, "__closure__", None) or ()
                         if _filled(c))


def _filled(cell) -> bool:
    try:
        return cell.cell_contents is not _filled
    except ValueError:  # an empty cell
        return False


def _ours(obj) -> bool:
    module = getattr(type(obj), "__module__", "") or ""
    fun_module = getattr(obj, "__module__", "") or "" if callable(obj) else ""
    return (isinstance(obj, weakref.ref) or module.split(".")[0] == "transforms"
            or str(fun_module).split(".")[0] == "transforms")


@pytest.mark.parametrize("name", ["save_only_these_names", "custom_save_cos", "checkpoint_dots"])
def test_jaxprs_built_under_recording_are_jaxs_text_and_params(name):
    policy, fun = POLICIES[name]
    f = jax.checkpoint(fun, policy=policy)
    args = _policy_args(fun)
    theirs = jax.make_jaxpr(jax.grad(lambda *a: jnp.sum(f(*a))))(*args)
    with T.record():
        ours = jax.make_jaxpr(T.grad(lambda *a: jnp.sum(f(*a))))(*args)
        _, f_lin = T.linearize(f, *args)
        _, f_vjp = T.vjp(f, *args)
    assert str(ours) == str(theirs)
    assert [o for o in _objects_in(ours) if _ours(o)] == []
    assert [o for o in _objects_in(f_lin.func.args[0]) if _ours(o)] == []
    assert [o for o in _objects_in(f_vjp.fun.args) if _ours(o)] == []


def test_linearize_and_vjp_keep_jaxs_pytree_structure_and_aux_data():
    f = jax.checkpoint(_named, policy=POLICIES["save_only_these_names"][0])
    _, jax_lin = jax.linearize(f, 1.0)
    _, jax_vjp = jax.vjp(f, 1.0)
    with T.record() as session:
        _, lin = T.linearize(f, 1.0)
        _, vjp = T.vjp(f, 1.0)
    for ours, theirs in ((lin, jax_lin), (vjp, jax_vjp)):
        assert type(ours) is type(theirs)
        ours_def = jax.tree_util.tree_structure(ours)
        theirs_def = jax.tree_util.tree_structure(theirs)
        assert _address_free(str(ours_def)) == _address_free(str(theirs_def))
        assert ours_def.node_data()[0] is theirs_def.node_data()[0]
        assert repr(_address_free(repr(ours))) == repr(_address_free(repr(theirs)))
    # the aux data holds JAX's function and arguments, nothing of ours or the user's
    assert lin.func.func is jax_lin.func.func  # JAX's _HashableCallableShim ...
    assert lin.func.fun.func is jax_lin.func.fun.func  # ... of JAX's _lift_linearized
    assert vjp.fun.func is jax_vjp.fun.func
    for aux in (lin.func.fun, vjp.fun):
        assert not any(_ours(o) or o is _named or o is f for o in (*aux.args, *aux.keywords))
        assert vars(aux) == {}
    # and the products are still recorded, with JAX's values
    _same(lin(2.0), jax_lin(2.0))
    with T.record() as later:
        _same(lin(2.0), jax_lin(2.0))
        _same(vjp(1.0), jax_vjp(1.0))
    assert [c.transform for c in later.calls] == ["linearize_jvp", "vjp_backward"]
    assert len(session.calls) == 2


def test_a_linearized_function_passed_into_jit_keys_the_cache_as_jaxs():
    traces = []

    @jax.jit
    def push(f_lin, t):
        traces.append(1)
        return f_lin(t)

    with T.record():
        _, lin = T.linearize(jnp.sin, 1.0)
    _same(push(lin, 2.0), jax.linearize(jnp.sin, 1.0)[1](2.0))
    push(lin, 3.0)
    assert len(traces) == 1  # the same aux data: a cache hit, as with JAX's own


def _address_free(text: str) -> str:
    import re
    return re.sub(r" at 0x[0-9a-f]+", "", text)
