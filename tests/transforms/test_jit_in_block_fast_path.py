"""Inside a record() block, a call of a jit whose every trace was made in that block is JAX's
own call (no frame of ours: the cached-call cost of bench/bench_jit_cached.py); a jit traced
before the block, or in another block, still has its trace recorded in this one."""
from __future__ import annotations

import threading

import jax
import jax.numpy as jnp
import pytest

import transforms
from transforms._capture import PyJitCall, jit_call_class
from transforms._wrappers import _jit


@pytest.fixture(autouse=True, params=["C", "Python"])
def call_class(request, monkeypatch):
    """Each test with the JitCall the process chose (C where built) and with its Python twin."""
    if request.param == "Python":
        monkeypatch.setattr(_jit, "jit_call_class", lambda: PyJitCall)
    elif jit_call_class() is PyJitCall:
        pytest.skip("the C core is not built")


def jaxs_own(f) -> bool:
    """Whether a call of f now is JAX's jitted object's own (no frame of ours)."""
    return f._call_target() is f._jitted


def test_a_jit_traced_in_the_block_is_called_as_jax_calls_it():
    f = transforms.jit(lambda x: x * 2)
    with transforms.record() as session:
        assert not jaxs_own(f)  # not traced yet: asks JAX's .trace first
        f(jnp.ones(3))
        assert jaxs_own(f)
        f(jnp.ones(3))
        f(jnp.ones(4))  # a miss on JAX's own call: traced, so recorded
    assert len(session.calls) == 2
    assert [c.traced for c in session.compiles if c.function == "<lambda>"] == [True, True]


def test_a_jit_traced_before_or_in_another_block_is_recorded_in_this_one():
    f = transforms.jit(lambda x: x + 2)
    with transforms.record() as first:
        f(jnp.ones(3))
    with transforms.record() as second:
        assert not jaxs_own(f)
        f(jnp.ones(3))  # cached by JAX in the first block: recorded again here
    assert len(first.calls) == len(second.calls) == 1
    g = transforms.jit(lambda x: x - 2)
    g(jnp.ones(3))  # traced outside any block
    with transforms.record() as third:
        g(jnp.ones(5))
        assert not jaxs_own(g)
        g(jnp.ones(3))
    assert len(third.calls) == 2


def test_nested_blocks_take_the_slow_path():
    f = transforms.jit(lambda x: x * 5)
    with transforms.record():
        f(jnp.ones(3))
        with transforms.record() as inner:
            assert not jaxs_own(f)
            f(jnp.ones(3))
    assert len(inner.calls) == 1


def test_a_jit_traced_before_the_block_is_called_as_jax_calls_it_once_recorded():
    f = transforms.jit(lambda x: x * 3)
    f(jnp.ones(3))
    f(jnp.ones(4))  # two traces JAX can answer from, made before the block
    with transforms.record() as session:
        f(jnp.ones(3))  # recorded: traced once more, for the recording
        assert not jaxs_own(f)  # the trace at float32[4] is not recorded yet
        f(jnp.ones(4))
        assert jaxs_own(f)
        f(jnp.ones(3))
        f(jnp.ones(4))
        f(jnp.ones(5))  # a miss on JAX's own call: traced, so recorded
        assert jaxs_own(f)
    assert [c.inputs[0].aval for c in session.calls] == ["float32[3]", "float32[4]",
                                                         "float32[5]"]


def test_a_trace_made_outside_while_the_block_is_open_is_recorded_in_it():
    f = transforms.jit(lambda x: x * 4)
    f(jnp.ones(3))
    ready, traced = threading.Event(), threading.Event()

    def elsewhere():  # started before the block: no block records in this thread
        ready.wait()
        f(jnp.ones(6))
        traced.set()

    thread = threading.Thread(target=elsewhere)
    thread.start()
    with transforms.record() as session:
        f(jnp.ones(3))
        assert jaxs_own(f)
        ready.set()
        traced.wait()
        thread.join()
        assert not jaxs_own(f)  # JAX holds a trace the block has not recorded
        f(jnp.ones(6))
        assert jaxs_own(f)
    assert [c.inputs[0].aval for c in session.calls] == ["float32[3]", "float32[6]"]


def test_a_jit_answered_from_jax_jits_executables_stays_on_the_recording_path():
    def f(x):
        return x * 6

    jax.jit(f)(jnp.ones(3))  # JAX shares this executable with transforms.jit(f)
    ours = transforms.jit(f)
    with transforms.record() as session:
        ours(jnp.ones(3))
        ours(jnp.ones(3))
        assert not jaxs_own(ours)
    assert len(session.calls) == 1


def test_a_trace_cached_before_the_block_at_other_static_arguments_is_recorded():
    def f(x, flag):
        return jnp.sin(x) if flag else jnp.cos(x)

    ours = transforms.jit(f, static_argnums=1)
    ours(jnp.ones(3), True)
    with transforms.record() as session:
        ours(jnp.ones(3), False)  # traced in the block, at the same array arguments
        ours(jnp.ones(3), True)  # cached before the block: recorded too
        assert jaxs_own(ours)
        ours(jnp.ones(3), True)
    assert [c.stages[0].jaxpr.primitives for c in session.calls] == [("cos",), ("sin",)]


def test_a_trace_cached_before_the_block_at_another_tree_is_recorded():
    def f(tree):
        return jax.tree.leaves(tree)[0] * 7

    ours = transforms.jit(f)
    ours({"a": jnp.ones(3)})
    with transforms.record() as session:
        ours((jnp.ones(3),))  # traced in the block, at the same abstract values
        ours({"a": jnp.ones(3)})  # cached before the block: recorded too
        assert jaxs_own(ours)
    assert [c.in_tree for c in session.calls] == ["PyTreeDef((((*,),), {}))",
                                                  "PyTreeDef((({'a': *},), {}))"]
