"""Steps and equations: which equation of a staged jaxpr a step became (by primitive, file,
line and occurrence), each equation's line in the jaxpr's text, and a stage as lines."""
from __future__ import annotations

import functools
import re

from transforms.model import Stage, Step

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


_EQN_SOURCE = re.compile(r"^(.*?):(\d+)(?::\d+)? \(.*\)$")


@functools.lru_cache(maxsize=8192)
def _file_line(source: str) -> tuple[str, int] | None:
    """Parsed once per distinct source text: a big stage repeats a few lines many times."""
    m = _EQN_SOURCE.match(source)
    return (m.group(1), int(m.group(2))) if m is not None else None


def eqn_key(primitive: str, source: str) -> tuple | None:
    found = _file_line(source or "")
    return None if found is None else (primitive, *found)


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
        self.eqn_lines = eqn_lines(stage, self.lines)
        self.eqn_of_line = ({line: i for i, line in enumerate(self.eqn_lines)}
                            if self.eqn_lines else {})
        self.width = max(map(len, self.lines), default=0)
        self._by_key: dict[tuple, list[int]] | None = None

    @property
    def by_key(self) -> dict[tuple, list[int]]:
        """Built on first use: only step <-> equation needs it."""
        if self._by_key is None:
            self._by_key = grouped_by_line(
                ((eqn.primitive, eqn.source) for eqn in self.stage.eqns), eqn_key)
        return self._by_key

    def eqn_for(self, key: tuple, occurrence: int) -> int | None:
        found = self.by_key.get(key)
        if not found:
            return None
        return found[min(occurrence, len(found) - 1)]


def eqn_lines(stage: Stage, lines: list[str] | None = None) -> list[int] | None:
    """Line numbers of the top-level equations in a stage's jaxpr text, when they can be told.

    The main jaxpr is the last `{ lambda` at column 0 (shared sub-jaxprs may be
    printed before it as `let name = { lambda ...`). Its equations start at an
    indent of 4 spaces; continuation lines are deeper or close a bracket.
    Returns None unless the count matches eqn_count, so a mapping is only ever
    shown where it is certain. `lines`: the text already split, when it is.
    """
    if stage.jaxpr is None or not stage.jaxpr.text:
        return None
    text = stage.jaxpr.text
    if lines is None or not stage.available:
        lines = text.split("\n")
    head = text.rfind("\n{ lambda")
    start = text.count("\n", 0, head + 1) if head >= 0 else 0
    found = [i for i in range(start + 1, len(lines))
             if lines[i][:4] == "    " and lines[i][4:5] not in ("", " ", "]", ")", "}")]
    return found if len(found) == stage.jaxpr.eqn_count else None


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
