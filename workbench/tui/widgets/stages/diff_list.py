"""Two stages aligned equation by equation, one row per pair, drawn only where visible."""
from __future__ import annotations

from rich.text import Text

from transforms.model import Stage, StageDiff

from ....render.stages import eqn_text
from ..common.line_list import LineList

_MARKS = {"same": (" ", ""), "changed": ("~", "yellow"), "added": ("+", "green"),
          "removed": ("-", "red")}


class DiffList(LineList):
    """`before │ mark │ after` per aligned pair; changed rows list what changed after them."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.diff: StageDiff | None = None
        self.before: Stage | None = None
        self.after: Stage | None = None

    def set_diff(self, diff: StageDiff | None, before: Stage | None, after: Stage | None) -> None:
        self.diff, self.before, self.after = diff, before, after
        rows = len(diff.rows) if diff is not None else 0
        self.set_rows(rows, width=0, cursor=0)

    def _half_width(self) -> int:
        return max(24, (self.scrollable_content_region.width or 80) // 2 - 4)

    def row_text(self, row: int) -> Text:
        assert self.diff is not None and self.before is not None and self.after is not None, \
            "rows exist only with a diff"
        change = self.diff.rows[row]
        mark, style = _MARKS.get(change.kind, ("?", ""))
        w = self._half_width() - 6
        left = _cut(eqn_text(self.before.eqns[change.before]), w) if change.before is not None else ""
        right = eqn_text(self.after.eqns[change.after]) if change.after is not None else ""
        text = Text()
        text.append(f"{'' if change.before is None else change.before:>5} ", style=self.dim_style())
        text.append(f"{self.one_line(left):<{w}}", style=style)
        text.append(f" {mark} ", style=f"bold {style}" if style else "")
        text.append(f"{'' if change.after is None else change.after:>5} ", style=self.dim_style())
        text.append(self.one_line(right), style=style)
        if change.details:
            text.append("  " + self.one_line("; ".join(change.details)), style=self.dim_style())
        return text

    def search_rows(self, query: str) -> list[int]:
        if self.diff is None or self.before is None or self.after is None:
            return []
        q = query.lower()
        out = []
        for i, change in enumerate(self.diff.rows):
            texts = [eqn_text(self.before.eqns[change.before]) if change.before is not None else "",
                     eqn_text(self.after.eqns[change.after]) if change.after is not None else ""]
            if any(q in t.lower() for t in texts):
                out.append(i)
        return out


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(width - 1, 0)] + "…"
