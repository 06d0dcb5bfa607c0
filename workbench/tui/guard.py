"""Renderers never take the TUI down: build and draw each one inside a guard.

Building a renderable can fail (`safe` catches that), and so can drawing it,
later, when Textual lays the widget out (a Table cell parsed as markup, an odd
value deep in a record). `Guarded` draws its renderable eagerly inside a try
and shows `<render-error ...>` in its place if that fails.
"""
from __future__ import annotations

from typing import Callable

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.text import Text

from .. import _safe_text as safe_text


def _placeholder(what: str, error: Exception) -> Text:
    return Text(f"<render-error {what}: {type(error).__name__}: {error}>", style="red")


class Guarded:
    """A renderable drawn inside a try: on failure, a one-line placeholder instead."""

    def __init__(self, renderable: RenderableType, what: str):
        self.renderable = renderable
        self.what = what
        # Textual draws a Static's content twice per update, to find its height and
        # then at that height: draw once, at full length, and cut it to the height.
        self._drawn: tuple[tuple, list] | None = None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        key = (options.max_width, options.min_width, options.justify, options.overflow,
               options.no_wrap, options.highlight, options.markup, options.size)
        if self._drawn is not None and self._drawn[0] == key:
            lines = self._drawn[1]
        else:
            try:
                lines = console.render_lines(self.renderable, options.update(height=None),
                                             pad=False, new_lines=False)
            except Exception as e:  # a renderer never takes the UI down with it
                yield _placeholder(self.what, e)
                return
            lines = [_safe_line(line) for line in lines]
            self._drawn = (key, lines)
        if options.height is not None:
            lines = lines[:options.height]
        # Every line ends in a newline, the last one too: Textual counts newlines to find
        # the height, and a renderable after this one in a Group starts on a line of its own.
        newline = Segment.line()
        for line in lines:
            yield from line
            yield newline

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        try:
            return Measurement.get(console, options, self.renderable)
        except Exception:  # drawing will show the placeholder
            return Measurement(1, options.max_width)


def _safe_line(line: list[Segment]) -> list[Segment]:
    """The last net under every pane: no segment reaches the terminal with a control
    sequence, a bidi mark or a lone surrogate in it, whatever a renderer forgot
    (workbench/_safe_text.py; renderers escape their text before layout, so this
    almost never changes anything)."""
    if not any(safe_text.has_unsafe(seg.text) for seg in line):
        return line
    return [Segment(safe_text.terminal(seg.text, len(seg.text)), seg.style, seg.control)
            if safe_text.has_unsafe(seg.text) else seg for seg in line]


def guarded(build: Callable[[], RenderableType], what: str) -> Guarded:
    """Build a renderable and guard its drawing; a failure to build is shown the same way."""
    try:
        renderable = build()
    except Exception as e:  # a renderer never takes the UI down with it
        renderable = _placeholder(what, e)
    return Guarded(renderable, what)
