"""Messages between the TUI's widgets and screens: small dataclasses, nothing live."""
from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message


@dataclass
class StepSelected(Message):
    """The navigator's cursor is on a step (or on a call or level: step is None)."""
    call: int
    step: int | None  # position in call.steps


@dataclass
class EquationChosen(Message):
    """Enter on an equation of a stage: find the step that made it."""
    call: int
    stage: int
    eqn: int


@dataclass
class CallChosen(Message):
    """Go to a call (its header row in the navigator), keeping the view."""
    call: int


@dataclass
class FailureChosen(Message):
    """Jump to the step where a recorded error happened."""
    call: int
    error: int


@dataclass
class SessionChosen(Message):
    """The picker chose one session of the gallery."""
    index: int


@dataclass
class Status(Message):
    """A one-line note for the status bar."""
    text: str


@dataclass
class ViewChosen(Message):
    """A click on a view's tab: show that view (as its number key would)."""
    view: str
