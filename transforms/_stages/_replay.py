"""Staging a replayed function: jax.make_jaxpr with the captured group's closed-over
values, and the arguments an autodiff stage holds fixed, as trailing inputs.
"""
from __future__ import annotations

import contextlib
import numbers
import threading
from typing import Any, Callable, Iterator

import jax
import numpy as np

from .. import _jax as _i
from .._capture import function_name
from ._tape import closures_bound


def name_like(f: Any, fun: Any) -> None:
    # JAX names jit modules and pjit equations after __name__, and its errors
    # point at the function found through __wrapped__: the user's, not ours.
    f.__name__ = f.__qualname__ = function_name(fun)
    f.__wrapped__ = fun


# Closed-over values of the group being captured: the replayed function reads
# them (see _tape.closures_bound); every jaxpr of the group takes them as inputs.
_group_closures: tuple = ()
# Arguments an autodiff stage holds fixed whose values are not known (only
# their types): inputs of the stage's jaxpr, read by the function being
# differentiated (see _Point).
_held = threading.local()


def held_values() -> tuple:
    return getattr(_held, "values", ())


def with_extras(fun: Callable, n_closures: int, n_held: int) -> Callable:
    """fun(*args) as a function of (*args, *closures, *held): the extras become invars."""
    n_extra = n_closures + n_held

    def staged(*all_args, **kwargs):
        k = len(all_args) - n_extra
        prev, _held.values = held_values(), tuple(all_args[k + n_closures:])
        try:
            with closures_bound(all_args[k:k + n_closures]):
                return fun(*all_args[:k], **kwargs)
        finally:
            _held.values = prev
    name_like(staged, fun)
    return staged


def make_jaxpr_with_extras(fun: Callable, held: tuple = ()) -> Callable:
    """jax.make_jaxpr(fun), with the group's closures and `held` types as trailing inputs."""
    closures = _group_closures

    def make(*args, **kwargs):
        at, args, kwargs = _fixing_non_inputs(fun, args, kwargs)
        if not closures and not held:
            return jax.make_jaxpr(at)(*args, **kwargs)
        staged = with_extras(at, len(closures), len(held))
        return jax.make_jaxpr(staged)(*args, *closures, *held, **kwargs)
    return make


# What make_jaxpr takes as an input; any other leaf of a point is fixed at its value.
_INPUT_TYPES = (jax.ShapeDtypeStruct, jax.Array, np.ndarray, np.generic, numbers.Number,
                _i.Tracer)


def _fixing_non_inputs(fun: Callable, args: tuple, kwargs: dict
                       ) -> tuple[Callable, tuple, dict]:
    """`fun` with the leaves of its arguments that JAX cannot take as inputs (a function, an
    object: equinox's non-differentiated part of a module, which grad passes through)
    fixed at the values the call had; the other leaves its inputs, in make_jaxpr's order."""
    leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
    fixed = [not isinstance(x, _INPUT_TYPES) for x in leaves]
    if not any(fixed):
        return fun, args, kwargs

    def at_point(*inputs):
        given = iter(inputs)
        a, k = jax.tree_util.tree_unflatten(
            tree, [x if f else next(given) for x, f in zip(leaves, fixed)])
        return fun(*a, **k)
    name_like(at_point, fun)
    return at_point, tuple(x for x, f in zip(leaves, fixed) if not f), {}


def group_closures() -> tuple:
    """The closed-over values of the group being captured (types; inputs of its jaxprs)."""
    return _group_closures


@contextlib.contextmanager
def closures_of_group(closures: tuple) -> Iterator[None]:
    global _group_closures
    prev, _group_closures = _group_closures, closures
    try:
        yield
    finally:
        _group_closures = prev
