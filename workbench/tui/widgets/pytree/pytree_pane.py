"""The pytree view: a call's input and output trees, leaves paired, values shown.

Rows come from `tree_rows` (plain data, built once per call); only the rows on
screen are drawn, so a call with 10,000 leaves shows as fast as one with three.
The pre-trace check's findings (a few) are drawn once with their renderer.
"""
from __future__ import annotations

from rich.console import Console
from rich.style import Style
from rich.text import Text

from transforms.model import Call

from ....render.failure import DiagnosticsView
from ...navigation import Outline, Selection
from ...tree_rows import TreeRows, call_tree_rows
from ..common.line_list import LineList
from ..common.selection_view import SelectionView, call_changed

# Style names of tree_rows -> the look of each.
_STYLES = {"title": "bold", "head": "bold", "leaf": "cyan", "node": "bold",
           "dim": "dim", "error": "red", "differs": "yellow", "left_only": "red",
           "right_only": "green", "first": "bold red", "same_structure": "green", "static": "magenta", "": ""}


class PytreePane(LineList, SelectionView):
    """Rows of the call's pytrees; `/` searches them."""

    VIEW = "pytree"

    DEFAULT_CSS = """
    PytreePane { padding: 0 1; }
    """

    def __init__(self, outline: Outline, **kwargs) -> None:
        super().__init__(**kwargs)
        self.outline = outline
        self.rows = TreeRows([])
        self.call: Call | None = None
        self._built_for: int | None = None
        self._extra: list[Text] = []
        self._styles = {name: Style.parse(spec) if spec else Style() for name, spec in _STYLES.items()}

    depends_on = staticmethod(call_changed)

    def show_selection(self, selection: Selection) -> None:
        self.show(self.outline.session.calls[selection.call])

    def show(self, call: Call) -> None:
        self.call = call
        self._built_for = self._fit_width()
        if self._built_for is None:  # not laid out yet: built when it is (on_resize)
            self.rows = TreeRows([])
            self.set_rows(0)
            return
        self.rows = call_tree_rows(call, self._built_for)
        self._extra = _diagnostic_lines(call, self.app.console) if call.diagnostics else []
        width = max([self.rows.width] + [t.cell_len for t in self._extra])
        self.set_rows(len(self.rows) + len(self._extra), width=width, cursor=0)

    def _fit_width(self) -> int | None:
        # The widget's width less its padding and a vertical scrollbar, whether one is shown
        # yet or not: the scrollbar appearing must not refit (rebuild) the rows.
        width = self.size.width - self.styles.gutter.width - self.styles.scrollbar_size_vertical
        return width if width > 0 else None

    def on_resize(self) -> None:
        # The pairs' columns are fitted to the width: refit them, keeping the cursor.
        if self.call is not None and self._fit_width() != self._built_for:
            cursor = self.cursor
            self.show(self.call)
            self.set_cursor(cursor)

    def row_text(self, row: int) -> Text:
        if row >= len(self.rows):
            return self._extra[row - len(self.rows)].copy()
        styles = self._styles
        text = Text(no_wrap=True)
        for piece, style in self.rows[row].pieces:
            text.append(piece, styles.get(style))
        return text

    def search_rows(self, query: str) -> list[int]:
        q = query.lower()
        found = self.rows.search(q)
        base = len(self.rows)
        return found + [base + i for i, t in enumerate(self._extra) if q in t.plain.lower()]


def _diagnostic_lines(call: Call, console: Console) -> list[Text]:
    """The pre-trace check's findings, drawn once (a handful of lines)."""
    try:
        lines = console.render_lines(DiagnosticsView(tuple(call.diagnostics)),
                                     console.options.update(width=100, height=None), pad=False)
    except Exception as e:  # a renderer never takes the view down
        return [Text(f"<render-error diagnostics: {type(e).__name__}: {e}>", style="red")]
    out = []
    for line in lines:
        text = Text(no_wrap=True)
        for seg in line:
            text.append(seg.text, seg.style)
        out.append(text)
    return out
