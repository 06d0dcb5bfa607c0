"""The views stacked in one place, one visible: switching only changes visibility.

With ContentSwitcher a view is `display: none` while hidden, so showing it lays
it out from nothing: its size, then its scrollbars appearing, then their corner,
each a frame of its own (the first switch to a 16,000-line stages view took
four frames). Here every view is laid out all along, each on its own layer, and
a hidden one is `visibility: hidden`: not drawn, not focusable, not clickable,
but already the right size when shown.
"""
from __future__ import annotations

from textual.containers import Container


class PaneStack(Container):
    """Children on layers of their own, all filling this container; `current` is the id shown."""

    DEFAULT_CSS = """
    PaneStack { height: 1fr; }
    PaneStack > * { width: 1fr; height: 1fr; }
    """

    def __init__(self, *children, initial: str, **kwargs) -> None:
        super().__init__(*children, **kwargs)
        self._current = initial

    def on_mount(self) -> None:
        layers = tuple(f"pane-{i}" for i in range(len(self.children)))
        self.styles.layers = layers  # type: ignore[assignment]  # Textual takes any number
        for layer, child in zip(layers, self.children):
            child.styles.layer = layer
        # The first layout sizes every view (a hidden one is not sized), with the initial
        # view on top; the others are hidden once that is done.
        self.children[-1].styles.layer, self._initial_child().styles.layer = (
            self._initial_child().styles.layer, layers[-1])
        self.call_after_refresh(lambda: self._show(self._current))  # current by then

    def _initial_child(self):
        return next((c for c in self.children if c.id == self._current), self.children[-1])

    @property
    def current(self) -> str:
        return self._current

    @current.setter
    def current(self, pane_id: str) -> None:
        if pane_id != self._current:
            self._current = pane_id
            self._show(pane_id)

    def _show(self, pane_id: str) -> None:
        for child in self.children:
            child.styles.visibility = "visible" if child.id == pane_id else "hidden"
            if child.id == pane_id:
                # Its widgets inherit visibility at the next style update; update them now,
                # so they can take focus at once.
                self.app.stylesheet.update_nodes(child.walk_children(with_self=True),
                                                 animate=False)
