"""The navigator pane: a filter line above the list of calls, levels and steps."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input

from transforms.record import Session

from ...messages import Status
from .filter_input import FilterInput
from .step_list import StepList

# Above this many steps the filter runs on enter only, not on each key.
LIVE_FILTER_STEPS = 20_000


class Navigator(Vertical):
    DEFAULT_CSS = """
    Navigator { width: 40%; min-width: 28; max-width: 70; border-right: vkey $panel-lighten-2; }
    Navigator > StepList { height: 1fr; }
    """

    def __init__(self, session: Session, **kwargs) -> None:
        super().__init__(**kwargs)
        self.session = session

    def compose(self) -> ComposeResult:
        yield FilterInput(id="filter")
        yield StepList(self.session, id="steps")

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
