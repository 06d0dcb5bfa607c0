"""A function's parameters, read once per function: through our wrappers to the user's
function (signature_holder), cached while that function lives. What a call's trees, its
pre-trace check and its stages name arguments by."""
from __future__ import annotations

import inspect
import weakref
from typing import Any

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


def argument_names(fun: Any, args: tuple) -> list[str]:
    """A name for each positional argument: the parameter's, else `args[i]`."""
    names = [f"args[{i}]" for i in range(len(args))]
    params = signature_parameters(fun)
    for i, p in enumerate(params):
        if i >= len(args):
            break
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names[i] = p.name
        elif p.kind == p.VAR_POSITIONAL:
            break
    return names
