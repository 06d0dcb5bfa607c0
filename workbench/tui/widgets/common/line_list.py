"""LineList: a focusable list of one-line rows drawn on demand (Textual's Line API).

Subclasses say how many rows there are and how to draw row i; only the rows on
screen are ever drawn, so a list of 100,000 steps or a 30,000-line jaxpr costs
the same to show and to move in as a short one. A row that fails to draw shows
a `<render-error ...>` placeholder instead of taking the app down.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events, on
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ...navigation import sanitize


class LineList(ScrollView, can_focus=True):
    """Rows with a cursor, search matches and optional gutter marks."""

    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home,g", "jump(0)", "First", show=False),
        Binding("end,G", "jump(-1)", "Last", show=False),
        Binding("enter", "choose", "Open", show=False),
    ]
    COMPONENT_CLASSES = {"line-list--cursor", "line-list--match", "line-list--dim"}
    DEFAULT_CSS = """
    LineList { background: $surface; }
    LineList > .line-list--cursor { background: $primary 40%; }
    LineList:focus > .line-list--cursor { background: $primary; color: $text; text-style: bold; }
    LineList > .line-list--match { background: $warning 30%; }
    LineList > .line-list--dim { color: $text-muted; }
    """

    cursor: reactive[int] = reactive(0, always_update=True, init=False, layout=False)

    @dataclass
    class CursorMoved(Message):
        """The cursor went to another row."""
        line_list: LineList
        row: int

        @property
        def control(self) -> LineList:
            return self.line_list

    @dataclass
    class RowChosen(Message):
        """Enter (or a double click) on a row."""
        line_list: LineList
        row: int

        @property
        def control(self) -> LineList:
            return self.line_list

    def __init__(self, *, name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._count = 0
        self._width = 0
        self.matches: list[int] = []
        self._match_set: set[int] = set()
        self.query_text = ""
        self._pending_scroll: tuple[int, bool] | None = None  # made once it has a height

    # --- what subclasses provide -------------------------------------------------

    def row_text(self, row: int) -> Text:
        raise NotImplementedError

    def search_rows(self, query: str) -> list[int]:
        """Rows holding `query` (subclasses search their own data)."""
        return []

    # --- contents --------------------------------------------------------------

    @property
    def row_count(self) -> int:
        return self._count

    def set_rows(self, count: int, width: int = 0, cursor: int | None = None) -> None:
        """Say how many rows there are now; keeps the cursor in range."""
        self._count = max(0, count)
        self._width = max(0, width)
        self.virtual_size = Size(self._width, self._count)
        self.clear_matches()
        target = self.cursor if cursor is None else cursor
        self.set_cursor(min(max(target, 0), max(self._count - 1, 0)), scroll=True)
        self.refresh()

    # --- cursor ----------------------------------------------------------------

    def set_cursor(self, row: int, scroll: bool = True, center: bool = False) -> None:
        row = min(max(row, 0), max(self._count - 1, 0))
        self.cursor = row
        if scroll:
            self._scroll_to_row(row, center)

    def watch_cursor(self, old: int, new: int) -> None:
        # Only the two rows change (a scroll, if any, redraws the rest).
        self.refresh_line(old)
        self.refresh_line(new)
        self.post_message(self.CursorMoved(self, new))

    def _scroll_to_row(self, row: int, center: bool = False) -> None:
        if not self.scrollable_content_region.height:  # not laid out yet, or hidden
            # NB: else a pane of no height scrolls its row to the top (a stage pair's two
            # panes, laid out one after the other, then start a line apart). Made when it
            # gets a height (on_resize), not polled: a hidden pane has none for good, and
            # asking again after each refresh kept a core busy while the app sat idle.
            self._pending_scroll = (row, center)
            return
        self._pending_scroll = None
        height = self.scrollable_content_region.height
        top = int(self.scroll_y)
        if center and not top <= row < top + height:
            top = max(0, row - height // 2)
        elif row < top:
            top = row
        elif row >= top + height:
            top = row - height + 1
        if top != int(self.scroll_y):
            self.scroll_to(y=top, animate=False, immediate=True)

    @on(events.Resize)
    def _scroll_once_laid_out(self) -> None:
        pending = self._pending_scroll
        if pending is not None and self.scrollable_content_region.height:
            self._scroll_to_row(*pending)

    def action_cursor(self, delta: int) -> None:
        self.set_cursor(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        height = max(self.scrollable_content_region.height - 1, 1)
        self.set_cursor(self.cursor + direction * height)

    def action_jump(self, row: int) -> None:
        self.set_cursor(row if row >= 0 else self._count - 1)

    def action_choose(self) -> None:
        if self._count:
            self.post_message(self.RowChosen(self, self.cursor))

    def _on_click(self, event: events.Click) -> None:  # type: ignore[override]  # sync is allowed
        offset = event.get_content_offset(self)
        if offset is None:
            return
        row = int(self.scroll_y) + offset.y
        if 0 <= row < self._count:
            self.set_cursor(row, scroll=False)
            if event.chain >= 2:
                self.post_message(self.RowChosen(self, row))

    # --- search ------------------------------------------------------------------

    def search(self, query: str) -> int:
        """Mark the rows holding `query`; returns how many."""
        self.query_text = query
        self.matches = self.search_rows(query) if query else []
        self._match_set = set(self.matches)
        self.refresh()
        return len(self.matches)

    def clear_matches(self) -> None:
        self.matches, self._match_set, self.query_text = [], set(), ""

    def next_match(self, forward: bool = True) -> int | None:
        """Move to the next (or previous) match after the cursor, wrapping; its number or None."""
        if not self.matches:
            return None
        if forward:
            i = bisect.bisect_right(self.matches, self.cursor)
            i = 0 if i >= len(self.matches) else i
        else:
            i = bisect.bisect_left(self.matches, self.cursor) - 1
            i = len(self.matches) - 1 if i < 0 else i
        self.set_cursor(self.matches[i], center=True)
        return i

    # --- drawing -----------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        row = scroll_y + y
        width = self.scrollable_content_region.width
        base = self._base_style()
        if row >= self._count:
            return Strip.blank(width, base)
        try:
            text = self.row_text(row)
        except Exception as e:  # one bad record must not take the list down
            text = Text(f"<render-error row {row}: {type(e).__name__}: {e}>", style="red")
        if row in self._match_set:
            text.stylize(self.get_component_rich_style("line-list--match", partial=True))
        fill = base
        if row == self.cursor:
            cursor_style = self.get_component_rich_style("line-list--cursor", partial=True)
            text.stylize(cursor_style)
            fill = base + cursor_style
        segments = [Segment(seg.text, base + seg.style if seg.style else base)
                    for seg in text.render(self.app.console, end="")]
        strip = Strip(segments)
        return strip.crop_extend(scroll_x, scroll_x + width, fill)

    def _base_style(self) -> Style:
        """The widget's own style, computed once per repaint rather than once per row
        (it walks every ancestor's CSS). Kept in Textual's component-style cache, which
        Textual clears whenever the widget's styles may have changed."""
        cache = getattr(self, "_rich_style_cache", None)
        if not isinstance(cache, dict):
            return self.rich_style
        found = cache.get(("-line-list-base",))
        if found is None:
            style = self.rich_style
            found = cache[("-line-list-base",)] = (style, style)
        return found[0]

    @staticmethod
    def one_line(text: object) -> str:
        return sanitize(str(text).replace("\n", " ").replace("\t", "    "))

    def dim_style(self) -> Style:
        return self.get_component_rich_style("line-list--dim", partial=True)
