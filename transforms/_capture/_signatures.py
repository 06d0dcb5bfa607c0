"""A function's parameters, read once per function: through our wrappers to the user's
function (signature_holder), cached while that function lives. What a call's trees, its
pre-trace check and its stages name arguments by."""
from __future__ import annotations

import inspect
import weakref
from typing import Any

from ._locations import library_closure_of
from ._spec import Wrapper

__all__ = ["argument_names", "parameter_names", "signature_holder", "signature_parameters"]

_signatures: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def signature_holder(fun: Any) -> Any:
    """The function whose signature `fun` has: through our wrappers to the user's function.

    NB: a program builds `grad(f)` afresh on each call, f lives on: signatures cached per
    function are found again.
    """
    for _ in range(64):
        if not isinstance(fun, Wrapper):
            break
        fun = fun.__wrapped__
    return fun


def signature_parameters(fun: Any) -> list[inspect.Parameter]:
    """inspect.signature(fun)'s parameters, once per function (every recorded call asks)."""
    fun = signature_holder(fun)
    try:
        return _signatures[fun]
    except (KeyError, TypeError):  # not seen yet, or not weakly referable / hashable
        pass
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):  # builtins, odd callables
        params = []
    try:
        _signatures[fun] = params
    except TypeError:
        return params
    return params


def parameter_names(fun: Any) -> list[str]:
    """The names of fun's parameters, in order (`*args` and `**kwargs` included)."""
    return [p.name for p in signature_parameters(fun)]


# A library's closure around the user's function (by its code's qualified name): which of
# the user's parameters each of its leading parameters holds part of; its *args hold the
# user's next ones. equinox's filter_value_and_grad(loss)(model, x) differentiates
# fun_value_and_grad(_diff_x, _nondiff_x, *_args): model's arrays, the rest of model, x.
LIBRARY_CLOSURE_PARAMETERS: dict[str, tuple[int, ...]] = {
    "_ValueAndGradWrapper.__call__.<locals>.fun_value_and_grad": (0, 0),
}


def argument_names(fun: Any, args: tuple) -> list[str]:
    """A name for each positional argument: the parameter's, else `args[i]`; a library's
    closure's arguments by the user's parameters they hold."""
    names = [f"args[{i}]" for i in range(len(args))]
    held = _closure_parameters(fun)
    if held is not None:
        user_fun, positions = held
        user = _positional_names(user_fun)
        for i in range(len(args)):
            at = positions[i] if i < len(positions) else max(positions) + 1 + i - len(positions)
            if at < len(user):
                names[i] = user[at]
        return names
    params = signature_parameters(fun)
    for i, p in enumerate(params):
        if i >= len(args):
            break
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names[i] = p.name
        elif p.kind == p.VAR_POSITIONAL:
            break
    return names


def _closure_parameters(fun: Any) -> tuple[Any, tuple[int, ...]] | None:
    """The user's function a library's closure stands for and which of its parameters the
    closure's leading ones hold, for the closures LIBRARY_CLOSURE_PARAMETERS knows."""
    code = getattr(fun, "__code__", None)
    positions = LIBRARY_CLOSURE_PARAMETERS.get(getattr(code, "co_qualname", ""))
    if positions is None:
        return None
    user_fun = library_closure_of(fun)
    return (user_fun, positions) if user_fun is not None else None


def _positional_names(fun: Any) -> list[str]:
    """The names of fun's parameters that a positional argument can fill, up to *args."""
    names = []
    for p in signature_parameters(fun):
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            break
        names.append(p.name)
    return names
