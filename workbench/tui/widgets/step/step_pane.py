"""The step view: one step's primitive and params, its tracers as towers, its source line."""
from __future__ import annotations

import textwrap

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from transforms.model import Call, level_rows

from ....analysis import level_note, level_title, nothing_recorded, step_values
from ....render.step import SourceView, StepView
from ...guard import guarded
from ...navigation import CallIndex, Outline, Selection, composed_label, source_context
from ..common.selection_view import SelectionView


class StepPane(VerticalScroll, SelectionView, can_focus=True):
    """Shows whatever step the navigator is on; bounded work per step, whatever the session size."""

    VIEW = "step"

    DEFAULT_CSS = """
    StepPane { padding: 0 1; }
    StepPane > Static { width: auto; min-width: 100%; }
    """

    def __init__(self, outline: Outline, **kwargs) -> None:
        super().__init__(**kwargs)
        self.outline = outline
        # Made here, not in compose: the navigator may select a step before this pane's
        # children are mounted (a screen pushed while another is settling).
        empty = nothing_recorded(outline.session)  # wrapped: the body is as wide as its text
        first = "\n".join(textwrap.wrap(empty, 72)) if empty else "select a step in the navigator"
        self.body = Static(Text(first, style="dim"), id="step-body")

    def compose(self):
        yield self.body

    def show_selection(self, selection: Selection) -> None:
        c = selection.call
        self.show(self.outline.session.calls[c], self.outline.index(c), selection.step,
                  self.outline.call_label(c))

    def show(self, call: Call, index: CallIndex, step_pos: int | None, label: str = "") -> None:
        body = self.body
        if step_pos is None:
            body.update(guarded(lambda: _call_summary(call, index, label), "call"))
        else:
            body.update(guarded(lambda: _step_view(call, index, step_pos), "step"))
        self.scroll_home(animate=False)


def _step_view(call: Call, index: CallIndex, pos: int) -> StepView:
    step = call.steps[pos]
    labels = {lv.index: lv.label for lv in call.levels}
    cause_pos = index.step_position(step.cause)
    cause = call.steps[cause_pos] if cause_pos is not None else None
    caused = [call.steps[p] for p in index.caused_by(step.index)[:8]]
    source = SourceView(step.source, source_context(step.source, roots=index.source_roots))
    return StepView(step, labels, source, caused=caused, cause=cause,
                    values=step_values(call, step.index), phased=index.phased)


def _call_summary(call: Call, index: CallIndex, label: str = "") -> Text:
    text = Text()
    text.append(f"{label or composed_label(call)}\n", style="bold")
    if call.source is not None:
        text.append(f"called at {call.source}\n", style="dim")
    if call.parent is not None:
        text.append(f"runs the pullback of call #{call.parent} (the forward pass it belongs to)\n",
                    style="dim")
    for key, value in call.options:
        text.append(f"  {key} = {value}\n")
    text.append(f"\n{len(call.levels)} levels, {len(call.steps):,} steps, "
                f"{len(call.stages)} stages\n")
    for row in level_rows(call):  # by parent, identical levels folded: as `workbench show`
        lv = call.levels[row.position]
        count = len(index.steps_by_level.get(lv.index, ()))
        repeats = f"  ×{row.repeats} identical levels" if row.folded else ""
        note = level_note(call, lv)
        text.append(f"{'  ' * min(row.depth, 12)}{level_title(call, lv)}", style="bold")
        text.append(f"  {lv.trace_type}  {count:,} steps{repeats}"
                    f"{f' ({note})' if note else ''}\n", style="dim")
    if call.errors:
        text.append(f"\n✗ {len(call.errors)} error(s): see the failure view (4)\n", style="red")
    return text
