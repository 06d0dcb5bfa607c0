"""The navigator pane: a filter line above the list of calls, levels and steps."""
from __future__ import annotations

import itertools

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, Static

from transforms.model import Session, is_decoded

from ...messages import Status
from ...navigation import Outline
from .filter_input import FilterInput
from .step_list import PHASE_MARKS, StepList

# Steps looked at for the legend's marks (a big session's phases repeat).
LEGEND_SCAN = 50_000

# Above this many steps the filter runs on enter only, not on each key.
LIVE_FILTER_STEPS = 20_000


class Navigator(Vertical):
    DEFAULT_CSS = """
    Navigator { width: 40%; min-width: 28; max-width: 70; border-right: vkey $panel-lighten-2; }
    Navigator > StepList { height: 1fr; }
    Navigator > #legend { height: auto; padding: 0 1; color: $text-muted; background: $boost; }
    """

    def __init__(self, outline: Outline, **kwargs) -> None:
        super().__init__(**kwargs)
        self.outline = outline
        self.session = outline.session

    def compose(self) -> ComposeResult:
        yield FilterInput(id="filter")
        yield StepList(self.outline, id="steps")
        legend = legend_text(self.session)
        if legend.plain:
            yield Static(legend, id="legend")

    @property
    def steps(self) -> StepList:
        return self.query_one(StepList)

    def on_input_changed(self, event: Input.Changed) -> None:
        if self.session.step_count <= LIVE_FILTER_STEPS:
            self._apply(event.value)
        event.stop()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._apply(event.value)
        self.steps.focus()

    def _apply(self, text: str) -> None:
        shown = self.steps.set_filter(text)
        note = f"filter {text!r}: {shown:,} steps" if text.strip() else "filter cleared"
        self.post_message(Status(note))


def legend_text(session: Session) -> Text:
    """What the marks in the list mean: the ones this session has."""
    failed = any(call.errors for call in session.calls)
    # NB: only the calls already decoded (all of them, unless the load was lazy): a legend
    # is no reason to decode a big dump.
    steps = (step for call in session.calls if is_decoded(call.steps) for step in call.steps)
    phases = {step.phase for step in itertools.islice(steps, LEGEND_SCAN)}
    text = Text()
    for phase, (mark, meaning) in PHASE_MARKS.items():
        if phase in phases:
            text.append(f"{mark} ", style="bold")
            text.append(f"{meaning}  ")
    if failed:
        text.append("✗ ", style="bold red")
        text.append("failed")
    return text
