"""What every reader (the CLI, the TUI, the exporter) looks up in a recorded call, worked out
in one place from the record model alone: failing steps, steps per level, the default pair of
stages to compare."""
from __future__ import annotations

from array import array
from collections.abc import Sequence

from transforms.model import PROCESS_ENDED, Call, Stage, default_pair, stage_function, whole_program

__all__ = ["UNKNOWN_LEVEL", "default_stage_pair", "failing_steps", "function_program",
           "no_stages_reason", "steps_by_level", "whole_program"]

# The key `steps_by_level` files steps under whose level is not one of the call's levels
# (a session made in memory; a loaded one is checked: transforms/model/_check.py).
UNKNOWN_LEVEL = -1


def no_stages_reason(call: Call) -> str:
    """Why a call has no stages, in words every reader shows: stages are captured while a
    call is traced, so a call that failed before JAX traced it (no level recorded: a pytree
    it could not flatten) has none though stages were on, nor has the call a process died in
    (its record is only what the journal said of it)."""
    if any(e.type_name == PROCESS_ENDED for e in call.errors):
        return "the process ended during the call: its stages were never written"
    if call.errors and not call.levels:
        return "the call failed before JAX traced it"
    return "recorded with stages off: record(stages=False) or workbench run --no-stages"


def phased(call: Call) -> bool:
    """Whether a step's phase (forward, backward) says anything: only in a call that has a
    backward pass (a vmap or a jit alone runs forward only)."""
    return any(step.phase != "forward" for step in call.steps)


def failing_steps(call: Call) -> set[int]:
    """Indices of the steps that failed: error events, primitives that raised, and the
    steps the call's errors name."""
    out = {s.index for s in call.steps if s.kind == "error" or s.error}
    out.update(e.step for e in call.errors if e.step is not None)
    return out


def steps_by_level(call: Call) -> dict[int, array]:
    """Positions in call.steps (in order) by their level's index; array("q") keeps a
    million-step call small."""
    known = {lv.index for lv in call.levels}
    by_level: dict[int, array] = {}
    for pos, step in enumerate(call.steps):
        level = step.level if step.level in known else UNKNOWN_LEVEL
        positions = by_level.get(level)
        if positions is None:
            positions = by_level[level] = array("q")
        positions.append(pos)
    return by_level


def function_program(stages: Sequence[Stage], name: str) -> int:
    """The whole transformed program of the function the jaxpr stage `name` belongs to."""
    function = stage_function(name)
    own = [i for i, s in enumerate(stages)
           if s.jaxpr is not None and stage_function(s.name) == function]
    return whole_program(stages, own)


def default_stage_pair(stages: Sequence[Stage]) -> tuple[int, int]:
    """Before and after, as indices: a function and its whole transformed program
    (transforms.model._diff.default_pair, which is None where no function has two jaxpr stages:
    then a jit's one jaxpr against the StableHLO it lowers to, else the first jaxpr stage
    against the last transformed one; (0, 0) for no stages)."""
    pair = default_pair(stages)
    if pair is not None:
        return pair
    if not stages:
        return 0, 0
    jaxprs = [i for i, s in enumerate(stages) if s.jaxpr is not None]
    if not jaxprs:
        return 0, len(stages) - 1
    if len(jaxprs) == 1:  # a plain jit: its jaxpr against the first compiled text after it
        lowered = next((i for i, s in enumerate(stages) if i > jaxprs[0] and s.jaxpr is None
                        and s.available and s.text), None)
        if lowered is not None:
            return jaxprs[0], lowered
    return jaxprs[0], whole_program(stages, jaxprs)
