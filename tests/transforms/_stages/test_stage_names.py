"""Stage names are unique in a call (issue 39, item 4): a user's function called `f` inside a
jitted step does not take the step's own `f`."""
from __future__ import annotations

import jax.numpy as jnp

import transforms as T


def f(w):
    return jnp.sum(jnp.sin(w))


def test_a_nested_function_named_f_does_not_collide_with_the_jits_own_stage():
    @T.jit
    def step(w):
        _, g = T.value_and_grad(f)(w)
        return w - 0.1 * g

    with T.record() as session:
        step(jnp.ones(3))
    names = [stage.name for stage in session.calls[0].stages]
    assert len(names) == len(set(names))
    assert names[:2] == ["f", "stablehlo(jit(f))"]
    assert "f#2" in names and "value_and_grad(f#2)" in names
