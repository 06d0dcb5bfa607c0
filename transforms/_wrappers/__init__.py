"""The drop-in transformations: grad ... hessian, jvp, vjp, linearize (JAX's own objects
outside record()), jit, and the functions vjp and linearize return."""
from __future__ import annotations

from ._api import (
    grad as grad,
    hessian as hessian,
    jacfwd as jacfwd,
    jacrev as jacrev,
    jit as jit,
    jvp as jvp,
    linearize as linearize,
    value_and_grad as value_and_grad,
    vjp as vjp,
    vmap as vmap,
)
