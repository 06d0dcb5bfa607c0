"""Evaluating recorded programs again, after the call, on host copies of its inputs: what a
jaxpr calls back into Python (never replayed: the user's code would run again), a jaxpr
evaluated equation by equation (each equation's inputs and outputs handed to a visitor).

Everything here is public surface (`jax.core`, `jax.extend`) except where a comment says
`# NB: jax._src`.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator

from jax.extend import core as jax_core

__all__ = ["calls_back", "eval_equations", "inner_jaxprs"]


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
    jaxpr, consts = closed.jaxpr, closed.consts
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
        subfuns, params = eqn.primitive.get_bind_params(eqn.params)
        out = eqn.primitive.bind(*subfuns, *inputs, **params)
        outputs = list(out) if eqn.primitive.multiple_results else [out]
        for var, value in zip(eqn.outvars, outputs):
            env[var] = value
        visit(index, eqn, inputs, outputs)
    return [read(v) for v in jaxpr.outvars]
