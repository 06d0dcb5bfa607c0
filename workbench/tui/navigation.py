"""What the TUI shows, as plain data: the navigator's rows, filters, search, step <-> equation.

Nothing here imports Textual, so it is cheap to test and to benchmark. Rows are
packed ints in an `array` (8 bytes a row), so a session of 100,000 steps costs
under a megabyte of navigator state, and nothing is built per row until a row
is drawn.
"""
from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import NamedTuple

from transforms.model import Call, Level, LevelRow, Session, Step, is_decoded, level_rows

from ..analysis import (
    UNKNOWN_LEVEL,
    ScopeRun,
    failing_steps,
    library_body,
    phased,
    scope_runs,
    step_group,
    steps_by_level,
)

# The TUI's data layer is read through this module; step <-> equation and source lines
# are their own modules, their names re-exported here.
from .source import (
    MAX_SOURCE_BYTES as MAX_SOURCE_BYTES,
    SOURCE_SUFFIXES as SOURCE_SUFFIXES,
    readable_source as readable_source,
    source_context as source_context,
    source_roots as source_roots,
)
from .stage_map import (
    StageMap as StageMap,
    eqn_lines as eqn_lines,
    stage_lines as stage_lines,
    step_primitive as step_primitive,
)
from .step_search import SearchTexts as SearchTexts, StepFilter as StepFilter
from .texts import (
    TRANSFORMATIONS as TRANSFORMATIONS,
    Entries as Entries,
    Gallery as Gallery,
    as_gallery as as_gallery,
    call_labels as call_labels,
    composed_label as composed_label,
    composition as composition,
    dropped_summary as dropped_summary,
    first_line as first_line,
    plural as plural,
    sanitize as sanitize,
    session_description as session_description,
    session_ending as session_ending,
    session_output as session_output,
    session_summary as session_summary,
    step_haystack as step_haystack,
    step_label as step_label,
    step_title as step_title,
)

# GROUP: the steps of a level run in one module or named scope (`MLP/attn`), its index the
# position of its first step. BODY: an equation of the recorded body of a jit of JAX's own
# function (listed under its step, folded by default), its index `body_index`.
CALL, LEVEL, STEP, GROUP, BODY = 0, 1, 2, 3, 4
KIND_MASK = 7  # a row's kind: code & KIND_MASK
_KIND_BITS = 3
_CALL_BITS = 16  # up to 65,536 calls per session
BODY_BITS = 12  # up to 4,096 equations of a body listed; the last row counts the rest
_SHIFT = _CALL_BITS + _KIND_BITS


def pack(kind: int, call: int, index: int) -> int:
    return (index << _SHIFT) | (call << _KIND_BITS) | kind


def unpack(code: int) -> tuple[int, int, int]:
    """(kind, call, index): index is a position in call.levels (LEVEL) or call.steps (STEP)."""
    return code & KIND_MASK, (code >> _KIND_BITS) & ((1 << _CALL_BITS) - 1), code >> _SHIFT


def body_index(step_pos: int, eqn: int) -> int:
    """A BODY row's index: its step's position and the equation's number in the body."""
    return (step_pos << BODY_BITS) | eqn


def body_place(index: int) -> tuple[int, int]:
    """(step position, equation number) of a BODY row's index."""
    return index >> BODY_BITS, index & ((1 << BODY_BITS) - 1)


class Selection(NamedTuple):
    """What the navigator's cursor is on: a call, and a step of it (None on a call or level row)."""
    call: int
    step: int | None  # position in call.steps


# --- levels and steps of a call ----------------------------------------------------

# Sessions with more steps open with their calls folded (but the first).
COLLAPSED_OPEN_STEPS = 200_000


class CallIndex:
    """Per-call lookups built once, on first use: levels in tree order, steps per level."""

    def __init__(self, call: Call, source_roots: tuple[str, ...] = ()):
        self.call = call
        self.source_roots = source_roots  # folders the call's source lines may be read from
        self.level_by_index: dict[int, Level] = {}
        for lv in call.levels:
            self.level_by_index.setdefault(lv.index, lv)
        # Positions in call.levels, parents first, and each level's depth by parent.
        # A root level sits at its own depth (jit#1 where eval#0's child would be).
        every = level_rows(call, range(len(call.levels)))
        self.order = [row.position for row in every]
        self.depth: dict[int, int] = {}
        base = 0
        for row in every:
            if row.depth == 0:
                own = call.levels[row.position].depth
                base = own if 0 < own < 64 else 0
            self.depth[row.position] = base + row.depth
        self.depth_of_level = {call.levels[pos].index: d for pos, d in self.depth.items()}
        self.runs: dict[int, LevelRow] = {}  # the first level of a run of identical levels
        self.steps_by_level = steps_by_level(call)
        self.hidden = self._repeated_empty_levels()
        self.failing = failing_steps(call)
        self.phased = phased(call)
        self._caused: dict[int, list[int]] | None = None
        self._texts: SearchTexts | None = None
        self._scope_runs: dict[int, list[ScopeRun] | None] = {}  # level -> its runs
        self._bodies: dict[int, tuple[str, ...]] | None = None

    def bodies(self) -> dict[int, tuple[str, ...]]:
        """The recorded bodies of the call's library steps (`library_body`), by position:
        the steps whose row folds; worked out once."""
        if self._bodies is None:
            self._bodies = {pos: body for pos, step in enumerate(self.call.steps)
                            if step.library and (body := library_body(step))}
        return self._bodies

    def scope_runs(self, level: int) -> list[ScopeRun] | None:
        """A level's steps cut into runs by module or named scope, or None when none of them
        ran in one; worked out once per level."""
        if level not in self._scope_runs:
            steps = self.steps_by_level.get(level, ())
            scoped = any(self.scope(p) for p in steps)
            self._scope_runs[level] = scope_runs(self.call.steps, steps) if scoped else None
        return self._scope_runs[level]

    def scope(self, pos: int) -> str:
        """The module or named scope the step at `pos` ran in (`MLP/attn`), or ""."""
        return step_group(self.call.steps[pos])

    def level_rows(self, expanded: set[int]) -> list[LevelRow]:
        """The navigator's level rows: runs of identical levels folded unless expanded."""
        rows = level_rows(self.call, expanded)
        self.runs.update((row.position, row) for row in rows if row.repeats > 1)
        return rows

    def _repeated_empty_levels(self) -> set[int]:
        """Positions of levels not listed: empty ones whose label another level shares
        (a custom rule traced twice records its level twice); one of them stays."""
        by_label: dict[str, list[int]] = {}
        for pos in self.order:
            by_label.setdefault(str(self.call.levels[pos].label), []).append(pos)
        hidden: set[int] = set()
        for positions in by_label.values():
            if len(positions) < 2:
                continue
            empty = [p for p in positions
                     if not self.steps_by_level.get(self.call.levels[p].index)]
            hidden.update(empty if len(empty) < len(positions) else empty[1:])
        return hidden

    def label(self, level: int | None) -> str:
        lv = self.level_by_index.get(level) if level is not None else None
        return lv.label if lv is not None else f"level {level}"

    def caused_by(self, step_index: int) -> list[int]:
        """Positions of the steps whose `cause` is this step (what outer levels made of it)."""
        if self._caused is None:
            caused: dict[int, list[int]] = {}
            for pos, step in enumerate(self.call.steps):
                if step.cause is not None:
                    caused.setdefault(step.cause, []).append(pos)
            self._caused = caused
        return self._caused.get(step_index, [])

    def step_position(self, step_index: int | None) -> int | None:
        """Position in call.steps of the step with this index (recorded indices are positions)."""
        steps = self.call.steps
        if step_index is None:
            return None
        if 0 <= step_index < len(steps) and steps[step_index].index == step_index:
            return step_index
        for pos, step in enumerate(steps):
            if step.index == step_index:
                return pos
        return None

    def search_texts(self) -> SearchTexts:
        """Each step's search text, made once per distinct text (built when first needed,
        or beforehand in slices: `Outline.prepare_search`)."""
        if self._texts is None:
            self._texts = SearchTexts(self)
        return self._texts

    def step_at(self, step_index: int) -> Step | None:
        """The call's step with that index, or None."""
        pos = self.step_position(step_index)
        return self.call.steps[pos] if pos is not None else None


def _may_fail(call: Call) -> bool:
    """Whether the call may hold a failing step, without decoding steps not decoded yet."""
    return is_decoded(call.steps) or not call.ok or bool(call.errors)


# --- the navigator's rows ---------------------------------------------------------

class Outline:
    """The navigator's rows: calls -> levels -> steps, with folding and a filter."""

    def __init__(self, session: Session):
        self.session = session
        self._index: dict[int, CallIndex] = {}
        self.collapsed: set[tuple[int, int]] = set()  # (call, level position) or (call, -1)
        # (call, position of the first step) of the module groups folded
        self.collapsed_groups: set[tuple[int, int]] = set()
        self.group_sizes: dict[tuple[int, int], int] = {}  # the same key -> its steps listed
        # (call, step position) of library steps whose body is listed (folded by default)
        self.unfolded_bodies: set[tuple[int, int]] = set()
        # (call, first level position) of runs of identical levels listed level by level
        self.expanded_runs: set[tuple[int, int]] = set()
        if session.step_count > COLLAPSED_OPEN_STEPS:
            # A huge session opens with its calls folded but the first: a call's steps are
            # decoded (a lazy load) and indexed only when it is unfolded.
            self.collapsed = {(c, -1) for c in range(1, len(session.calls))}
        self.filter = StepFilter()
        self.rows = array("q")
        self._failing_codes: set[int] | None = None
        self._roots: tuple[str, ...] | None = None
        self._labels: list[str] | None = None
        self.rebuild()

    def call_label(self, call: int) -> str:
        """The call's composed label, told apart from equal ones (`call_labels`)."""
        if self._labels is None:
            self._labels = call_labels(self.session)
        return self._labels[call]

    def index(self, call: int) -> CallIndex:
        found = self._index.get(call)
        if found is None:
            if self._roots is None:  # realpath of every folder on sys.path: once per session
                self._roots = source_roots(self.session)
            found = self._index[call] = CallIndex(self.session.calls[call], self._roots)
        return found

    def rebuild(self) -> None:
        rows = array("q")
        f = self.filter
        for c, call in enumerate(self.session.calls[:1 << _CALL_BITS]):
            rows.append(pack(CALL, c, 0))
            if (c, -1) in self.collapsed:
                continue
            idx = self.index(c)
            bodies = self._listed_bodies(c, idx)
            expanded = {pos for c2, pos in self.expanded_runs if c2 == c}
            groups = [(row.position, call.levels[row.position].index)
                      for row in idx.level_rows(expanded)
                      if row.position not in idx.hidden or row.repeats > 1]
            if UNKNOWN_LEVEL in idx.steps_by_level:
                groups.append((len(call.levels), UNKNOWN_LEVEL))
            for pos, level in groups:
                steps = idx.steps_by_level.get(level, array("q"))
                if not f.empty:
                    label = idx.label(level)
                    steps = array("q", (p for p in steps if f.matches(
                        call.steps[p], label, call.steps[p].index in idx.failing,
                        bodies.get(p, ()))))
                    if not steps:
                        continue
                rows.append(pack(LEVEL, c, pos))
                if (c, pos) in self.collapsed:
                    continue
                self._add_steps(rows, c, idx, level, steps, bodies)
        self.rows = rows

    def _listed_bodies(self, c: int, idx: CallIndex) -> dict[int, tuple[str, ...]]:
        """The library bodies of call `c` to list under their steps: those unfolded, and
        those a `p:` filter matches (unfolded, to show the match)."""
        f = self.filter
        if f.primitives and idx.bodies():
            self.unfolded_bodies.update((c, pos) for pos, body in idx.bodies().items()
                                        if f.matches_body(body))
        if not any(key[0] == c for key in self.unfolded_bodies):
            return {}
        return {pos: body for pos, body in idx.bodies().items() if (c, pos) in self.unfolded_bodies}

    def _add_steps(self, rows: array, c: int, idx: CallIndex, level: int, steps: array,
                   bodies: dict[int, tuple[str, ...]]) -> None:
        """A level's step rows (`steps`, filtered or all); a run of steps in one module or
        named scope under a group row named for it (none when no step of the level ran in one)."""
        runs = idx.scope_runs(level)
        if runs is None:
            _add_step_rows(rows, c, steps, bodies)
            return
        if not self.filter.empty:
            runs = scope_runs(idx.call.steps, steps)
        for run in runs:
            first = run.positions[0]
            if run.scope:
                rows.append(pack(GROUP, c, first))
                self.group_sizes[(c, first)] = len(run.positions)
                if (c, first) in self.collapsed_groups:
                    continue
            _add_step_rows(rows, c, run.positions, bodies)

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
        if kind == GROUP:
            return self._toggle_group(i, (call, index), expand)
        if kind == STEP and index in self.index(call).bodies():
            return self._toggle_body(i, (call, index), expand)
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

    def _toggle_group(self, i: int, key: tuple[int, int], expand: bool | None) -> int:
        want_collapsed = (key not in self.collapsed_groups) if expand is None else not expand
        if want_collapsed == (key in self.collapsed_groups):
            return i
        (self.collapsed_groups.add if want_collapsed else self.collapsed_groups.discard)(key)
        code = self.rows[i]
        self.rebuild()
        return self.find(code, i)

    def _toggle_body(self, i: int, key: tuple[int, int], expand: bool | None) -> int:
        want_listed = (key not in self.unfolded_bodies) if expand is None else expand
        if want_listed == (key in self.unfolded_bodies):
            return i
        (self.unfolded_bodies.add if want_listed else self.unfolded_bodies.discard)(key)
        code = self.rows[i]
        self.rebuild()
        return self.find(code, i)

    def is_folded(self, i: int) -> bool:
        """Whether row i folds something that is not listed now."""
        kind, call, index = self.row(i)
        if kind == GROUP:
            return (call, index) in self.collapsed_groups
        if kind == STEP:
            return index in self.index(call).bodies() and (call, index) not in self.unfolded_bodies
        return ((call, -1) if kind == CALL else (call, index)) in self.collapsed

    def unfold_bodies_holding(self, query: str) -> bool:
        """Unfold the listed library steps whose body has an equation holding `query` (search
        shows the match); whether any was."""
        q = query.lower()
        if not q:
            return False
        found = {(c, pos) for c in self._index for pos, body in self.index(c).bodies().items()
                 if (c, pos) not in self.unfolded_bodies and any(q in p.lower() for p in body)}
        if found:  # only those whose step is listed (the rows of folded levels stay folded)
            listed = set(self.rows)
            found = {(c, pos) for c, pos in found if pack(STEP, c, pos) in listed}
        if found:
            self.unfolded_bodies |= found
            self.rebuild()
        return bool(found)

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

    def row_of_call(self, call: int) -> int | None:
        """The row of a call's header (a filter that hides it cleared)."""
        target = pack(CALL, call, 0)
        for attempt in range(2):
            for j, code in enumerate(self.rows):
                if code == target:
                    return j
            if attempt or self.filter.empty:
                break
            self.filter = StepFilter()
            self.rebuild()
        return None

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
        folded_groups = {key for key in self.collapsed_groups if key[0] == call}
        if folded_groups:  # which group holds it depends on the filter: unfold them all
            self.collapsed_groups -= folded_groups
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
        """The packed rows of every failing step of the session, and of each failed call that
        has none.

        NB: a call a lazy load has not decoded yet is searched only when it failed or
        recorded errors (decoding a million-step dump to find none would take seconds);
        a step error the user's code caught in a call that ended well is found once the
        call has been opened."""
        if self._failing_codes is None:
            codes: set[int] = set()
            for c, call in enumerate(self.session.calls[:1 << _CALL_BITS]):
                if not _may_fail(call):
                    continue
                failing = self.index(c).failing
                if failing:
                    codes.update(pack(STEP, c, pos) for pos, s in enumerate(call.steps)
                                 if s.index in failing)
                elif not call.ok:  # failed with no step to show: its own row (a call the
                    codes.add(pack(CALL, c, 0))  # process died in, a pre-trace failure)
            self._failing_codes = codes
        return self._failing_codes

    def parent_row(self, i: int) -> int:
        kind, call, index = self.row(i)
        want = {STEP: LEVEL, GROUP: LEVEL, LEVEL: CALL, BODY: STEP}.get(kind)
        if want is None:
            return i
        if kind == STEP and self.index(call).scope(index):
            want = GROUP  # a step in a module: its group's row
        for j in range(i - 1, -1, -1):
            if self.rows[j] & KIND_MASK == want:
                return j
        return i

    def prepare_search(self, steps: int = SearchTexts.SLICE) -> bool:
        """Index up to `steps` more steps for search; whether every call is indexed.

        NB: a call whose steps a lazy load has not decoded yet is left for the search
        itself: preparing would decode every call of a huge dump behind the user's back."""
        calls = self.session.calls
        for c in range(min(len(calls), 1 << _CALL_BITS)):
            if c not in self._index and not getattr(calls[c].steps, "decoded", True):
                continue
            texts = self.index(c).search_texts()
            if not texts.done:
                texts.build(steps)
                return False
        return True

    def search(self, query: str) -> list[int]:
        """Rows whose step (or call, or level) text holds `query`, case-insensitive.

        Each distinct step text is tested once (a big session repeats a few hundred
        texts, primitive, params and line, over 100,000 steps); then each step row
        is two array lookups."""
        q = query.lower()
        if not q:
            return []
        rows, calls = self.rows, self.session.calls
        shift, mask = _SHIFT, (1 << _CALL_BITS) - 1
        flags: dict[int, tuple[array, bytes]] = {}
        for c in {(code >> _KIND_BITS) & mask for code in rows if code & KIND_MASK == CALL}:
            texts = self.index(c).search_texts()
            flags[c] = (texts.ids, texts.hits(q))
        out: list[int] = []
        others: list[int] = []  # call and level rows: few, tested one by one
        start = 0
        n = len(rows)
        while start < n:
            # The rows of one call run from its CALL row to the next one.
            c = (rows[start] >> _KIND_BITS) & mask
            end = start + 1
            while end < n and rows[end] & KIND_MASK != CALL:
                end += 1
            ids, hit = flags[c]
            out += [j for j in range(start, end)
                    if (code := rows[j]) & KIND_MASK == STEP and hit[ids[code >> shift]]]
            others += [j for j in range(start, end) if rows[j] & KIND_MASK != STEP]
            start = end
        for j in others:
            kind, c, index = unpack(rows[j])
            call = calls[c]
            if kind == LEVEL:
                lv = call.levels[index] if index < len(call.levels) else None
                hay = f"{lv.label} {lv.kind} {lv.trace_type}".lower() if lv else ""
            elif kind == GROUP:
                hay = self.index(c).scope(index).lower()
            elif kind == BODY:
                hay = body_text(self.index(c), index).lower()
            else:
                hay = self.call_label(c).lower()
            if q in hay:
                out.append(j)
        return sorted(out) if others else out


def _add_step_rows(rows: array, c: int, positions: Sequence[int],
                   bodies: dict[int, tuple[str, ...]]) -> None:
    """The rows of the steps at `positions`, each listed body's equations under its step."""
    base = (c << _KIND_BITS) | STEP
    if not bodies:
        rows.extend((p << _SHIFT) | base for p in positions)
        return
    for p in positions:
        rows.append((p << _SHIFT) | base)
        body = bodies.get(p)
        if body:
            rows.extend(pack(BODY, c, body_index(p, n))
                        for n in range(min(len(body), 1 << BODY_BITS)))


def body_text(idx: CallIndex, index: int) -> str:
    """A BODY row's equation: its primitive (the last listed row counts those not listed)."""
    pos, n = body_place(index)
    body = idx.bodies().get(pos, ())
    if n >= len(body):
        return ""
    more = len(body) - n - 1
    if n == (1 << BODY_BITS) - 1 and more:
        return f"{body[n]} … and {more} more equations"
    return body[n]
