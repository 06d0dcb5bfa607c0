"""Finding a NaN in a gradient: the `jnp.where` gradient trap and its fix, recorded with
record(find_nans=True)."""
from __future__ import annotations

import jax.numpy as jnp

import transforms as T

from ._registry import example


def safe_sqrt_trap(x):
    """Looks safe: the square root is only taken where x > 0."""
    return jnp.sum(jnp.where(x > 0, jnp.sqrt(x), 0.0))


def safe_sqrt_fixed(x):
    """The double where: sqrt never sees x <= 0, so neither does its derivative."""
    positive = x > 0
    return jnp.sum(jnp.where(positive, jnp.sqrt(jnp.where(positive, x, 1.0)), 0.0))


POINTS = jnp.array([0.0, 1.0, 4.0])


@example("NaN hunting: the jnp.where gradient trap, and the double-where fix", "nans",
         find_nans=True, values=True)
def where_gradient_trap():
    """jnp.where(x > 0, jnp.sqrt(x), 0.) is finite everywhere, yet its gradient at x = 0 is
    NaN. jnp.where computes both branches at every point, and so does grad: the derivative of
    sqrt at 0 is 0.5/sqrt(0) = inf, and the backward pass multiplies it by the zero cotangent
    jnp.where gives the untaken branch: 0 * inf = NaN. Recorded with find_nans=True, the first
    call is replayed equation by equation: the Failure view names the `div` of sqrt's
    derivative in the forward pass (grad#1) as the first equation making an Inf from finite
    inputs, with its inputs' values, the `mul` of the backward pass as the first making a NaN
    (what jax_debug_nans names), and the hint. The second call is the fix, the double where:
    sqrt never sees x <= 0, and the gradient is finite. Recorded with values=True too: the
    stages view shows each equation's values beside it, the Inf and the NaN marked."""
    print(T.value_and_grad(safe_sqrt_trap)(POINTS))   # value 3.0, gradient [nan 0.5 0.25]
    print(T.value_and_grad(safe_sqrt_fixed)(POINTS))  # value 3.0, gradient [0. 0.5 0.25]
