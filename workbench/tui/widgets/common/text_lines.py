"""TextLines: plain lines of text in a LineList (what a program printed), searchable."""
from __future__ import annotations

from rich.text import Text

from .line_list import LineList


class TextLines(LineList):
    """Lines shown as they are (control characters made visible), drawn on demand."""

    DEFAULT_CSS = """
    TextLines { padding: 0 1; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.lines: list[str] = []
        self._empty = ""

    def set_lines(self, lines: list[str], empty: str = "") -> None:
        self.lines = [self.one_line(line) for line in lines]
        self._empty = empty
        count = len(self.lines) or (1 if empty else 0)
        self.set_rows(count, width=max(map(len, self.lines), default=len(empty)), cursor=0)

    def row_text(self, row: int) -> Text:
        if not self.lines:
            return Text(self._empty, style=self.dim_style())
        return Text(self.lines[row], no_wrap=True)

    def search_rows(self, query: str) -> list[int]:
        q = query.lower()
        return [i for i, line in enumerate(self.lines) if q in line.lower()]
