"""record(values=True): every equation of a call's jaxpr stages evaluated after the call,
on host copies of its inputs, each equation's outputs summarised (StageValues). What each
stage takes is derived from the call's inputs (_stage_inputs); a stage that cannot be
evaluated says why in its note, with no values.

Nothing of the user's program is kept: summaries only, made after the call returned.
"""
from __future__ import annotations

from typing import Any

import jax
import numpy as np

from .. import _jax as _i
from .._capture import recording_off, summarize_array
from ..model import StageValues
from ._stage_inputs import Forward, Pulled, StageInputs, host_copies

__all__ = ["VALUES_MAX_SIZE", "Forward", "call_values", "forward_of", "returned_call_values",
           "stage_values"]

# record(values=True): equation outputs with more elements than this get no summary.
VALUES_MAX_SIZE = 1_000_000


def stage_values(name: str, closed: Any, args: list, max_size: int = VALUES_MAX_SIZE,
                 note: str = "", wanted: dict | None = None) -> StageValues:
    """Each top-level equation of `closed` evaluated at args, its outputs summarised; the
    variables in `wanted` (var: None) given their values as they are met."""
    outputs: list[tuple] = []

    def summarized(index: int, eqn: Any, inputs: list, results: list) -> None:
        outputs.append(tuple(_summary(x, max_size) for x in results))
    host = [np.asarray(a) for a in args]
    visit = _i.watching_vars(closed, host, wanted, summarized) if wanted else summarized
    try:
        with recording_off():
            _i.eval_equations(closed, host, visit)
    except Exception as e:  # in the record: the equations before it keep their values
        stopped = f"stopped at equation {len(outputs)}: {type(e).__name__}: {e}"
        return StageValues(name, tuple(outputs), note="; ".join(x for x in (note, stopped) if x))
    return StageValues(name, tuple(outputs), note=note)


def call_values(kept: dict, stages: tuple, live: Any, spec: Any = None,
                max_size: int = VALUES_MAX_SIZE, function: str = "f") -> tuple[StageValues, ...]:
    """The values of every jaxpr stage of the call (of `function`'s stages, given its
    inputs: a transformation called inside the call); a stage whose inputs cannot be
    derived from the call's gets a note saying why, and no values."""
    inputs = StageInputs(kept, live, spec, roles=roles_of(stages), function=function)
    return _evaluated(inputs, kept, stages, max_size)


def forward_of(index: int, kept: dict, stages: tuple, live: Any, spec: Any) -> Forward:
    """What a vjp or linearize call keeps for the function it returns (host copies)."""
    return Forward(index, kept, host_copies(live), spec, roles_of(stages))


def returned_call_values(forward: Forward, kind: str, stages: tuple, live: Any,
                         max_size: int = VALUES_MAX_SIZE) -> tuple[StageValues, ...]:
    """A returned function's call (a pullback's, a pushforward's): its forward call's
    stages evaluated at what it was given, where they take it."""
    pulled = Pulled(kind, jax.tree_util.tree_leaves(live[0]), forward.index)
    inputs = StageInputs(forward.kept, forward.live, forward.spec, pulled, forward.roles)
    return _evaluated(inputs, forward.kept, stages, max_size)


def roles_of(stages: tuple) -> dict[str, str]:
    """The first stage's name of each role."""
    roles: dict[str, str] = {}
    for stage in stages:
        roles.setdefault(stage.role, stage.name)
    return roles


def _evaluated(inputs: StageInputs, kept: dict, stages: tuple,
               max_size: int) -> tuple[StageValues, ...]:
    found = []
    for stage in stages:
        if stage.jaxpr is None or not stage.available:
            continue
        closed = kept.get(stage.name)
        if closed is None:
            found.append(StageValues(stage.name, note="not evaluated: its jaxpr was not kept"))
            continue
        try:
            with recording_off():
                given = inputs.of(stage, closed)
        except Exception as e:  # a fault of ours (or a forward pass that fails): said
            found.append(StageValues(stage.name, note=f"not evaluated: {type(e).__name__}: {e}"))
            continue
        if given.args is None:
            found.append(StageValues(stage.name, note=f"not evaluated: {given.why}"))
            continue
        program = closed if given.consts is None else _i.with_consts(closed, given.consts)
        found.append(stage_values(stage.name, program, given.args, max_size, given.note))
    return tuple(found)


def _summary(x: Any, max_size: int) -> Any:
    try:
        return summarize_array(x, max_size)
    except (TypeError, ValueError):  # a token or key: no values to show
        return None
