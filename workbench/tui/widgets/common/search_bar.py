"""The search line: `/` opens it, enter searches the pane that had focus, escape closes it."""
from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Input


class SearchBar(Input):
    BINDINGS = [Binding("escape", "close", "Close search", show=False)]
    # NB: over the status line on a layer of its own, shown and hidden by visibility:
    # toggling `display` laid the whole screen out twice per search (open, close).
    DEFAULT_CSS = """
    SearchBar { border: none; height: 1; padding: 0 1; visibility: hidden;
                layer: search; dock: bottom; offset-y: -1; background: $warning 20%; }
    SearchBar:focus { border: none; }
    SearchBar.-open { visibility: visible; }
    """

    def open(self, where: str) -> None:
        self.placeholder = f"search {where} (enter: find, escape: close)"
        self.value = ""
        self.add_class("-open")
        self.focus()

    def action_close(self) -> None:
        self.remove_class("-open")
        self.screen.focus_previous_pane()  # type: ignore[attr-defined]
