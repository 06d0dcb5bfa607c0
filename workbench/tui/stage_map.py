"""Steps and equations: which equation of a staged jaxpr a step became (by primitive, file,
line and occurrence), each equation's line in the jaxpr's text, and a stage as lines.

Equations' locations and line spans are what the recorder recorded (EqnRecord.location,
Stage.eqn_spans): nothing here parses the jaxpr's text."""
from __future__ import annotations

from transforms.model import EqnRecord, SourceLocation, Stage, Step

__all__ = ["StageMap", "eqn_key", "eqn_lines", "grouped_by_line", "stage_lines", "step_key"]


def grouped_by_line(items, key_of) -> dict[tuple, list[int]]:
    """Positions 0, 1, 2 ... grouped by key_of(*item), each distinct item's key made once.

    A big stage repeats a few (primitive, source) pairs thousands of times.
    """
    raw: dict[tuple, list[int]] = {}
    for pos, item in enumerate(items):
        group = raw.get(item)
        if group is None:
            raw[item] = [pos]
        else:
            group.append(pos)
    found: dict[tuple, list[int]] = {}
    for item, group in raw.items():
        key = key_of(*item)
        if key is not None:
            found[key] = sorted(found[key] + group) if key in found else group
    return found


def step_key(step: Step) -> tuple | None:
    """(primitive as it appears in a staged jaxpr, file, line), or None when there is no line."""
    src = step.source
    if src is None:
        return None
    prim = step.primitive
    # A jnp wrapper (`jit[name=sin]`, inline) stages as its body; its last
    # equation is the one that produces the value.
    if prim in ("jit", "pjit") and step.subjaxprs and step.subjaxprs[0].primitives:
        if step.inline:
            prim = step.subjaxprs[0].primitives[-1]
    return (prim, src.file, src.line)


def eqn_key(eqn: EqnRecord) -> tuple | None:
    """(primitive, file, line) of an equation, as step_key gives a step's; None without a line."""
    return _located(eqn.primitive, eqn.location)


def _located(primitive: str, location: SourceLocation | None) -> tuple | None:
    return None if location is None else (primitive, location.file, location.line)


class StageMap:
    """One stage as the stages view needs it: its lines, each equation's line, and
    equations by (primitive, file, line). Built once per stage (`StageMap.of`), so
    switching views or stages back and forth does not split 16,000 lines again."""

    _recent: dict[int, StageMap] = {}  # id(stage) -> map, most recently used last
    _KEEP = 8

    @classmethod
    def of(cls, stage: Stage) -> StageMap:
        found = cls._recent.pop(id(stage), None)
        if found is None or found.stage is not stage:
            found = cls(stage)
        cls._recent[id(stage)] = found
        while len(cls._recent) > cls._KEEP:
            del cls._recent[next(iter(cls._recent))]
        return found

    def __init__(self, stage: Stage):
        self.stage = stage
        self.lines = stage_lines(stage)
        self.eqn_lines = eqn_lines(stage)
        self.eqn_of_line = ({line: i for i, line in enumerate(self.eqn_lines)}
                            if self.eqn_lines else {})
        self.width = max(map(len, self.lines), default=0)
        self._by_key: dict[tuple, list[int]] | None = None

    @property
    def by_key(self) -> dict[tuple, list[int]]:
        """Built on first use: only step <-> equation needs it."""
        if self._by_key is None:
            self._by_key = grouped_by_line(
                ((eqn.primitive, eqn.location) for eqn in self.stage.eqns), _located)
        return self._by_key

    def eqn_for(self, key: tuple, occurrence: int) -> int | None:
        found = self.by_key.get(key)
        if not found:
            return None
        return found[min(occurrence, len(found) - 1)]


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
