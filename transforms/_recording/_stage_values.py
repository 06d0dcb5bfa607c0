"""record(values=True): every equation of a call's replayable stages evaluated after the call,
on host copies of its inputs, each equation's outputs summarised (StageValues). The stages
replayed are the user's function (`f`), the transformed program (`grad(f)`, `vmap(f)`, its
forward and backward equations) and a jit's own jaxpr: the ones that take the call's inputs.

Nothing of the user's program is kept: summaries only, made after the call returned.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import _jax as _i
from .._capture import recording_off, summarize_array
from ..model import StageValues
from ._find_nans import replay_arguments

__all__ = ["VALUES_MAX_SIZE", "call_values", "stage_values"]

# record(values=True): equation outputs with more elements than this get no summary.
VALUES_MAX_SIZE = 1_000_000


def stage_values(name: str, closed: Any, args: list, max_size: int = VALUES_MAX_SIZE
                 ) -> StageValues:
    """Each top-level equation of `closed` evaluated at args, its outputs summarised."""
    outputs: list[tuple] = []

    def visit(index: int, eqn: Any, inputs: list, results: list) -> None:
        outputs.append(tuple(_summary(x, max_size) for x in results))
    try:
        with recording_off():
            _i.eval_equations(closed, [np.asarray(a) for a in args], visit)
    except Exception as e:  # in the record: the equations before it keep their values
        return StageValues(name, tuple(outputs),
                           note=f"stopped at equation {len(outputs)}: {type(e).__name__}: {e}")
    return StageValues(name, tuple(outputs))


def call_values(kept: dict, stages: tuple, live: Any,
                max_size: int = VALUES_MAX_SIZE) -> tuple[StageValues, ...]:
    """The values of every stage of the call that takes its inputs."""
    found = []
    for stage in stages:
        closed = kept.get(stage.name)
        args = replay_arguments(stage, closed, live) if closed is not None else None
        if args is not None:
            found.append(stage_values(stage.name, closed, args, max_size))
    return tuple(found)


def _summary(x: Any, max_size: int) -> Any:
    try:
        return summarize_array(x, max_size)
    except (TypeError, ValueError):  # a token or key: no values to show
        return None
