"""A call's steps read as their authors wrote them, as plain data for every reader: a jit of
JAX's own function (jnp.take's `_take`) is one operation at the user's line
(`take at model.py:41`), and steps run in one module or named scope are grouped under its
path (`step_group`: a flax nnx or equinox model's module path, `NnxMLP/linear1`, Step.module;
else linen's `MLP/attn/query` or `jax.named_scope`'s, Step.scope; both recorded)."""
from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from transforms.model import Step, operation_name

__all__ = ["ScopeRun", "library_body", "library_operation", "scope_runs", "scope_totals",
           "step_group", "step_label"]


def library_operation(step: Step) -> str:
    """The operation a jit of JAX's own function stands for, named as the user called it
    (`take` for `jit[name=_take]`, `mean` for `_mean`); "" for any other step."""
    if not step.library:
        return ""
    for key, value in step.params:
        if key == "name":
            return operation_name(value.strip("'"))
    return ""


def library_body(step: Step) -> tuple[str, ...]:
    """The inside of a jit of JAX's own function, as recorded: its jaxpr's top-level
    equations' primitives, in order (`lt, add, jit, broadcast_in_dim, gather` for take);
    () for any other step, or where its body was not kept (a jnp wrapper JAX inlines, at
    the default detail)."""
    if not step.library:
        return ()
    return tuple(p for jaxpr in step.subjaxprs for p in jaxpr.primitives)


def step_label(step: Step) -> str:
    """How a step reads in a list: a library's jit as its operation and the user's line
    (`take at model.py:41`), any other step as its primitive (`jit[name=loss]`, `sin`)."""
    operation = library_operation(step)
    if not operation:
        return step.title
    source = step.source
    if source is None:
        return operation
    return f"{operation} at {os.path.basename(source.file)}:{source.line}"


def step_group(step: Step) -> str:
    """The path a step is grouped under by every reader: its module path where one was
    recorded (an nnx or equinox model's, `CNN/layers[0]`: it names the layer, where
    equinox's own scope names only its class, `eqx.nn.Linear`), else its scope (linen's
    modules, jax.named_scope); "" for neither."""
    return step.module or step.scope


class ScopeRun(NamedTuple):
    """Consecutive steps of one level run in one module or scope."""
    scope: str                 # "MLP/attn/query"; "" for steps in none
    positions: tuple[int, ...]  # positions in call.steps


def scope_runs(steps: Sequence[Step], positions: Iterable[int]) -> list[ScopeRun]:
    """`positions` (of `steps`, in order) cut into runs of one scope each."""
    runs: list[ScopeRun] = []
    current: list[int] = []
    scope = ""
    for pos in positions:
        path = step_group(steps[pos])
        if current and path != scope:
            runs.append(ScopeRun(scope, tuple(current)))
            current = []
        scope = path
        current.append(pos)
    if current:
        runs.append(ScopeRun(scope, tuple(current)))
    return runs


def scope_totals(runs: Iterable[ScopeRun]) -> list[tuple[str, int]]:
    """(scope, steps) per scope of these runs, in the order they first ran; no "" scope."""
    totals: dict[str, int] = {}
    for run in runs:
        if run.scope:
            totals[run.scope] = totals.get(run.scope, 0) + len(run.positions)
    return list(totals.items())
