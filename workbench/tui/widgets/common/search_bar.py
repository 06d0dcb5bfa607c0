"""The search line: `/` opens it, enter searches the pane that had focus, escape closes it."""
from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Input


class SearchBar(Input):
    BINDINGS = [Binding("escape", "close", "Close search", show=False)]
    DEFAULT_CSS = """
    SearchBar { border: none; height: 1; padding: 0 1; display: none;
                background: $warning 20%; }
    SearchBar:focus { border: none; }
    SearchBar.-open { display: block; }
    """

    def open(self, where: str) -> None:
        self.placeholder = f"search {where} (enter: find, escape: close)"
        self.value = ""
        self.add_class("-open")
        self.focus()

    def action_close(self) -> None:
        self.remove_class("-open")
        self.screen.focus_previous_pane()  # type: ignore[attr-defined]
