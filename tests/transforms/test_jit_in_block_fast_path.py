"""Inside a record() block, a call of a jit whose every trace was made in that block is JAX's
own call (no frame of ours: the cached-call cost of bench/bench_jit_cached.py); a jit traced
before the block, or in another block, still has its trace recorded in this one."""
from __future__ import annotations

import jax
import jax.numpy as jnp

import transforms

PJIT = type(jax.jit(lambda x: x))


def test_a_jit_traced_in_the_block_is_called_as_jax_calls_it():
    f = transforms.jit(lambda x: x * 2)
    with transforms.record() as session:
        assert type(f.__call__) is not PJIT  # not traced yet: asks JAX's .trace first
        f(jnp.ones(3))
        assert type(f.__call__) is PJIT
        f(jnp.ones(3))
        f(jnp.ones(4))  # a miss on JAX's own call: traced, so recorded
    assert len(session.calls) == 2
    assert [c.traced for c in session.compiles if c.function == "<lambda>"] == [True, True]


def test_a_jit_traced_before_or_in_another_block_is_recorded_in_this_one():
    f = transforms.jit(lambda x: x + 2)
    with transforms.record() as first:
        f(jnp.ones(3))
    with transforms.record() as second:
        assert type(f.__call__) is not PJIT
        f(jnp.ones(3))  # cached by JAX in the first block: recorded again here
    assert len(first.calls) == len(second.calls) == 1
    g = transforms.jit(lambda x: x - 2)
    g(jnp.ones(3))  # traced outside any block
    with transforms.record() as third:
        g(jnp.ones(5))
        assert type(g.__call__) is not PJIT
        g(jnp.ones(3))
    assert len(third.calls) == 2


def test_nested_blocks_take_the_slow_path():
    f = transforms.jit(lambda x: x * 5)
    with transforms.record():
        f(jnp.ones(3))
        with transforms.record() as inner:
            assert type(f.__call__) is not PJIT
            f(jnp.ones(3))
    assert len(inner.calls) == 1
