"""record(values=True) read back: each equation's values (per stage), as one line of text
(every view shows them the same: ValueSummary.describe, NumPy's print for small leaves and
statistics for big ones), and the equations a step was staged as, with their values."""
from __future__ import annotations

from typing import NamedTuple, Sequence

from transforms.model import Call, StageValues, ValueSummary

__all__ = ["StepValue", "eqn_values", "stage_values", "step_values", "values_text"]


def values_text(outputs: Sequence[ValueSummary | None]) -> str:
    """An equation's outputs' values on one line ("?" for an output with none)."""
    return ", ".join(v.describe() if v is not None else "?" for v in outputs)


def stage_values(call: Call, stage: str) -> StageValues | None:
    """The values recorded for one stage of the call, or None (recorded without values)."""
    return next((v for v in call.values if v.stage == stage), None)


def eqn_values(call: Call | None, stage: str) -> tuple[tuple[ValueSummary | None, ...], ...]:
    """Per top-level equation of the stage, its outputs' values (() where there are none)."""
    found = stage_values(call, stage) if call is not None else None
    return found.outputs if found is not None else ()


class StepValue(NamedTuple):
    """One equation a step was staged as, in one stage, and its outputs' values."""
    stage: str
    eqn: int
    primitive: str
    text: str


def step_values(call: Call, step: int) -> list[StepValue]:
    """The equations staged from this step (Stage.eqn_steps) that have values, stage by
    stage: what the step computed when the call's stages were evaluated again."""
    found = []
    for values in call.values:
        stage = next((s for s in call.stages if s.name == values.stage), None)
        if stage is None or not values.outputs:
            continue
        for i, (at, outs) in enumerate(zip(stage.eqn_steps, values.outputs)):
            if at == step and i < len(stage.eqns):
                found.append(StepValue(stage.name, i, stage.eqns[i].primitive,
                                       values_text(outs)))
    return found
