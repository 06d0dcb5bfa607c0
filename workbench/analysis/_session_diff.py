"""What changed between two recorded sessions: calls, stages and equation counts.

Pure data in, pure data out. Calls are matched by (index, transform, function):
a call whose key is only in A is "removed", only in B "added". Two non-empty
sessions with no call in common are "unrelated": comparing them says nothing.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from transforms.model import Call, Session, Stage

from .._words import plural
from ._compiles import CompileChange, compile_changes
from ._process_merge import Divergence, divergence


@dataclass(frozen=True, slots=True)
class StageChange:
    name: str
    status: str                       # same | changed | added | removed
    eqns_a: int | None = None         # top-level equation counts (None: not a jaxpr stage)
    eqns_b: int | None = None
    primitives: tuple[tuple[str, int, int], ...] = ()  # (primitive, count in A, count in B), changed only
    available_a: bool = True
    available_b: bool = True

    @property
    def grew(self) -> bool:
        return self.eqns_a is not None and self.eqns_b is not None and self.eqns_b > self.eqns_a


@dataclass(frozen=True, slots=True)
class CallChange:
    index: int
    transform: str
    function: str
    status: str                       # same | changed | added | removed
    steps_a: int | None = None
    steps_b: int | None = None
    levels_a: tuple[str, ...] = ()
    levels_b: tuple[str, ...] = ()
    errors_a: tuple[str, ...] = ()
    errors_b: tuple[str, ...] = ()
    stages: tuple[StageChange, ...] = ()

    @property
    def title(self) -> str:
        return f"call {self.index} {self.transform}({self.function})"


@dataclass(frozen=True, slots=True)
class SessionDiff:
    calls: tuple[CallChange, ...]
    calls_a: int
    calls_b: int
    steps_a: int
    steps_b: int
    stages_recorded: bool             # either session has any stage
    divergence: Divergence | None = None  # two processes of one run: where their programs part
    processes: bool = False           # A and B are processes of a jax.distributed run
    compiles: tuple[CompileChange, ...] = ()  # each jitted function's compiles in A and B

    @property
    def related(self) -> bool:
        """False when both sessions have calls and none of them match."""
        if not self.calls_a or not self.calls_b:
            return True
        return any(c.status in ("same", "changed") for c in self.calls)

    @property
    def changed(self) -> bool:
        return any(c.status != "same" for c in self.calls)

    @property
    def grown(self) -> tuple[tuple[CallChange, StageChange], ...]:
        """Every matched stage whose equation count grew from A to B."""
        return tuple((c, s) for c in self.calls for s in c.stages if s.grew)

    @property
    def retraced_more(self) -> tuple[CompileChange, ...]:
        """The functions of the user's that B traced again more often than A did."""
        return tuple(c for c in self.compiles if c.retraced_more and not c.internal)

    def count(self, status: str) -> int:
        return sum(1 for c in self.calls if c.status == status)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "related": self.related,
            "changed": self.changed,
            "grew": bool(self.grown),
            "stages_recorded": self.stages_recorded,
            "a": {"calls": self.calls_a, "steps": self.steps_a},
            "b": {"calls": self.calls_b, "steps": self.steps_b},
            "summary": {s: self.count(s) for s in ("same", "changed", "added", "removed")},
            "calls": [_call_json(c) for c in self.calls],
            "compiles": [_compile_json(c) for c in self.compiles],
            "divergence": None if self.divergence is None else {
                "processes": [self.divergence.process_a, self.divergence.process_b],
                "call": self.divergence.call, "step": self.divergence.step,
                "a": self.divergence.what_a, "b": self.divergence.what_b,
                "text": self.divergence.describe()},
        }


def diff_sessions(a: Session, b: Session) -> SessionDiff:
    keys_b = {_key(c): c for c in b.calls}
    keys_a = {_key(c) for c in a.calls}
    rows = []
    for call in a.calls:
        other = keys_b.get(_key(call))
        rows.append(_removed(call) if other is None else _compare(call, other))
    rows.extend(_added(c) for c in b.calls if _key(c) not in keys_a)
    rows.sort(key=lambda r: (r.index, r.status == "added"))
    any_stages = any(c.stages for s in (a, b) for c in s.calls)
    processes = a.process is not None and b.process is not None
    return SessionDiff(tuple(rows), len(a.calls), len(b.calls), a.step_count, b.step_count,
                       any_stages, divergence(a, b) if processes else None, processes,
                       compile_changes(a, b))


def _key(call: Call) -> tuple[int, str, str]:
    return (call.index, call.transform, call.function)


def _levels(call: Call) -> tuple[str, ...]:
    return tuple(level.label for level in call.levels)


def _errors(call: Call) -> tuple[str, ...]:
    return tuple(e.type_name for e in call.errors)


def _removed(call: Call) -> CallChange:
    return CallChange(call.index, call.transform, call.function, "removed",
                      steps_a=len(call.steps), levels_a=_levels(call), errors_a=_errors(call))


def _added(call: Call) -> CallChange:
    return CallChange(call.index, call.transform, call.function, "added",
                      steps_b=len(call.steps), levels_b=_levels(call), errors_b=_errors(call))


def _compare(a: Call, b: Call) -> CallChange:
    stages = _compare_stages(a.stages, b.stages)
    same = (len(a.steps) == len(b.steps) and _levels(a) == _levels(b)
            and _errors(a) == _errors(b) and all(s.status == "same" for s in stages)
            and Counter(s.primitive for s in a.steps) == Counter(s.primitive for s in b.steps))
    return CallChange(a.index, a.transform, a.function, "same" if same else "changed",
                      len(a.steps), len(b.steps), _levels(a), _levels(b), _errors(a), _errors(b),
                      stages)


def _compare_stages(a: tuple[Stage, ...], b: tuple[Stage, ...]) -> tuple[StageChange, ...]:
    by_name_b = {s.name: s for s in b}
    names_a = {s.name for s in a}
    rows = []
    for stage in a:
        other = by_name_b.get(stage.name)
        if other is None:
            rows.append(StageChange(stage.name, "removed", eqns_a=stage.eqn_count,
                                    available_a=stage.available))
            continue
        prims = _primitive_changes(stage, other)
        same = (stage.eqn_count == other.eqn_count and not prims
                and stage.available == other.available
                and (stage.jaxpr is not None or stage.text == other.text))
        rows.append(StageChange(stage.name, "same" if same else "changed", stage.eqn_count,
                                other.eqn_count, prims, stage.available, other.available))
    rows.extend(StageChange(s.name, "added", eqns_b=s.eqn_count, available_b=s.available)
                for s in b if s.name not in names_a)
    return tuple(rows)


def _primitive_changes(a: Stage, b: Stage) -> tuple[tuple[str, int, int], ...]:
    ca = _histogram(a)
    cb = _histogram(b)
    return tuple((p, ca[p], cb[p]) for p in sorted(set(ca) | set(cb)) if ca[p] != cb[p])


def _histogram(stage: Stage) -> Counter:
    if stage.histogram:
        return Counter({bar.primitive: bar.count for bar in stage.histogram})
    if stage.jaxpr is not None:
        return Counter(stage.jaxpr.primitives)
    return Counter()


def _call_json(c: CallChange) -> dict[str, Any]:
    return {
        "index": c.index, "transform": c.transform, "function": c.function, "status": c.status,
        "steps": [c.steps_a, c.steps_b], "levels": [list(c.levels_a), list(c.levels_b)],
        "errors": [list(c.errors_a), list(c.errors_b)],
        "stages": [{"name": s.name, "status": s.status, "eqns": [s.eqns_a, s.eqns_b],
                    "grew": s.grew, "available": [s.available_a, s.available_b],
                    "primitives": {p: [x, y] for p, x, y in s.primitives}}
                   for s in c.stages],
    }


def format_diff(d: SessionDiff, name_a: str, name_b: str, verbose: bool = False) -> list[str]:
    """Plain-text lines: one per call (unchanged calls only with verbose), then a summary."""
    lines = [f"A: {name_a} ({plural(d.calls_a, 'call')}, {plural(d.steps_a, 'step')})",
             f"B: {name_b} ({plural(d.calls_b, 'call')}, {plural(d.steps_b, 'step')})"]
    if not d.related:
        lines.append(f"the traces look unrelated: none of A's {plural(d.calls_a, 'call')} "
                     f"matches one of B's {d.calls_b} (calls are matched by index, transform "
                     f"and function)")
        return lines
    for c in d.calls:
        if c.status == "same" and not verbose:
            continue
        if c.status in ("added", "removed"):
            where = "B" if c.status == "added" else "A"
            lines.append(f"{c.title}: only in {where}")
            continue
        lines.append(f"{c.title}: {c.status}")
        if c.steps_a is not None and c.steps_b is not None and c.steps_a != c.steps_b:
            lines.append(f"  steps: {c.steps_a} -> {c.steps_b} ({_signed(c.steps_b - c.steps_a)})")
        if c.levels_a != c.levels_b:
            lines.append(f"  levels: {' '.join(c.levels_a)} -> {' '.join(c.levels_b)}")
        if c.errors_a != c.errors_b:
            lines.append(f"  errors: {', '.join(c.errors_a) or 'none'} -> "
                         f"{', '.join(c.errors_b) or 'none'}")
        for s in c.stages:
            if s.status != "same" or verbose:
                lines.append("  " + _stage_line(s))
    lines.extend(_compile_lines(d, verbose))
    lines.append(_summary(d))
    if d.divergence is not None:
        lines.append("first divergent step: " + d.divergence.describe())
    elif d.processes:
        lines.append("the two processes traced the same programs (steps compared by level, "
                     "primitive, params and avals)")
    return lines


def _stage_line(s: StageChange) -> str:
    if s.status == "added":
        return f"stage {s.name}: only in B" + (f" ({s.eqns_b} equations)" if s.eqns_b is not None else "")
    if s.status == "removed":
        return f"stage {s.name}: only in A" + (f" ({s.eqns_a} equations)" if s.eqns_a is not None else "")
    text = f"stage {s.name}: "
    if s.eqns_a is not None or s.eqns_b is not None:
        if s.eqns_a == s.eqns_b:
            text += f"{s.eqns_a} equations"
        elif s.eqns_a is not None and s.eqns_b is not None:
            text += f"{s.eqns_a} -> {s.eqns_b} equations ({_signed(s.eqns_b - s.eqns_a)})"
        else:
            text += f"{s.eqns_a} -> {s.eqns_b} equations"
    else:
        text += s.status
    if s.available_a != s.available_b:
        text += f"; available {s.available_a} -> {s.available_b}"
    if s.primitives:
        text += "  [" + ", ".join(f"{p} {_signed(y - x)}" for p, x, y in s.primitives) + "]"
    return text


def _summary(d: SessionDiff) -> str:
    parts = [f"{d.count('changed')} changed", f"{d.count('same')} same",
             f"{d.count('removed')} only in A", f"{d.count('added')} only in B"]
    text = "calls: " + ", ".join(parts)
    if not d.stages_recorded:
        text += "; no stages recorded, so no equation counts (record with stages=True)"
    elif d.grown:
        text += f"; equation counts grew in {len(d.grown)} stage(s)"
    else:
        text += "; no equation count grew"
    return text


def _compile_lines(d: SessionDiff, verbose: bool) -> list[str]:
    """Each function whose traces or compiles differ (all with verbose), and B's new reasons."""
    lines = []
    for c in d.compiles:
        if not (c.changed or verbose):
            continue
        label = f"(jax) {c.function}" if c.internal else c.function
        lines.append(f"jit {label} at {c.place}: traces {c.traces[0]} -> {c.traces[1]}, "
                     f"compiles {c.compiles[0]} -> {c.compiles[1]}, "
                     f"{c.seconds[0]:.2f} s -> {c.seconds[1]:.2f} s")
        lines.extend(f"  new in B: {reason}" for reason in c.new_reasons)
    return lines


def _compile_json(c: CompileChange) -> dict[str, Any]:
    return {"function": c.function, "place": c.place, "internal": c.internal,
            "traces": list(c.traces), "compiles": list(c.compiles),
            "retraces": list(c.retraces), "seconds": list(c.seconds),
            "new_reasons": list(c.new_reasons)}


def _signed(n: int) -> str:
    return f"+{n}" if n > 0 else str(n)
