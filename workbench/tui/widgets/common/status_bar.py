"""One line of feedback: matches found, files written, what is unavailable."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ...._safe_text import terminal


class StatusBar(Static):
    DEFAULT_CSS = """
    StatusBar { height: 1; padding: 0 1; background: $panel; color: $text-muted; }
    """

    def say(self, text: str, error: bool = False) -> None:
        # One row, whatever it says: no layout pass (a search's or a match's note would
        # otherwise lay the whole screen out again).
        self.update(Text(terminal(text.replace("\n", " "), 500),
                         style="bold red" if error else "", no_wrap=True, overflow="ellipsis"),
                    layout=False)
