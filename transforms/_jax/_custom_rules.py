"""custom_jvp / custom_vjp rule functions (linear_util WrappedFuns): binding them again,
their identity, wrapping a function in their place. Part of the door.
"""
from __future__ import annotations

from typing import Any, Callable

from jax.extend import linear_util as lu


def rewound(fun: Any) -> Any:
    """A custom_jvp/custom_vjp rule (a WrappedFun) ready to be called again.

    NB: jax._src.linear_util: a WrappedFun keeps what its transformations
    report (output trees) in Stores that may be filled once; the stage replay
    of a recorded custom_jvp_call binds the same WrappedFuns again, after the
    call that filled them is over.
    """
    for store in getattr(fun, "stores", ()) or ():
        inner = getattr(store, "_store", store)  # EqualStore wraps a Store
        reset = getattr(inner, "reset", None)
        if reset is not None:
            reset()
    return fun


def bind_with_rules(primitive: Any, rules: tuple, args: list, params: dict) -> Any:
    """Bind a custom_jvp_call/custom_vjp_call again with its rule functions.

    NB: jax._src.custom_derivatives binds them as `p.bind(*args, subfuns=(fun, jvp), **params)`;
    a trace receives them as `process_custom_jvp_call(p, fun, jvp, tracers, **params)`.
    """
    return primitive.bind(*args, subfuns=tuple(map(rewound, rules)), **params)


def rule_identity(fun: Any) -> tuple | None:
    """What makes two custom-rule functions (WrappedFuns) one program, or None.

    NB: jax._src.linear_util: a WrappedFun is its Python function, the
    transformations applied to it (with their static arguments: input trees)
    and params; JAX's own caches key it so. Not its stores or debug info, so
    `f(x)` called inside a rule is the body its outer custom call holds.
    """
    try:
        key = (fun.f, fun.transforms, fun.params, fun.in_type)
        hash(key)
    except Exception:  # not a WrappedFun, or unhashable static arguments
        return None
    return key


def wrapped_like(f: Callable, like: Any) -> Any:
    """`f` as a WrappedFun in place of the rule function `like` (same debug info)."""
    return lu.wrap_init(f, debug_info=getattr(like, "debug_info", None))


def wrapped_python_function(fun: Any) -> Any:
    """The Python function inside a linear_util WrappedFun (a custom rule), or `fun` itself."""
    return getattr(fun, "f", fun)
