"""custom_jvp / custom_vjp rule functions (linear_util WrappedFuns): binding them again,
their identity, wrapping a function in their place. Part of the door.
"""
from __future__ import annotations

import functools
import types
from typing import Any, Callable

import jax
from jax._src import core as _core
from jax._src.ad_util import Zero as _Zero
from jax._src.util import Unhashable as _Unhashable
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
        key = (fun.f, tuple(map(_hashable_transform, fun.transforms)), fun.params, fun.in_type)
        hash(key)
    except Exception:  # not a WrappedFun, or unhashable static arguments
        return None
    return key


def _hashable_transform(transform: Any) -> Any:
    """A WrappedFun's transformation (function, its static arguments) as a key.

    NB: jax._src.api_util.argnums_partial: a custom_jvp's non-differentiated arguments
    (`nondiff_argnums`, lax.custom_root's jaxprs) are held as `Unhashable(value)`, equal
    when their values are; JAX keys no cache by them, so the rule ran once per call and
    is one program wherever the same values are passed. A value that will not hash is
    known by its object (held, so its id stays its own while the key is).
    jax._src.custom_derivatives._handle_consts_in_bwd holds a custom_vjp's constants'
    avals as a plain list (a closure-converted custom_vjp, as equinox's checkpointed
    loops under diffrax bind): equal lists of avals are one program. From jax 0.12.1 it
    holds them as a tuple of `Zero(aval)`, equal only to themselves: keyed by their avals.
    """
    fn, static = transform
    if not isinstance(static, tuple) or not any(_holds_unhashable(s) for s in static):
        return transform
    return fn, tuple(_unwrapped(s) for s in static)


_KEYED_BY_VALUE = (_Unhashable, list, _Zero)


def _holds_unhashable(static: Any) -> bool:
    return isinstance(static, _KEYED_BY_VALUE) or (
        isinstance(static, tuple) and any(_holds_unhashable(s) for s in static))


def _unwrapped(static: Any) -> Any:
    if isinstance(static, tuple):
        return tuple(_unwrapped(s) for s in static)
    if isinstance(static, list):
        return _by_value(("list", tuple(static)), static)
    if isinstance(static, _Zero):
        return ("zero", static.aval)
    if not isinstance(static, _Unhashable):
        return static
    return _by_value(("value", static.val), static.val)


def _by_value(key: tuple, value: Any) -> Any:
    """`key` where it hashes; else the value's object stands for it (a list, a dict)."""
    try:
        hash(key)
    except TypeError:
        return _SameObject(value)
    return key


class _SameObject:
    """An unhashable value as a key: equal only to itself."""
    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __hash__(self) -> int:
        return id(self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _SameObject) and other.value is self.value


def wrapped_like(f: Callable, like: Any) -> Any:
    """`f` as a WrappedFun in place of the rule function `like` (same debug info)."""
    return lu.wrap_init(f, debug_info=getattr(like, "debug_info", None))


def custom_call_name(fun: Any) -> str:
    """A custom_jvp/custom_vjp function's name as a jaxpr prints its call
    (`custom_jvp_call[name=relu]`): its debug info's function name, else the Python
    function's own name; "" for none.

    NB: jax._src.api_util.DebugInfo.func_name, the name in `func_src_info`.
    """
    name = getattr(getattr(fun, "debug_info", None), "func_name", None)
    if isinstance(name, str) and name:
        return name
    return getattr(innermost_function(fun), "__name__", "") or ""


def wrapped_python_function(fun: Any) -> Any:
    """The Python function inside a linear_util WrappedFun (a custom rule), or `fun` itself."""
    return getattr(fun, "f", fun)


def innermost_function(fun: Any) -> Any:
    """The user's function inside a rule: its WrappedFun's, partials unwrapped."""
    inner = wrapped_python_function(fun)
    while hasattr(inner, "func"):  # a functools.partial
        inner = inner.func
    return inner


def jaxpr_body(fun: Any) -> Callable | None:
    """The body of a custom call bound from a jaxpr, as the function JAX made of that
    jaxpr, or None: evaluating it binds the jaxpr's equations, no Python of the user's.

    NB: jax._src.custom_derivatives' custom_jvp_call / custom_vjp_call `get_bind_params`
    (a jaxpr evaluated: equinox's closure-converted loop bodies, `jax.closure_convert`)
    make the body `lu.wrap_init(core.jaxpr_as_fun(call_jaxpr))` afresh at each bind:
    `partial(jaxpr_as_fun, call_jaxpr)` (0.10.2 to 0.12.1).
    """
    inner = wrapped_python_function(fun)
    if (isinstance(inner, functools.partial) and inner.func is _JAXPR_AS_FUN
            and len(inner.args) == 1 and not inner.keywords):
        return inner
    return None


def _uncurried(f: Any) -> Any:
    """`f` as it was before JAX's `util.curry` (`partial(partial, f)`) wrapped it."""
    if isinstance(f, functools.partial) and f.func is functools.partial and len(f.args) == 1:
        return f.args[0]
    return f


_JAXPR_AS_FUN = _uncurried(_core.jaxpr_as_fun)


def is_defjvps_rule(fun: Any) -> bool:
    """True for the jvp rule `custom_jvp.defjvps` writes around the user's tangent functions
    (jax.nn.relu's): a closure of JAX's, named `custom_jvp.defjvps.<locals>.jvp`.

    NB: jax._src.custom_derivatives.custom_jvp.defjvps defines `jvp` inside it; its code
    object is one of defjvps' constants (0.10.2 to 0.12), whatever the closure's name.
    """
    code = getattr(wrapped_python_function(fun), "__code__", None)
    return code is not None and code in _DEFJVPS_CODES


_DEFJVPS_CODES = frozenset(c for c in jax.custom_jvp.defjvps.__code__.co_consts
                           if isinstance(c, types.CodeType))
