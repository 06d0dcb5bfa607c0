"""The search line: `/` opens it, enter searches the pane that had focus, escape closes it;
`n`/`N` (the screen's keys) go from match to match in that pane."""
from __future__ import annotations

from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import Input

from ...messages import Status
from .line_list import LineList


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

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.scope: LineList | None = None  # the list searched: the last one opened on
        self._back_to: Widget | None = None  # where the focus goes when the bar closes

    @property
    def is_open(self) -> bool:
        return self.has_class("-open")

    def open(self, scope: LineList, back_to: Widget, where: str) -> None:
        """Search `scope` (`where` names it); closing returns the focus to `back_to`."""
        self.scope, self._back_to = scope, back_to
        self.placeholder = f"search {where} (enter: find, escape: close)"
        self.value = ""
        self.add_class("-open")
        self.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.remove_class("-open")
        scope = self.scope
        if scope is None:
            return
        count = scope.search(event.value)
        scope.focus()
        n = scope.next_match(True) if count else None
        if count and n is not None:
            self.post_message(Status(f"{count:,} matches for {event.value!r}: {n + 1}/{count}"
                                     f"  (n next, N previous)"))
        else:
            self.post_message(Status(f"no match for {event.value!r}"))

    def next_match(self, forward: bool) -> None:
        """Go to the next (or previous) match of the last search."""
        scope = self.scope
        if scope is None or not scope.matches:
            self.post_message(Status("no search yet: press / to search"))
            return
        n = scope.next_match(forward)
        if n is not None:
            self.post_message(Status(f"match {n + 1}/{len(scope.matches)} for "
                                     f"{scope.query_text!r}"))

    def action_close(self) -> None:
        self.remove_class("-open")
        if self._back_to is not None and self._back_to.is_attached:
            self._back_to.focus()
