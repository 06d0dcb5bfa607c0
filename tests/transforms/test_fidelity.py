"""Recording changes nothing JAX does (issue 12): jax.* is the oracle, inside record() as outside.

Each section is one cause found by running JAX's own test suite with our
transforms swapped in (scripts/jax_suite.py): Trace methods we did not
handle, our objects in what JAX builds, jit identity and caching, stack depth
and tracebacks, and reference cycles.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import inspect
import subprocess
import sys
import traceback
import weakref
from array import array

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.ad_checkpoint import checkpoint_name

import transforms as T
from transforms import _jax as _door
from transforms._wrappers import _returned
from transforms.model import Lazy


@pytest.fixture(params=[None, False, True], ids=["outside", "recorded", "with_stages"])
def recording(request):
    """Runs the test outside any record() block, then inside one, without and with stages."""
    if request.param is not None:
        with T.record(stages=request.param) as session:
            yield session
    else:
        yield None


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


# --- 3. jit identity and caching ------------------------------------------------------

def test_jitted_function_is_named_after_the_users_function(recording):
    def my_function(x):
        return x

    for fun in (my_function, functools.partial(my_function),
                functools.partial(functools.partial(my_function))):
        ours, theirs = T.jit(fun), jax.jit(fun)
        assert ours.__getstate__()["function_name"] == theirs.__getstate__()["function_name"] \
            == "my_function"
        assert str(jax.make_jaxpr(ours)(1.0)) == str(jax.make_jaxpr(theirs)(1.0))
        assert ours.lower(1.0).as_text() == theirs.lower(1.0).as_text()


def test_jitted_function_has_the_users_attributes(recording):
    def f(x: int) -> int:
        """docstring of f."""
        return x + 1
    f.some_value = 4  # type: ignore[attr-defined]
    ours, theirs = T.jit(f), jax.jit(f)
    for attr in ("__doc__", "__name__", "__module__", "__qualname__", "__annotations__"):
        assert getattr(ours, attr) == getattr(theirs, attr) == getattr(f, attr), attr
    assert ours.some_value == theirs.some_value == 4
    assert inspect.signature(ours) == inspect.signature(theirs)


def test_the_same_function_jitted_twice_shares_jaxs_global_cache(recording):
    traces = []

    def f(x):
        traces.append(1)
        return x

    T.jit(f)(2)
    T.jit(f)(3)
    jax.jit(f)(4)
    assert len(traces) == 1
    if recording is not None:
        assert [c.transform for c in recording.calls] == ["jit"]


def test_eval_shape_and_jit_share_one_trace(recording):
    traces = []

    def f(x):
        traces.append(1)
        return x

    inp = np.arange(8)
    jax.eval_shape(f, inp)
    T.jit(f)(inp)
    assert len(traces) == 1

    def g(x):
        traces.append(2)
        return x * 2

    T.jit(g).eval_shape(inp)
    jax.jit(g)(inp)
    assert traces == [1, 2]


def test_a_function_traced_before_a_block_is_traced_again_and_recorded_inside_it():
    """JAX's caches are keyed on the open block: its first call records, later ones hit."""
    traces = []

    def f(x):
        traces.append(1)
        return x * 2

    ours, theirs = T.jit(f), jax.jit(f)
    ours(1.0)
    theirs(1.0)
    assert len(traces) == 1  # outside: one trace, shared as JAX shares it
    for _ in range(2):  # each block records its own first call
        with T.record(stages=False) as session:
            ours(1.0)
            ours(2.0)
            theirs(3.0)
        assert [c.transform for c in session.calls] == ["jit"]
    assert len(traces) == 3
    ours(1.0)
    assert len(traces) == 3  # after the blocks, the plain trace is still JAX's cached one


def test_blocks_that_trace_no_jit_of_ours_keep_jaxs_cache():
    """A new cache key (all of JAX traced and compiled again) only after a block traced a jit."""
    from transforms._capture import _state
    traces = []

    @jax.jit
    def jaxs_own(x):
        traces.append(1)
        return x + 1

    keys = []
    for _ in range(3):
        with T.record(stages=False):
            keys.append(_state._block_key.get())
            T.grad(lambda x: jaxs_own(x) * 2)(1.0)
    assert keys[0] == keys[1] == keys[2] and len(traces) == 1  # traced in the first block only
    with T.record(stages=False):
        first = _state._block_key.get()
        T.jit(jnp.sin)(1.0)
    with T.record(stages=False):
        assert _state._block_key.get() != first


def test_the_cache_key_of_a_block_is_a_number_and_recording_off_is_keyed_as_outside():
    from transforms._capture import _state
    seen = []

    def f(x):
        seen.append(1)
        return x

    assert _state._block_key.get() is None
    with T.record(stages=False):
        key = _state._block_key.get()
        assert type(key) is int
        with _state.recording_off():
            T.jit(f)(1.0)  # a plain trace: a later recorded call must still trace
        T.jit(f)(1.0)
    assert len(seen) == 2
    assert _state._block_key.get() is None


def test_a_jitted_function_prints_as_jaxs(recording):
    def f(x):
        return x

    assert repr(T.jit(f)) == repr(jax.jit(f))
    with pytest.raises(TypeError) as ours:
        T.jit(f)(lambda: 0)
    with pytest.raises(TypeError) as theirs:
        jax.jit(f)(lambda: 0)
    assert str(ours.value) == str(theirs.value)


def test_jit_of_a_generator_function_raises_as_jax(recording):
    def gen(x):
        yield x

    with pytest.raises(TypeError, match="Expected a function, got a generator function"):
        T.jit(gen)


_NOT_WEAKREFERENCEABLE = """
import contextlib, sys
import jax
import transforms as T

class CallableWithSlots:
    __slots__ = []

    def __call__(self, x):
        return x + 1

module = T if sys.argv[1] == "ours" else jax
with T.record(stages=False) if sys.argv[2] == "recorded" else contextlib.nullcontext():
    try:
        module.jit(CallableWithSlots())(1)
    except TypeError as e:
        print(type(e).__name__, e)
"""


@pytest.mark.parametrize("where", ["outside", "recorded"])
def test_jit_of_a_callable_that_cannot_be_weak_referenced_raises_as_jax(where):
    # NB: each in a process of its own, one jitted call, as JAX's own test does: jax
    # (0.10.2 and 0.12) crashes the process when non-weak-referenceable callables are
    # jitted and called more than twice in it.
    def run(which):
        return subprocess.run([sys.executable, "-c", _NOT_WEAKREFERENCEABLE, which, where],
                              capture_output=True, text=True, check=True).stdout
    ours, theirs = run("ours"), run("jax")
    assert ours == theirs
    assert ours.startswith("TypeError cannot create weak reference")


def test_a_jitted_branch_frees_what_it_closed_over_as_jax_does(recording):
    """JAX's test_cond_memory_leak: a jitted cond branch's closed-over array is freed at once."""
    def leak():
        data = jax.device_put(np.zeros((1024), dtype=np.float32) + 1)

        def g():
            return jax.lax.cond(True, T.jit(lambda: data[0]), lambda: data[1])  # noqa: F821
        jg = T.jit(g)
        jg().block_until_ready()
        jg.clear_cache()
        del g, jg, data
        gc.collect()

    gc.collect()
    before = len(jax.live_arrays())
    leak()
    leak()
    assert len(jax.live_arrays()) <= before


def test_the_jaxprs_a_session_read_do_not_keep_their_constants_alive(recording):
    big = jnp.arange(1000.0)
    ref = weakref.ref(big)
    T.jit(lambda x: x + big)(1.0)  # noqa: F821  # big: a constant of the jaxpr the recorder reads
    T.grad(lambda x: jnp.sum(T.jit(lambda y: y * big)(x)))(1.0)  # noqa: F821
    del big
    gc.collect()
    assert ref() is None


def test_a_backward_pass_frees_each_cotangent_as_jax_does(recording):
    """JAX's test_backward_pass_ref_dropping: by the third bwd, the first one's output is gone."""
    refs = []

    @jax.custom_vjp
    def f(x):
        return x

    def f_rev(_, g):
        assert len(refs) != 2 or refs[0]() is None
        zero = np.zeros(())
        refs.append(weakref.ref(zero))
        return (zero,)
    f.defvjp(lambda x: (x, None), f_rev)
    T.grad(lambda x: f(f(f(x))))(1.)
    assert len(refs) == 3  # and stage capture does not run the bwd again


def _vjp_through_a_custom_bwd(M):
    """M.vjp of a loss through a custom_vjp; what it keeps, by weak references."""
    @jax.custom_vjp
    def g(x):
        return jnp.sin(x)
    g.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, t: (c * t,))

    def loss(x):
        return jnp.sum(g(x) * 2)
    x = jnp.arange(3.0) + 1
    refs = [weakref.ref(x), weakref.ref(loss)]
    _, pullback = M.vjp(loss, x)
    return pullback, refs


@pytest.mark.parametrize("runs", [False, True], ids=["dropped", "run"])
def test_a_vjp_waiting_for_its_pullbacks_bwd_keeps_only_what_jaxs_pullback_keeps(runs):
    """Its transpose stage waits for the bwd the pullback runs: the wait is held by the
    pullback, with tapes and types only (the arguments and the function go as JAX's own
    pullback lets them go), and goes when the pullback goes, or once it has run."""
    pullback, refs = _vjp_through_a_custom_bwd(jax)
    gc.collect()
    theirs = [r() is not None for r in refs]
    del pullback
    with T.record():
        pullback, refs = _vjp_through_a_custom_bwd(T)
        gc.collect()
        ours = [r() is not None for r in refs]
        waiting = [r.origin.pending for r in _returned._ORIGINS.values()
                   if r.origin.pending is not None]
        assert len(waiting) == 1 and waiting[0].open
        pending, plan = weakref.ref(waiting[0]), weakref.ref(waiting[0].plan)
        del waiting
        if runs:
            pullback(1.0)
            assert pending() is not None and not pending().open
        else:
            del pullback
        gc.collect()
        assert plan() is None and (runs or pending() is None)
    assert ours == theirs == [False, False]


def test_a_jitted_call_keeps_neither_its_function_nor_its_arguments_alive(recording):
    x = jnp.ones(10)
    f = (lambda x: lambda: x)(x)  # x lives in f's closure
    g = T.jit(f)
    x = weakref.ref(x)
    f_ref = weakref.ref(f)
    g()
    g()
    del f
    assert x() is not None and f_ref() is not None  # g keeps f, as jax.jit(f) does
    g()
    del g
    assert x() is None and f_ref() is None  # no cycle and no cache of ours holds them


# --- 4. stack depth and tracebacks ----------------------------------------------------

def _depth_inside(build, args):
    """How many frames are on the stack under the caller when the user's function runs."""
    start = len(inspect.stack())
    seen = []

    def probe(x):
        seen.append(len(inspect.stack()) - start)
        return x

    build(probe)(*args)
    return seen[0]


DEPTH_CASES = {
    "grad": (lambda M: M.grad, (1.0,)),
    "value_and_grad": (lambda M: M.value_and_grad, (1.0,)),
    "vmap": (lambda M: M.vmap, (np.arange(3.0),)),
    "jit": (lambda M: M.jit, (1.0,)),
    "jacfwd": (lambda M: M.jacfwd, (1.0,)),
    "jacrev": (lambda M: M.jacrev, (1.0,)),
    "hessian": (lambda M: M.hessian, (1.0,)),
    "jvp": (lambda M: (lambda f: lambda x: M.jvp(f, (x,), (x,))), (1.0,)),
    "vjp": (lambda M: (lambda f: lambda x: M.vjp(f, x)), (1.0,)),
    "linearize": (lambda M: (lambda f: lambda x: M.linearize(f, x)), (1.0,)),
    "vmap_grad": (lambda M: (lambda f: M.vmap(M.grad(f))), (np.arange(3.0),)),
}


@pytest.mark.parametrize("name", sorted(DEPTH_CASES))
def test_stack_depth_outside_record_is_jaxs(name):
    """JAX's TracebackTest counts the frames between a call and the user's function."""
    make, args = DEPTH_CASES[name]
    assert _depth_inside(make(T), args) == _depth_inside(make(jax), args)


def _fails(x):
    raise ValueError("user code failed")


@pytest.mark.parametrize("name", sorted(DEPTH_CASES))
def test_tracebacks_are_jaxs_frame_for_frame(name, recording):
    """What the user sees of a failure: JAX's filtered frames, none of ours (nor more of JAX's)."""
    make, args = DEPTH_CASES[name]

    def frames(M):
        with pytest.raises(ValueError) as info:
            make(M)(_fails)(*args)
        tb = traceback.extract_tb(info.value.__traceback__)
        return [(f.filename, f.name) for f in tb if f.filename != __file__]
    assert frames(T) == frames(jax)


# --- 5. no cycles, nothing of the user's program kept ------------------------------------

@pytest.mark.parametrize("name", ["linearize", "jit", "grad", "vjp", "vmap_grad"])
def test_no_reference_cycle_through_our_objects(name):
    """core_test's test_reference_cycles, for each transformation, outside and inside record()."""
    def f(x):
        return x.sum()

    make = {
        "linearize": lambda: functools.partial(T.linearize, f),
        "vjp": lambda: functools.partial(T.vjp, f),
        "jit": lambda: T.jit(f),
        "grad": lambda: T.grad(f),
        "vmap_grad": lambda: T.vmap(T.grad(f)),
    }[name]
    params = jnp.zeros([3]) if name == "vmap_grad" else jnp.zeros([])
    for ctx in (contextlib.nullcontext(), T.record()):
        gc.collect()
        debug = gc.get_debug()
        try:
            with ctx:
                out = make()(params)
                del out
            gc.set_debug(gc.DEBUG_SAVEALL)
            assert gc.collect() == 0, [type(o) for o in gc.garbage][:20]
        finally:
            gc.set_debug(debug)
            gc.garbage.clear()


_PLAIN = (str, int, float, bool, type(None), bytes, array)  # array: steps as rows of numbers


def _plain_data(value, path="session"):
    """Every value in a session is a record, a tuple/list/dict of them, or a plain scalar."""
    if isinstance(value, _PLAIN):
        return
    if dataclasses.is_dataclass(value) and type(value).__module__.startswith("transforms.model."):
        for field in dataclasses.fields(value):
            _plain_data(getattr(value, field.name), f"{path}.{field.name}")
        return
    if isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            _plain_data(v, f"{path}[{i}]")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            _plain_data(k, f"{path} key")
            _plain_data(v, f"{path}[{k!r}]")
        return
    if isinstance(value, Lazy):  # steps made when first read: what it holds until then, then them
        if not value.decoded:
            _plain_data(value._decode.args, f"{path} (undecoded)")
        _plain_data(value.all(), path)
        return
    raise AssertionError(f"{path} holds a {type(value).__qualname__}: {value!r:.100}")


def test_after_a_block_a_session_holds_plain_data_and_nothing_of_the_program():
    def loss(w, x):
        return jnp.sum(jnp.tanh(w * x) ** 2)

    w, x = jnp.ones(3), jnp.arange(3.0)
    w_ref, loss_ref = weakref.ref(w), weakref.ref(loss)
    with T.record(stages=True) as session:
        T.jit(T.grad(loss))(w, x)
        T.vmap(T.grad(loss), in_axes=(None, 0))(w, jnp.stack([x, x]))
        _, lin = T.linearize(loss, w, x)
        lin(w, x)
    del lin, w, loss
    gc.collect()
    assert w_ref() is None and loss_ref() is None
    assert len(session.calls) == 4
    _plain_data(session)
