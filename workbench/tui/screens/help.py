"""The help screen: every key, read from the BINDINGS of the app, screens and widgets."""
from __future__ import annotations

from typing import Iterable

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


def _keys(key: str) -> str:
    names = {"slash": "/", "question_mark": "?", "space": "space", "escape": "esc"}
    return ", ".join(names.get(k, k) for k in key.split(","))


def key_sections(app_bindings: Iterable = ()) -> list[tuple[str, list[tuple[str, str]]]]:
    """(section, [(keys, what)]) for every binding the TUI has; `app_bindings`: the running
    app's own (passed in: the app imports this module, not the other way round)."""
    from ..widgets.common.line_list import LineList
    from ..widgets.failure.failure_pane import FailurePane
    from ..widgets.navigator.step_list import PHASE_MARKS, StepList
    from ..widgets.stages.stages_pane import STAGE_KEYS
    from .session import SessionScreen

    def rows(bindings) -> list[tuple[str, str]]:
        out = []
        for b in bindings:
            b = b if isinstance(b, Binding) else Binding(*b)
            out.append((_keys(b.key), b.description or b.action))
        return out

    return [
        ("Everywhere", rows(app_bindings) + [("ctrl+p", "Command palette"),
                                                      ("tab, shift+tab", "Next / previous pane")]),
        ("Session", rows(b for b in SessionScreen.BINDINGS
                                if not (isinstance(b, Binding) and b.action.startswith("stages(")))),
        ("Lists (navigator, stages)", rows(LineList.BINDINGS)),
        ("Navigator", rows(StepList.BINDINGS) + [("enter", "Fold a call or level")]),
        ("Stages view (its keys work wherever the focus is)", rows(STAGE_KEYS) +
         [("enter", "Go to the step that made this equation (stage text focused)")]),
        ("Failure view", rows(FailurePane.BINDINGS)),
        ("Marks in the navigator", [(mark, meaning) for mark, meaning in PHASE_MARKS.values()]
         + [("✗", "a failing step, or a call that failed")]),
        ("Filter syntax", [("p:sin", "primitive contains 'sin'"), ("l:grad#2", "level label"),
                           ("is:error", "failing steps only"), ("words", "anywhere in the step")]),
    ]


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close help")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 76; max-width: 100%; height: 90%; border: round $primary;
                                  background: $surface; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 2))
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column()
        for title, keys in key_sections(self.app.BINDINGS):
            table.add_row(Text(title, style="bold underline"), "")
            for key, what in keys:
                table.add_row(key, what)
            table.add_row("", "")
        with VerticalScroll():
            yield Static(Text("Keys  (escape closes)", style="bold"))
            yield Static(table)

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss()
