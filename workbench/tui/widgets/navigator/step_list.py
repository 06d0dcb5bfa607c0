"""The navigator's list: calls -> levels -> steps, folded and filtered, drawn row by row."""
from __future__ import annotations

from rich.text import Text
from textual.binding import Binding

from ....analysis import UNKNOWN_LEVEL, level_title
from ...messages import StepSelected
from ...navigation import (
    BODY,
    CALL,
    GROUP,
    KIND_MASK,
    LEVEL,
    STEP,
    Outline,
    StepFilter,
    body_place,
    body_text,
    plural,
    step_label,
)
from ..common.line_list import LineList

# A step's phase, marked after its primitive; the navigator's legend explains each mark.
PHASE_MARKS = {"backward": ("←", "backward pass (transpose)"),
               "rule": ("ʳ", "inside a custom_jvp/custom_vjp rule")}

# Sessions with this many steps index them for search in the background (idle slices).
PREPARE_SEARCH_STEPS = 20_000


class StepList(LineList):
    """Every call, level and step of a session; `enter` folds, `x` jumps to a failure."""

    BINDINGS = [
        Binding("right,l", "fold(True)", "Unfold", show=False),
        Binding("left,h", "fold_or_parent", "Fold", show=False),
        Binding("space", "fold(None)", "Fold/unfold", show=False),
        Binding("x", "next_failure(1)", "Next failure"),
        Binding("X", "next_failure(-1)", "Previous failure", show=False),
    ]
    DEFAULT_CSS = """
    StepList { scrollbar-size-vertical: 1; }
    StepList > .step-list--call { text-style: bold; }
    StepList > .step-list--level { color: $accent; }
    StepList > .step-list--group { color: $secondary; }
    StepList > .step-list--fail { color: $error; text-style: bold; }
    """
    COMPONENT_CLASSES = LineList.COMPONENT_CLASSES | {
        "step-list--call", "step-list--level", "step-list--group", "step-list--fail"}

    def __init__(self, outline: Outline, **kwargs) -> None:
        super().__init__(**kwargs)
        self.outline = outline

    def on_mount(self) -> None:
        self.set_rows(len(self.outline), cursor=self._first_step_row())
        if self.outline.session.step_count >= PREPARE_SEARCH_STEPS:
            # Index the steps for search in idle slices of a few ms, so the first `/` on a
            # big session does not pay for it.
            self._preparing = self.set_interval(0.02, self._prepare_search)

    def _prepare_search(self) -> None:
        if self.outline.prepare_search():
            self._preparing.stop()

    def _first_step_row(self) -> int:
        for i in range(min(len(self.outline), 64)):
            if self.outline.row(i)[0] == STEP:
                return i
        return 0

    # --- rows --------------------------------------------------------------------

    def row_text(self, row: int) -> Text:
        kind, c, index = self.outline.row(row)
        call = self.outline.session.calls[c]
        if kind == CALL:  # NB: no index: a folded call of a lazy load stays undecoded
            folded = (c, -1) in self.outline.collapsed
            mark = Text("✗ ", style=self._style("fail")) if call.errors else Text("  ")
            text = Text.assemble("▸ " if folded else "▾ ", mark,
                                 (self.one_line(self.outline.call_label(c)), self._style("call")),
                                 (f"  {plural(len(call.steps), 'step')}", self.dim_style()))
            return text
        idx = self.outline.index(c)
        if kind == LEVEL:
            if index < len(call.levels):
                lv = call.levels[index]
                depth, label = idx.depth.get(index, 0), level_title(call, lv)
                count = len(idx.steps_by_level.get(lv.index, ()))
            else:
                unknown = idx.steps_by_level.get(UNKNOWN_LEVEL, ())
                depth, label, count = 0, "(steps at unknown levels)", len(unknown)
            folded = (c, index) in self.outline.collapsed
            pad = "  " * (1 + min(max(depth, 0), 12))
            run = idx.runs.get(index)
            repeats = ""
            if run is not None:  # a run of identical levels: how many, listed or not
                repeats = f"  ×{run.repeats}" + ("" if (c, index) in self.outline.expanded_runs
                                               else " identical levels")
            return Text.assemble(pad, "▸ " if folded else "▾ ",
                                 (self.one_line(label), self._style("level")),
                                 (f"  {count}{repeats}", self.dim_style()))
        pos = body_place(index)[0] if kind == BODY else index
        step = call.steps[pos]
        depth = idx.depth_of_level.get(step.level, 0)
        pad = "  " * (2 + min(max(depth, 0), 12))
        if kind == GROUP:  # the steps of a module or named scope: its path, how many
            folded = (c, index) in self.outline.collapsed_groups
            size = self.outline.group_sizes.get((c, index), 0)
            return Text.assemble(pad, "▸ " if folded else "▾ ",
                                 (self.one_line(idx.scope(index)), self._style("group")),
                                 (f"  {size}", self.dim_style()))
        if idx.scope(pos):
            pad += "  "  # under its module's row
        if kind == BODY:  # an equation of a library step's body, under its step
            return Text.assemble(pad, " " * 9, (self.one_line(body_text(idx, index)),
                                                  self.dim_style()))
        failing = step.index in idx.failing
        text = Text(pad)
        if index in idx.bodies() and not failing:  # a library step whose body unfolds
            text.append("▸ " if self.outline.is_folded(row) else "▾ ", style=self.dim_style())
        else:
            text.append("✗ " if failing else "  ", style=self._style("fail"))
        text.append(f"{step.index:>4} ", style=self.dim_style())
        text.append(self.one_line(step_label(step)),
                    style=self._style("fail") if failing else "")
        phase = PHASE_MARKS.get(step.phase)
        if phase:
            text.append(f" {phase[0]}", style=self.dim_style())
        outs = ", ".join(v.aval for v in step.outputs[:2]) if step.outputs else ""
        if outs:
            text.append(f"  → {self.one_line(outs)}", style=self.dim_style())
        return text

    def _style(self, name: str):
        return self.get_component_rich_style(f"step-list--{name}", partial=True)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "next_failure":  # offered only where something failed
            return bool(self.outline.failing_codes())
        return True

    def search_rows(self, query: str) -> list[int]:
        code = self.outline.rows[self.cursor] if self.row_count else None
        if self.outline.unfold_bodies_holding(query):  # the match shown, under its step
            cursor = self.outline.find(code, self.cursor) if code is not None else 0
            self.set_rows(len(self.outline), cursor=cursor)
        return self.outline.search(query)

    # --- selection -------------------------------------------------------------

    def watch_cursor(self, old: int, new: int) -> None:
        super().watch_cursor(old, new)
        if not len(self.outline):
            return
        self.post_message(StepSelected(*self._step_of(new)))

    def current(self) -> tuple[int, int | None]:
        """(call, step position or None) under the cursor."""
        if not len(self.outline):
            return 0, None
        return self._step_of(self.cursor)

    def _step_of(self, row: int) -> tuple[int, int | None]:
        """(call, step position or None) of a row: a body's equation is its step's."""
        kind, c, index = self.outline.row(row)
        if kind == BODY:
            return c, body_place(index)[0]
        return c, index if kind == STEP else None

    def select_call(self, call: int) -> bool:
        row = self.outline.row_of_call(call)
        if row is None:
            return False
        self.set_rows(len(self.outline), cursor=row)
        self._scroll_to_row(row, center=True)
        return True

    def select_step(self, call: int, step_pos: int) -> bool:
        row = self.outline.row_of_step(call, step_pos)
        if row is None:
            return False
        self.set_rows(len(self.outline), cursor=row)
        self._scroll_to_row(row, center=True)
        return True

    # --- folding and filtering ---------------------------------------------------

    def action_fold(self, expand: bool | None) -> None:
        """expand: True unfolds the call or level on the cursor's row, False folds it,
        None toggles it."""
        if self.row_count:
            cursor = self.outline.toggle(self.cursor, expand)  # before len(): it changes the rows
            self.set_rows(len(self.outline), cursor=cursor)

    def action_fold_or_parent(self) -> None:
        if not self.row_count:
            return
        kind, c, index = self.outline.row(self.cursor)
        folds = kind != BODY and (kind != STEP or index in self.outline.index(c).bodies())
        if not folds or self.outline.is_folded(self.cursor):
            self.set_cursor(self.outline.parent_row(self.cursor))
        else:
            self.action_fold(False)

    def action_choose(self) -> None:
        kind, c, index = self.outline.row(self.cursor) if self.row_count else (BODY, 0, 0)
        if kind in (CALL, LEVEL, GROUP) or (
                kind == STEP and index in self.outline.index(c).bodies()):
            self.action_fold(None)
        else:
            super().action_choose()

    def set_filter(self, text: str) -> int:
        """Show only steps matching `p:PRIM l:LEVEL is:error words`; returns the step rows left."""
        code = self.outline.rows[self.cursor] if self.row_count else None
        self.outline.filter = StepFilter.parse(text)
        self.outline.rebuild()
        cursor = self.outline.find(code, self.cursor) if code is not None else 0
        self.set_rows(len(self.outline), cursor=cursor)
        return sum(1 for code in self.outline.rows if code & KIND_MASK == STEP)

    def action_next_failure(self, direction: int) -> None:
        failing = self.outline.failing_codes()
        rows, n = self.outline.rows, len(self.outline)
        if failing:
            for d in range(1, n + 1):
                j = (self.cursor + direction * d) % n
                if rows[j] in failing:
                    self.set_cursor(j, center=True)
                    return
        self.app.bell()
