"""Recording changes nothing JAX does (issue 12), continued: jit's identity and caching, and what a
jitted call, a branch and a backward pass free, as JAX does (see test_fidelity.py).
"""
from __future__ import annotations

import contextlib
import functools
import gc
import inspect
import re
import subprocess
import sys
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transforms as T
from transforms._wrappers import _returned

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
    # In a block, a trace JAX cached without recording it (jax.eval_shape's, or one made
    # before the block) is traced once more for the recording, never lowered or compiled
    # (test_compiles.py): the only run of the user's function recording adds.
    assert len(traces) == (1 if recording is None else 2)

    def g(x):
        traces.append(2)
        return x * 2

    T.jit(g).eval_shape(inp)
    jax.jit(g)(inp)
    assert traces[-1:] == [2] and traces.count(2) == 1


def test_a_function_traced_before_a_block_is_traced_again_and_recorded_inside_it():
    """Traced once more for the recording on its first call in a block; later calls hit."""
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
    """A new key for the recording's retraces only after a block traced a jit of ours."""
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


def _leak_report(ctx) -> str:
    """JAX's APITest.test_leak_checker_catches_a_jit_leak, its report with object ids cut."""
    def leaks():
        with jax.checking_leaks():
            kept = []

            @T.jit
            def f(x):
                kept.append(x)
                return x
            f(3)
    with pytest.raises(Exception) as info, ctx:
        leaks()
    return re.sub(r"\b\d{6,}\b", "ID", str(info.value))


def test_the_leak_checker_reports_inside_record_as_outside():
    """What the recorder holds neither breaks JAX's walk over referrers nor appears in it."""
    plain = _leak_report(contextlib.nullcontext())
    assert plain.startswith("Leaked trace DynamicJaxprTrace")
    assert _leak_report(T.record()) == plain


def test_disable_jit_runs_the_function_once_a_call_inside_record():
    """JAX's JitTest.test_disable_jit inside record(): no trace of ours under disable_jit."""
    for ctx in (contextlib.nullcontext(), T.record()):
        effects = []

        @T.jit
        def f(x):
            effects.append(1)
            return x
        with ctx:
            with jax.disable_jit():
                f(2)
                f(2)
            assert len(effects) == 2
            f(2)
            f(2)
        assert len(effects) == 3
