"""The views' tabs as one drawn line: `1 Step  2 Stages  3 Pytree  4 Failure`.

Textual's TabbedContent switches a pane through several messages, each drawn
as its own frame, so a number key took four or five frames to settle. The
screen switches its PaneStack itself in one step, and this line marks the tab
of the screen's view (`active`, bound to it); a click on a tab posts ViewChosen.
"""
from __future__ import annotations

from rich.text import Text
from textual import events
from textual.reactive import var
from textual.widgets import Static

from ...messages import ViewChosen


class TabLine(Static):
    """Tab labels in one row and, under it, a rule marking the active one."""

    DEFAULT_CSS = """
    TabLine { height: 2; padding: 0 1; }
    """

    active: var[str] = var("", init=False)  # the view whose tab is marked

    def __init__(self, tabs: list[tuple[str, str]], active: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.tabs = dict(tabs)   # view -> label, in order
        self.set_reactive(TabLine.active, active)
        self._columns: list[tuple[int, int, str]] = []

    def on_mount(self) -> None:
        self._draw()

    def watch_active(self, old: str, new: str) -> None:
        # NB: a bound reactive is set (and watched) even to the value it has.
        if new != old and self.is_mounted:
            self._draw()

    def set_label(self, view: str, label: str) -> None:
        if self.tabs.get(view) != label:
            self.tabs[view] = label
            self._draw()

    def _draw(self) -> None:
        accent = self.app.theme_variables.get("accent", "yellow")
        labels, rule, self._columns = Text(no_wrap=True), Text(no_wrap=True), []
        for view, label in self.tabs.items():
            start = len(labels)
            on = view == self.active
            labels.append(f" {label} ", style="bold" if on else "dim")
            rule.append(("━" if on else "─") * (len(labels) - start),
                        style=accent if on else "dim")
            self._columns.append((start, len(labels), view))
            labels.append(" ")
            rule.append("─", style="dim")
        self.update(labels + Text("\n") + rule, layout=False)  # always two rows

    def on_click(self, event: events.Click) -> None:
        x = event.x - self.gutter.left
        for start, end, view in self._columns:
            if start <= x < end:
                event.stop()
                self.post_message(ViewChosen(view))
                return
