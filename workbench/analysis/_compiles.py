"""A session's jit compiles read per function: what every reader shows (show's table, the
TUI's compiles view, diff), as plain data.

A group is one jitted function (one definition: every object made from it counts, so a
`jax.jit(lambda ...)` made in a loop is one group) with its traces in order. The jits JAX
ran for jnp or a library, whose keys were not recorded, are folded into one group per
user line that caused them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from transforms.model import CompileRecord, MissReason, Session, SourceLocation, explain, hint

__all__ = ["CompileChange", "CompileGroup", "CompileTotals", "compile_changes", "compile_groups",
           "compile_totals", "reason_lines", "short_place"]


@dataclass(frozen=True)
class CompileGroup:
    """One function's traces, lowerings and compiles in a session, in order."""
    function: str             # its name; for folded internal jits, their names
    location: SourceLocation | None  # the user's line of its first trace
    records: tuple[CompileRecord, ...]
    internal: bool = False    # jits JAX ran for jnp or a library (no key recorded)

    @property
    def traces(self) -> int:
        return sum(r.traced for r in self.records)

    @property
    def compiles(self) -> int:
        return sum(r.compiled for r in self.records)

    @property
    def retraces(self) -> int:
        """Traces after the first (of a function whose key was recorded)."""
        return sum(r.is_miss for r in self.records) if not self.internal else 0

    @property
    def recompiles(self) -> int:
        """Compiles of a trace already compiled (an argument moved to another device)."""
        return sum(1 for r in self.records if r.compiled and not r.traced and r.reasons) \
            if not self.internal else 0

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.records)

    @property
    def compile_seconds(self) -> float:
        return sum(r.lower_seconds + r.compile_seconds for r in self.records)

    def reasons(self) -> list[tuple[MissReason, int]]:
        """Each distinct reason of its retraces, with how often it came up, first seen first."""
        counted: dict[MissReason, int] = {}
        for record in self.records:
            for reason in record.reasons:
                counted[reason] = counted.get(reason, 0) + 1
        return list(counted.items())

    def misses(self) -> list[CompileRecord]:
        return [r for r in self.records if r.is_miss]


@dataclass(frozen=True)
class CompileTotals:
    traces: int
    compiles: int
    retraces: int
    seconds: float
    functions: int
    recompiles: int = 0  # compiled again without a new trace

    def again(self) -> str:
        """`traced again N times` (and `, compiled again M times without a new trace`)."""
        said = f"traced again {_times(self.retraces)}"
        if self.recompiles:
            said += f", compiled again {_times(self.recompiles)} without a new trace"
        return said


def _times(n: int) -> str:
    return f"{n} time" if n == 1 else f"{n} times"


def compile_groups(session: Session) -> list[CompileGroup]:
    """The session's compiles per function, in order of their first trace."""
    keyed: dict[tuple, list[CompileRecord]] = {}
    folded: dict[tuple, list[CompileRecord]] = {}
    for record in session.compiles:
        if record.key is None:
            folded.setdefault(("internal", _place_key(record.location)), []).append(record)
        else:
            where = record.defined_at if record.defined_at is not None else record.location
            keyed.setdefault((record.function, _place_key(where)), []).append(record)
    groups = [CompileGroup(records[0].function, records[0].location, tuple(records))
              for records in keyed.values()]
    for records in folded.values():
        names = ", ".join(dict.fromkeys(r.function for r in records))
        groups.append(CompileGroup(names, records[0].location, tuple(records), internal=True))
    order = {id(r): i for i, r in enumerate(session.compiles)}
    return sorted(groups, key=lambda g: order[id(g.records[0])])


def compile_totals(groups: Iterable[CompileGroup]) -> CompileTotals:
    groups = list(groups)
    return CompileTotals(sum(g.traces for g in groups), sum(g.compiles for g in groups),
                         sum(g.retraces for g in groups), sum(g.seconds for g in groups),
                         len(groups), sum(g.recompiles for g in groups))


@dataclass(frozen=True)
class CompileChange:
    """One function's compiles in two sessions (matched by name and user line)."""
    function: str
    place: str                # `train.py:41`
    internal: bool
    traces: tuple[int, int]   # in A, in B
    compiles: tuple[int, int]
    retraces: tuple[int, int]
    seconds: tuple[float, float]
    new_reasons: tuple[str, ...] = ()  # why B traced again, where A never did for that reason

    @property
    def changed(self) -> bool:
        return self.traces[0] != self.traces[1] or self.compiles[0] != self.compiles[1]

    @property
    def retraced_more(self) -> bool:
        return self.retraces[1] > self.retraces[0]


def compile_changes(a: Session, b: Session) -> tuple[CompileChange, ...]:
    """Each function's compiles in A and in B, in B's order, then those only in A. Functions
    are matched by name (the n-th of a name in A with the n-th in B), not by line: an edit
    above them moves their lines."""
    groups_a = _by_name(compile_groups(a))
    groups_b = _by_name(compile_groups(b))
    changes = []
    for key, group in [*groups_b.items(), *((k, g) for k, g in groups_a.items()
                                            if k not in groups_b)]:
        old, new = groups_a.get(key), groups_b.get(key)
        seen = {reason for reason, _ in old.reasons()} if old is not None else set()
        fresh = tuple(explain(r) for r, _ in new.reasons() if r not in seen) \
            if new is not None else ()
        changes.append(CompileChange(
            group.function, short_place(group.location), group.internal,
            _both(old, new, "traces"), _both(old, new, "compiles"),
            _both(old, new, "retraces"),
            (old.seconds if old else 0.0, new.seconds if new else 0.0), fresh))
    return tuple(changes)


def _by_name(groups: list[CompileGroup]) -> dict[tuple[str, bool, int], CompileGroup]:
    seen: dict[tuple[str, bool], int] = {}
    found = {}
    for group in groups:
        n = seen[(group.function, group.internal)] = seen.get((group.function, group.internal),
                                                             -1) + 1
        found[(group.function, group.internal, n)] = group
    return found


def _both(old: CompileGroup | None, new: CompileGroup | None, name: str) -> tuple[int, int]:
    return (getattr(old, name) if old else 0, getattr(new, name) if new else 0)


def short_place(location: SourceLocation | None) -> str:
    """`train.py:41`: the file's name and the line."""
    if location is None:
        return "?"
    return f"{location.file.rsplit('/', 1)[-1]}:{location.line}"


def _place_key(location: SourceLocation | None) -> tuple:
    return (location.file, location.line) if location is not None else ()


def reason_lines(group: CompileGroup) -> list[tuple[str, str, int]]:
    """(explanation, fix, count) per distinct reason of the group's retraces; the fix is
    given with the last reason of its kind ("" with the others: said once). None for jits
    JAX ran for jnp or a library: each new shape at the line compiles them, no key says more."""
    if group.internal:
        return []
    reasons = group.reasons()
    last = {reason.kind: i for i, (reason, _) in enumerate(reasons)}
    return [(explain(reason), hint(reason) if last[reason.kind] == i else "", count)
            for i, (reason, count) in enumerate(reasons)]
