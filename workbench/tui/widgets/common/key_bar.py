"""The bottom line of keys: the shown bindings of the focused widget, the screen and the app.

Textual's Footer recomposes a widget per key whenever the bindings change, and
a screen starting up changes them several times (mount, focus, tabs): that
settling took most of the time between the first frame and the first key
answered on a 100,000-step session. This draws the same keys as one line of
text, updated in place; a click on a key runs its action as the Footer does.
"""
from __future__ import annotations

from typing import NamedTuple

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.dom import DOMNode
from textual.widgets import Static

_KEY_NAMES = {"slash": "/", "question_mark": "?", "escape": "esc"}


class KeySpan(NamedTuple):
    start: int                # columns [start, end) of the line
    end: int
    binding: Binding
    node: DOMNode             # where the action runs


def key_text(binding: Binding) -> str:
    key = binding.key_display or binding.key.split(",")[0]
    if key.startswith("ctrl+"):
        key = "^" + key[len("ctrl+"):]
    return _KEY_NAMES.get(key, key)


def key_line(bindings: list[tuple[DOMNode, Binding]], key_style: str,
             palette: bool) -> tuple[Text, list[KeySpan]]:
    """The line, and which columns belong to which binding."""
    line, spans, seen = Text(no_wrap=True, overflow="ellipsis"), [], set()
    for node, binding in bindings:
        if not binding.show or (binding.action, binding.description) in seen:
            continue  # one key per action: `question_mark,f1` shows as `?` only
        seen.add((binding.action, binding.description))
        start = len(line)
        line.append(f" {key_text(binding)} ", style=key_style)
        line.append(f"{binding.description} ")
        spans.append(KeySpan(start, len(line), binding, node))
    if palette:
        line.append("  ^p ", style=key_style)
        line.append("palette")
    return line, spans


class KeyBar(Static):
    """One line listing the keys that work here; a click runs that key's action."""

    DEFAULT_CSS = """
    KeyBar { height: 1; background: $footer-background; color: $footer-description-foreground; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._spans: list[KeySpan] = []

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self._bindings_changed(self.screen)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: object) -> None:
        active = self.screen.active_bindings.values()
        colour = self.app.theme_variables.get("footer-key-foreground", "yellow")
        line, self._spans = key_line([(a.node, a.binding) for a in active if a.enabled],
                                     f"bold {colour}", self.app.ENABLE_COMMAND_PALETTE)
        self.update(line, layout=False)  # one row, whatever the keys: no layout pass

    async def on_click(self, event: events.Click) -> None:
        x = event.x - self.gutter.left
        for span in self._spans:
            if span.start <= x < span.end:
                event.stop()
                await self.app.run_action(span.binding.action, span.node)
                return
