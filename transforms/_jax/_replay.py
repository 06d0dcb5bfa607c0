"""Evaluating recorded programs again, after the call, on host copies of its inputs: what a
jaxpr calls back into Python (never replayed: the user's code would run again), a jaxpr
evaluated equation by equation (each equation's inputs and outputs handed to a visitor).

Everything here is public surface (`jax.core`, `jax.extend`) except where a comment says
`# NB: jax._src`.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, NamedTuple

from jax.extend import core as jax_core

from ._sources import name_stack_facts

__all__ = ["calls_back", "consts_of", "eqn_facts", "eval_equations", "inner_call", "inner_jaxprs",
           "input_types", "values_by_var", "with_consts"]


def inner_jaxprs(params: dict) -> Iterator[Any]:
    """The jaxprs an equation's params hold (a cond's branches, a scan's body, a pjit's
    jaxpr), open or closed."""
    for item in jax_core.jaxprs_in_params(params):
        yield getattr(item, "jaxpr", item)


def calls_back(closed: Any) -> bool:
    """Whether evaluating this (closed) jaxpr would run Python of the program's (a callback,
    a debug print) or has effects: such a program is not evaluated again."""
    jaxpr = getattr(closed, "jaxpr", closed)
    if jaxpr.effects:
        return True
    stack = [jaxpr]
    while stack:
        for eqn in stack.pop().eqns:
            if "callback" in eqn.primitive.name or eqn.effects:
                return True
            stack.extend(inner_jaxprs(eqn.params))
    return False


Visit = Callable[[int, Any, list, list], None]


def eval_equations(closed: Any, args: list, visit: Visit) -> list:
    """closed's outputs at args, evaluated one top-level equation at a time as
    jax.core.eval_jaxpr does; visit(index, eqn, inputs, outputs) after each."""
    jaxpr = getattr(closed, "jaxpr", closed)
    consts = getattr(closed, "consts", ())
    env: dict = {}

    def read(v: Any) -> Any:
        return v.val if isinstance(v, jax_core.Literal) else env[v]

    for var, value in zip(jaxpr.constvars, consts):
        env[var] = value
    for var, value in zip(jaxpr.invars, args):
        env[var] = value
    for index, eqn in enumerate(jaxpr.eqns):
        inputs = [read(v) for v in eqn.invars]
        # NB: jax._src.core.eval_jaxpr: a primitive's bind params from its eqn's params
        # (older JAX releases also gave the functions to bind with), under its context
        bound = eqn.primitive.get_bind_params(eqn.params)
        subfuns, params = bound if isinstance(bound, tuple) else ((), bound)
        ctx = getattr(getattr(eqn, "ctx", None), "manager", None)
        with ctx if ctx is not None else contextlib.nullcontext():
            out = eqn.primitive.bind(*subfuns, *inputs, **params)
        outputs = list(out) if eqn.primitive.multiple_results else [out]
        for var, value in zip(eqn.outvars, outputs):
            env[var] = value
        visit(index, eqn, inputs, outputs)
    return [read(v) for v in jaxpr.outvars]


def values_by_var(closed: Any, args: list) -> dict:
    """Every variable of closed (consts, inputs, each top-level equation's outputs) and its
    value at args: what a jaxpr traced inside closed's trace closed over (its tracers'
    staged_var) is looked up here."""
    jaxpr = getattr(closed, "jaxpr", closed)
    env: dict = dict(zip(jaxpr.constvars, getattr(closed, "consts", ())))
    env.update(zip(jaxpr.invars, args))

    def visit(index: int, eqn: Any, inputs: list, outputs: list) -> None:
        env.update(zip(eqn.outvars, outputs))
    eval_equations(closed, args, visit)
    return env


def watching_vars(closed: Any, args: list, wanted: dict, visit: Visit) -> Visit:
    """`visit` that also fills `wanted` (var: None) with the values of its variables that are
    closed's consts, inputs (filled now) or top-level equations' outputs (as evaluated)."""
    jaxpr = getattr(closed, "jaxpr", closed)
    for var, value in zip([*jaxpr.constvars, *jaxpr.invars],
                          [*getattr(closed, "consts", ()), *args]):
        if var in wanted:
            wanted[var] = value

    def both(index: int, eqn: Any, inputs: list, outputs: list) -> None:
        for var, value in zip(eqn.outvars, outputs):
            if var in wanted:
                wanted[var] = value
        visit(index, eqn, inputs, outputs)
    return both


def input_types(closed: Any) -> list[tuple[tuple, str]]:
    """(shape, dtype name) of each input of a jaxpr (a token's: ((), its aval's text))."""
    jaxpr = getattr(closed, "jaxpr", closed)
    return [(tuple(getattr(v.aval, "shape", ())), str(getattr(v.aval, "dtype", v.aval)))
            for v in jaxpr.invars]


def with_consts(closed: Any, consts: list) -> Any:
    """closed with other values for its consts, as eval_equations reads a closed jaxpr."""
    return _Closed(getattr(closed, "jaxpr", closed), tuple(consts))


class _Closed(NamedTuple):
    jaxpr: Any
    consts: tuple


def consts_of(closed: Any) -> tuple:
    return tuple(getattr(closed, "consts", ()))


# The params holding the jaxpr a call-like equation runs with its own inputs, one to one.
_CALL_JAXPR_PARAMS = ("jaxpr", "call_jaxpr", "fun_jaxpr")


def inner_call(eqn: Any) -> tuple[str, Any] | None:
    """(label, closed or open jaxpr) a call-like equation (jit, closed_call, custom_jvp_call,
    remat) runs on exactly its inputs; None for other equations (cond, scan, while)."""
    for key in _CALL_JAXPR_PARAMS:
        inner = eqn.params.get(key)
        jaxpr = getattr(inner, "jaxpr", inner)
        if isinstance(jaxpr, jax_core.Jaxpr) and len(jaxpr.invars) == len(eqn.invars):
            name = eqn.params.get("name")
            label = f"{eqn.primitive.name}[name={name}]" if name else eqn.primitive.name
            return label, inner
    return None


def eqn_facts(eqn: Any) -> tuple[str, str, str]:
    """(primitive name, name stack as JAX prints it, its scope path) of a live equation."""
    return eqn.primitive.name, *name_stack_facts(eqn.source_info.name_stack)
