"""What the TUI shows, as plain data: the navigator's rows, filters, search, step <-> equation.

Nothing here imports Textual, so it is cheap to test and to benchmark. Rows are
packed ints in an `array` (8 bytes a row), so a session of 100,000 steps costs
under a megabyte of navigator state, and nothing is built per row until a row
is drawn.
"""
from __future__ import annotations

import functools
import os
import re
from array import array
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from transforms.record import Call, Level, LevelRow, Session, SourceLocation, Stage, Step, level_rows

CALL, LEVEL, STEP = 0, 1, 2
_CALL_BITS = 16  # up to 65,536 calls per session


def pack(kind: int, call: int, index: int) -> int:
    return (index << (_CALL_BITS + 2)) | (call << 2) | kind


def unpack(code: int) -> tuple[int, int, int]:
    """(kind, call, index): index is a position in call.levels (LEVEL) or call.steps (STEP)."""
    return code & 3, (code >> 2) & ((1 << _CALL_BITS) - 1), code >> (_CALL_BITS + 2)


# --- levels and steps of a call ----------------------------------------------------

class CallIndex:
    """Per-call lookups built once, on first use: levels in tree order, steps per level."""

    def __init__(self, call: Call):
        self.call = call
        self.level_by_index: dict[int, Level] = {}
        for lv in call.levels:
            self.level_by_index.setdefault(lv.index, lv)
        # Positions in call.levels, parents first, and each level's depth by parent.
        every = level_rows(call, range(len(call.levels)))
        self.order = [row.position for row in every]
        self.depth = {row.position: row.depth for row in every}
        self.depth_of_level = {call.levels[row.position].index: row.depth for row in every}
        self.runs: dict[int, LevelRow] = {}  # the first level of a run of identical levels
        by_level: dict[int, array] = {}
        for pos, step in enumerate(call.steps):
            level = step.level if isinstance(step.level, int) else -1
            if level not in self.level_by_index:
                level = -1
            steps = by_level.get(level)
            if steps is None:
                steps = by_level[level] = array("q")
            steps.append(pos)
        self.steps_by_level = by_level
        self.failing = failing_steps(call)
        self._caused: dict[int, list[int]] | None = None
        self._occurrences: dict[int, dict[tuple, list[int]]] = {}

    def level_rows(self, expanded: set[int]) -> list[LevelRow]:
        """The navigator's level rows: runs of identical levels folded unless expanded."""
        rows = level_rows(self.call, expanded)
        self.runs.update((row.position, row) for row in rows if row.repeats > 1)
        return rows

    def label(self, level: int | None) -> str:
        lv = self.level_by_index.get(level) if isinstance(level, int) else None
        return lv.label if lv is not None else f"level {level}"

    def caused_by(self, step_index: int) -> list[int]:
        """Positions of the steps whose `cause` is this step (what outer levels made of it)."""
        if self._caused is None:
            caused: dict[int, list[int]] = {}
            for pos, step in enumerate(self.call.steps):
                if isinstance(step.cause, int):
                    caused.setdefault(step.cause, []).append(pos)
            self._caused = caused
        return self._caused.get(step_index, [])

    def step_position(self, step_index: int | None) -> int | None:
        """Position in call.steps of the step with this index (recorded indices are positions)."""
        steps = self.call.steps
        if not isinstance(step_index, int):
            return None
        if 0 <= step_index < len(steps) and steps[step_index].index == step_index:
            return step_index
        for pos, step in enumerate(steps):
            if step.index == step_index:
                return pos
        return None

    def occurrences(self, level: int) -> dict[tuple, list[int]]:
        """Steps at one level grouped by (primitive, file, line), in order: for step <-> eqn."""
        found = self._occurrences.get(level)
        if found is None:
            found = {}
            for pos in self.steps_by_level.get(level, ()):
                key = step_key(self.call.steps[pos])
                if key is not None:
                    found.setdefault(key, []).append(pos)
            self._occurrences[level] = found
        return found


def _grouped_by_line(items, key_of) -> dict[tuple, list[int]]:
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


def failing_steps(call: Call) -> set[int]:
    out = {s.index for s in call.steps if s.kind == "error" or s.error}
    out.update(e.step for e in call.errors if isinstance(e.step, int))
    return out


# --- the navigator's rows ---------------------------------------------------------

@dataclass(frozen=True)
class StepFilter:
    """`p:sin l:grad#2 is:error some text`: every term must match."""
    primitives: tuple[str, ...] = ()
    levels: tuple[str, ...] = ()
    words: tuple[str, ...] = ()
    errors_only: bool = False

    @classmethod
    def parse(cls, text: str) -> StepFilter:
        prims, levels, words, errors = [], [], [], False
        for term in text.lower().split():
            key, _, value = term.partition(":")
            if value and key in ("p", "prim", "primitive"):
                prims.append(value)
            elif value and key in ("l", "level"):
                levels.append(value)
            elif term in ("is:error", "is:failed", "!"):
                errors = True
            else:
                words.append(term)
        return cls(tuple(prims), tuple(levels), tuple(words), errors)

    @property
    def empty(self) -> bool:
        return not (self.primitives or self.levels or self.words or self.errors_only)

    def matches(self, step: Step, label: str, failing: bool) -> bool:
        if self.errors_only and not failing:
            return False
        if self.primitives:
            title = step_title(step).lower()
            if not any(p in title for p in self.primitives):
                return False
        if self.levels:
            lab = label.lower()
            if not all(lv in lab for lv in self.levels):
                return False
        if self.words:
            hay = step_haystack(step, label)
            if not all(w in hay for w in self.words):
                return False
        return True


class Outline:
    """The navigator's rows: calls -> levels -> steps, with folding and a filter."""

    def __init__(self, session: Session):
        self.session = session
        self._index: dict[int, CallIndex] = {}
        self.collapsed: set[tuple[int, int]] = set()  # (call, level position) or (call, -1)
        # (call, first level position) of runs of identical levels listed level by level
        self.expanded_runs: set[tuple[int, int]] = set()
        self.filter = StepFilter()
        self.rows = array("q")
        self._failing_codes: set[int] | None = None
        self.rebuild()

    def index(self, call: int) -> CallIndex:
        found = self._index.get(call)
        if found is None:
            found = self._index[call] = CallIndex(self.session.calls[call])
        return found

    def rebuild(self) -> None:
        rows = array("q")
        f = self.filter
        for c, call in enumerate(self.session.calls[:1 << _CALL_BITS]):
            idx = self.index(c)
            rows.append(pack(CALL, c, 0))
            if (c, -1) in self.collapsed:
                continue
            expanded = {pos for c2, pos in self.expanded_runs if c2 == c}
            groups = [(row.position, call.levels[row.position].index)
                      for row in idx.level_rows(expanded)]
            if -1 in idx.steps_by_level:
                groups.append((len(call.levels), -1))
            for pos, level in groups:
                steps = idx.steps_by_level.get(level, array("q"))
                if not f.empty:
                    label = idx.label(level)
                    steps = array("q", (p for p in steps if f.matches(
                        call.steps[p], label, call.steps[p].index in idx.failing)))
                    if not steps:
                        continue
                rows.append(pack(LEVEL, c, pos))
                if (c, pos) in self.collapsed:
                    continue
                shift = _CALL_BITS + 2
                base = (c << 2) | STEP
                rows.extend((p << shift) | base for p in steps)
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def row(self, i: int) -> tuple[int, int, int]:
        return unpack(self.rows[i])

    def level_of_row(self, kind: int, call: int, index: int) -> Level | None:
        levels = self.session.calls[call].levels
        return levels[index] if kind == LEVEL and 0 <= index < len(levels) else None

    def toggle(self, i: int, expand: bool | None = None) -> int:
        """Fold or unfold the call or level on row i; returns the row the cursor should take."""
        kind, call, index = self.row(i)
        key = (call, -1) if kind == CALL else (call, index) if kind == LEVEL else None
        if key is None:
            return i
        if kind == LEVEL and index in self.index(call).runs:
            # A run of identical levels: toggling lists its levels, or folds them again.
            want_expanded = (key not in self.expanded_runs) if expand is None else expand
            if want_expanded == (key in self.expanded_runs):
                return i
            (self.expanded_runs.add if want_expanded else self.expanded_runs.discard)(key)
            code = self.rows[i]
            self.rebuild()
            return self.find(code, i)
        want_collapsed = (key not in self.collapsed) if expand is None else not expand
        if want_collapsed == (key in self.collapsed):
            return i
        (self.collapsed.add if want_collapsed else self.collapsed.discard)(key)
        code = self.rows[i]
        self.rebuild()
        return self.find(code, i)

    def find(self, code: int, near: int = 0) -> int:
        """The row holding `code`, searching outwards from `near`; `near` clipped if gone."""
        rows, n = self.rows, len(self.rows)
        if n == 0:
            return 0
        near = min(max(near, 0), n - 1)
        for d in range(n):
            for j in (near - d, near + d):
                if 0 <= j < n and rows[j] == code:
                    return j
            if d > near and near + d >= n:
                break
        return near

    def row_of_step(self, call: int, step_pos: int) -> int | None:
        """The row of a step, unfolding its call and level (and clearing a filter that hides it)."""
        target = pack(STEP, call, step_pos)
        idx = self.index(call)
        step = self.session.calls[call].steps[step_pos]
        level_pos = next((p for p in idx.order if self.session.calls[call].levels[p].index ==
                          step.level), len(self.session.calls[call].levels))
        changed = False
        for key in ((call, -1), (call, level_pos)):
            if key in self.collapsed:
                self.collapsed.discard(key)
                changed = True
        if changed:
            self.rebuild()
        for j, code in enumerate(self.rows):
            if code == target:
                return j
        runs = {(call, pos) for pos in idx.runs} - self.expanded_runs
        if runs:  # inside a folded run of identical levels: list them
            self.expanded_runs |= runs
            self.rebuild()
            for j, code in enumerate(self.rows):
                if code == target:
                    return j
        if not self.filter.empty:
            self.filter = StepFilter()
            self.rebuild()
            for j, code in enumerate(self.rows):
                if code == target:
                    return j
        return None

    def failing_codes(self) -> set[int]:
        """The packed rows of every failing step of the session."""
        if self._failing_codes is None:
            codes: set[int] = set()
            for c, call in enumerate(self.session.calls[:1 << _CALL_BITS]):
                failing = self.index(c).failing
                if failing:
                    codes.update(pack(STEP, c, pos) for pos, s in enumerate(call.steps)
                                 if s.index in failing)
            self._failing_codes = codes
        return self._failing_codes

    def parent_row(self, i: int) -> int:
        kind = self.row(i)[0]
        want = {STEP: LEVEL, LEVEL: CALL}.get(kind)
        if want is None:
            return i
        for j in range(i - 1, -1, -1):
            if self.rows[j] & 3 == want:
                return j
        return i

    def search(self, query: str) -> list[int]:
        """Rows whose step (or call, or level) text holds `query`, case-insensitive."""
        q = query.lower()
        if not q:
            return []
        out = []
        calls = self.session.calls
        for j, code in enumerate(self.rows):
            kind, c, index = unpack(code)
            call = calls[c]
            if kind == STEP:
                step = call.steps[index]
                hay = step_haystack(step, self.index(c).label(step.level))
            elif kind == LEVEL:
                lv = call.levels[index] if index < len(call.levels) else None
                hay = f"{lv.label} {lv.kind} {lv.trace_type}".lower() if lv else ""
            else:
                hay = f"{call.transform}({call.function})".lower()
            if q in hay:
                out.append(j)
        return out


# --- step texts ---------------------------------------------------------------------

def step_title(step: Step) -> str:
    try:
        return step.title
    except Exception:  # odd params (not pairs of text): fall back to the primitive
        return str(step.primitive)


def step_haystack(step: Step, label: str = "") -> str:
    """What text search and filters look in, lower-cased."""
    parts = [step_title(step), step.kind, step.phase, label, step.name_stack or ""]
    for pair in step.params or ():
        parts.extend(str(x) for x in pair)
    if step.source is not None:
        parts.append(f"{step.source.file}:{step.source.line} {step.source.function}")
    if step.error:
        parts.append(step.error)
    return " ".join(map(str, parts)).lower()


# --- step <-> equation ------------------------------------------------------------

def step_key(step: Step) -> tuple | None:
    """(primitive as it appears in a staged jaxpr, file, line), or None when there is no line."""
    src = step.source
    if src is None:
        return None
    prim = step.primitive
    # A jnp wrapper (`jit[name=sin]`, inline) stages as its body; its last
    # equation is the one that produces the value.
    if prim in ("jit", "pjit") and step.subjaxprs and step.subjaxprs[0].primitives:
        if any(k == "inline" and v == "True" for k, v in step.params or ()):
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
            self._by_key = _grouped_by_line(
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


def default_stage_pair(stages: Sequence[Stage]) -> tuple[int, int]:
    """Before and after: the user's function and the call's whole transformed program."""
    if not stages:
        return 0, 0
    jaxprs = [i for i, s in enumerate(stages) if s.jaxpr is not None]
    left = jaxprs[0] if jaxprs else 0
    transformed = [i for i in jaxprs if stages[i].role == "transformed"]
    right = transformed[-1] if transformed else (jaxprs[-1] if jaxprs else len(stages) - 1)
    return left, right


# --- source lines -------------------------------------------------------------------

MAX_SOURCE_BYTES = 4_000_000


@functools.lru_cache(maxsize=64)
def _file_lines(path: str) -> tuple[str, ...] | None:
    """A source file's lines, read once per session of the TUI (steps share a few files)."""
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > MAX_SOURCE_BYTES:
            return None
        with open(path, encoding="utf-8", errors="replace") as f:
            return tuple(f.read().split("\n"))
    except (OSError, ValueError):
        return None


def source_context(src: SourceLocation | None, context: int = 2) -> tuple[int, list[str]] | None:
    """(first line number, lines) around a source line, read safely; None if it cannot be read."""
    if src is None or not isinstance(src.line, int) or src.line < 1:
        return None
    lines = _file_lines(src.file) if isinstance(src.file, str) else None
    if lines is None or src.line > len(lines):
        return None
    first = max(1, src.line - context)
    last = min(len(lines), src.line + context)
    return first, [ln.expandtabs(4) for ln in lines[first - 1:last]]


# --- sessions -----------------------------------------------------------------------

Gallery = list[tuple[str, Session]]


def as_gallery(sessions: object, title: str | None = None) -> Gallery:
    """One Session, a list of Sessions, or a list of (title, Session) pairs -> pairs."""
    if isinstance(sessions, Session):
        return [(title or "session", sessions)]
    out: Gallery = []
    items: Iterable[Any] = sessions  # type: ignore[assignment]  # a list, as documented
    for i, item in enumerate(items):
        if isinstance(item, Session):
            out.append((f"session {i}", item))
        elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], Session):
            out.append((str(item[0]), item[1]))
        else:
            raise TypeError(f"expected a Session or (title, Session) pairs, got {type(item).__name__}")
    if not out:
        raise ValueError("no session to show: the gallery is empty")
    return out


def session_summary(session: Session) -> str:
    failed = sum(1 for c in session.calls if c.errors)
    text = f"{len(session.calls)} calls, {session.step_count:,} steps"
    return text + (f", {failed} failed" if failed else "")


def sanitize(text: object, limit: int = 4000) -> str:
    """One line of display text: control characters shown as `?`, long text cut."""
    s = str(text)
    if len(s) > limit:
        s = s[:limit] + "…"
    return _CONTROL.sub("?", s)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def first_line(text: object) -> str:
    return sanitize(str(text).split("\n", 1)[0])

