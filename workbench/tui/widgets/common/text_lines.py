"""TextLines: plain lines of text in a LineList (a story, what a program printed), searchable.

Long lines wrap at the view's width (a printed message is read, not scanned
sideways); the wrapping is redone when the view is resized.
"""
from __future__ import annotations

import textwrap
from typing import Collection

from rich.text import Text

from .line_list import LineList


class TextLines(LineList):
    """Lines shown as they are (control characters made visible), drawn on demand."""

    DEFAULT_CSS = """
    TextLines { padding: 0 1; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.source: list[tuple[str, bool]] = []  # (line, is a heading)
        self.lines: list[str] = []
        self._headings: set[int] = set()
        self._empty = ""
        self._wrapped_at = 0

    def set_lines(self, lines: list[str], empty: str = "", headings: Collection[int] = ()
                  ) -> None:
        """`headings`: positions in `lines` drawn bold (the sections of a story)."""
        self.source = [(self.one_line(line), i in headings) for i, line in enumerate(lines)]
        self._empty = empty
        self._wrap()

    def _wrap(self) -> None:
        width = max(self.scrollable_content_region.width, 20)
        self._wrapped_at = width
        self.lines, self._headings = [], set()
        for line, heading in self.source:
            if heading:
                self._headings.add(len(self.lines))
            self.lines += textwrap.wrap(line, width, drop_whitespace=True,
                                        replace_whitespace=False) or [""]
        count = len(self.lines) or (1 if self._empty else 0)
        self.set_rows(count, width=max(map(len, self.lines), default=len(self._empty)), cursor=0)

    def on_resize(self) -> None:
        if self.source and self.scrollable_content_region.width != self._wrapped_at:
            self._wrap()

    def row_text(self, row: int) -> Text:
        if not self.lines:
            return Text(self._empty, style=self.dim_style())
        return Text(self.lines[row], no_wrap=True, style="bold" if row in self._headings else "")

    def search_rows(self, query: str) -> list[int]:
        q = query.lower()
        return [i for i, line in enumerate(self.lines) if q in line.lower()]
