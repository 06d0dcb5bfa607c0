"""Steps and equations: the equation a step became, the step an equation was staged from,
each equation's line in the jaxpr's text, and a stage as lines.

All of it is what the recorder recorded (Stage.eqn_steps, Stage.eqn_spans): nothing here
matches steps to equations by their text or source line, or parses the jaxpr's text."""
from __future__ import annotations

from typing import Callable

from transforms.model import Stage, Step

__all__ = ["StageMap", "eqn_lines", "stage_lines", "step_primitive"]


def step_primitive(step: Step) -> str:
    """The primitive a step stages as: a jnp wrapper (`jit[name=sin]`, inline) stages as its
    body, whose last equation produces the value."""
    if step.inline and step.subjaxprs and step.subjaxprs[0].primitives:
        return step.subjaxprs[0].primitives[-1]
    return step.primitive


class StageMap:
    """One stage as the stages view needs it: its lines, each equation's line, and the
    equations each recorded step was staged into. The stages view keeps the maps of the
    stages it showed lately (`widgets/stages/stage_text.stage_map`)."""

    def __init__(self, stage: Stage):
        self.stage = stage
        self.lines = stage_lines(stage)
        self.eqn_lines = eqn_lines(stage)
        self.eqn_of_line = ({line: i for i, line in enumerate(self.eqn_lines)}
                            if self.eqn_lines else {})
        self.width = max(map(len, self.lines), default=0)
        self._of_step: dict[int, list[int]] | None = None

    @property
    def eqns_of_step(self) -> dict[int, list[int]]:
        """Step index -> the equations staged from it, in order (from Stage.eqn_steps)."""
        if self._of_step is None:
            found: dict[int, list[int]] = {}
            for eqn, step in enumerate(self.stage.eqn_steps):
                if step >= 0:
                    found.setdefault(step, []).append(eqn)
            self._of_step = found
        return self._of_step

    def step_of_eqn(self, eqn: int) -> int | None:
        """The index of the step the equation was staged from, where that was recorded."""
        steps = self.stage.eqn_steps
        return steps[eqn] if 0 <= eqn < len(steps) and steps[eqn] >= 0 else None

    def eqn_of_step(self, step: Step, step_at: Callable[[int], Step | None]) -> int | None:
        """The equation `step` became: its own (the last of an inline wrapper's body, the
        first with its primitive in a derivative's stage), or for a step another caused
        (what grad emitted at the enclosing level), one of the equations of the step that
        caused it, with its primitive, by its order among that step's effects.

        `step_at(index)` is the call's step with that index, or None."""
        of_step = self.eqns_of_step
        root = _root(step, of_step, step_at) if of_step else None
        if root is None:
            return None
        found = of_step[root.index]
        primitive = step_primitive(step)
        eqns = self.stage.eqns
        same = [e for e in found if e < len(eqns) and eqns[e].primitive == primitive]
        if root is step:
            if same:
                return same[0]
            # A jnp wrapper whose body is not recorded: in f its equations are its body, the
            # last one the value; in a derivative's stage its first is its forward part.
            return found[-1] if self.stage.role == "f" else found[0]
        candidates = same or (found if step.inline else [])
        if not candidates:
            return None
        before = 0  # earlier effects of the same root at this level with this primitive
        for index in range(root.index + 1, step.index):
            other = step_at(index)
            if other is not None and other.level == step.level and \
                    step_primitive(other) == primitive and _root(other, of_step, step_at) is root:
                before += 1
        return candidates[min(before, len(candidates) - 1)]


def _root(step: Step, of_step: dict, step_at: Callable[[int], Step | None]) -> Step | None:
    """The step itself if equations were staged from it, else the nearest step up its
    causes that has some; None when none has."""
    root: Step | None = step
    while root is not None and root.index not in of_step and root.cause is not None:
        root = step_at(root.cause)
    return root if root is not None and root.index in of_step else None


def eqn_lines(stage: Stage) -> list[int] | None:
    """Line numbers of the top-level equations in a stage's jaxpr text, where the recorder
    could tell them (Stage.eqn_spans: their first lines), else None."""
    if stage.jaxpr is None or not stage.jaxpr.text or not stage.eqn_spans:
        return None
    return [first for first, _ in stage.eqn_spans]


def stage_lines(stage: Stage) -> list[str]:
    """A stage as lines of text: its jaxpr, its compiled text, its figures, or why it is missing."""
    if not stage.available:
        return [f"unavailable: {line}" for line in (stage.reason or "no reason recorded").split("\n")]
    if stage.jaxpr is not None and stage.jaxpr.text:
        return stage.jaxpr.text.split("\n")
    if stage.text is not None:
        return stage.text.split("\n")
    if stage.metrics:
        width = max(len(m.name) for m in stage.metrics)
        return [f"{m.name:<{width}}  {_number(m.value)}" for m in stage.metrics]
    if stage.jaxpr is not None:
        return [f"(jaxpr text not kept: {stage.jaxpr.eqn_count} equations)"]
    return ["(nothing recorded for this stage)"]


def _number(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return f"{int(value):,}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:,}" if isinstance(value, int) else f"{value:,.4g}"
    return str(value)
