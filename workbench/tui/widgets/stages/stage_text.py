"""One stage as lines: a jaxpr, StableHLO/HLO text or figures, drawn only where visible."""
from __future__ import annotations

import bisect
import itertools

from rich.text import Text
from textual.cache import LRUCache

from transforms.model import Call, Stage

from ....analysis import eqn_values, values_text
from ....render.stages import highlight_compiled, highlight_jaxpr
from ...messages import EquationChosen
from ...navigation import StageMap, sanitize
from ..common.line_list import LineList

_MARKS = {"changed": ("~", "yellow"), "added": ("+", "green"), "removed": ("-", "red")}
_CACHE = 512  # highlighted lines kept: a few screens' worth
_VALUES_WIDTH = 80  # characters of an equation's values shown beside it
_ALERTS = {"first": "first NaN/Inf from finite inputs", "first_nan": "first NaN"}

# The stages shown lately as lines (by id: a map holds its stage, so no other stage takes
# that id while it is here): switching views or stages back and forth does not split
# 16,000 lines again.
_maps: LRUCache[int, StageMap] = LRUCache(8)


def stage_map(stage: Stage) -> StageMap:
    """The stage's map, made once while it is among the stages shown lately."""
    found = _maps.get(id(stage))
    if found is None or found.stage is not stage:
        found = StageMap(stage)
        _maps.discard(id(stage))
        _maps.set(id(stage), found)
    return found


class StageText(LineList):
    """A stage's text with equation numbers and diff marks in the gutter; enter finds the step."""

    DEFAULT_CSS = """
    StageText { width: 1fr; border-left: vkey $panel-lighten-2; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.stage: Stage | None = None
        self.stage_index = -1
        self.call_index = -1
        self.lines: list[str] = []
        self.map: StageMap | None = None
        self._eqn_of_line: dict[int, int] = {}
        self.marks: dict[int, str] = {}  # equation -> changed | added | removed
        self._gutter = 0
        self._cache: LRUCache[int, Text] = LRUCache(_CACHE)  # row -> highlighted Text
        self._search: tuple[list[str], str, list[int]] | None = None
        self.eqn_values: tuple = ()  # per equation, its outputs' summaries (values=True)
        self.alerts: dict[int, str] = {}  # equation -> the kind of a NaN/Inf finding there

    def set_stage(self, call_index: int, stage_index: int, stage: Stage | None) -> None:
        self.call_index, self.stage_index, self.stage = call_index, stage_index, stage
        shown = stage_map(stage) if stage is not None else None
        self.lines = shown.lines if shown is not None else []  # made safe line by line when drawn
        self.map = shown if shown is not None and stage is not None and stage.eqns else None
        lines_of = self.map.eqn_lines if self.map is not None else None
        self._eqn_of_line = self.map.eqn_of_line if self.map is not None else {}
        self.marks = {}
        self._gutter = len(str(len(lines_of))) + 2 if lines_of else 0
        self._cache.clear()
        width = (shown.width if shown is not None else 0) + self._gutter
        self.set_rows(len(self.lines), width=width, cursor=0)
        self.scroll_to(x=0, y=0, animate=False, immediate=True)

    def set_call_facts(self, call: Call | None) -> None:
        """What the call's replays found for this stage: each equation's values, and the
        equations that first made a NaN or Inf (record(values=True), find_nans)."""
        stage = self.stage
        self.eqn_values, self.alerts = (), {}
        if call is not None and stage is not None:
            self.eqn_values = eqn_values(call, stage.name)
            self.alerts = {f.eqn: f.kind for f in call.nonfinite
                           if f.stage == stage.name and f.eqn >= 0}
        self._cache.clear()
        self.refresh()

    def set_marks(self, marks: dict[int, str]) -> None:
        self.marks = marks
        self._cache.clear()
        self.refresh()

    def line_of_eqn(self, eqn: int) -> int | None:
        lines = self.map.eqn_lines if self.map is not None else None
        return lines[eqn] if lines is not None and 0 <= eqn < len(lines) else None

    def show_eqn(self, eqn: int | None) -> None:
        line = self.line_of_eqn(eqn) if eqn is not None else None
        if line is not None:
            self.set_cursor(line, center=True)

    # --- drawing ---------------------------------------------------------------

    def row_text(self, row: int) -> Text:
        cached = self._cache.get(row)
        if cached is None:
            cached = self._highlighted(row)
            self._cache.set(row, cached)
        return cached.copy()

    def _highlighted(self, row: int) -> Text:
        line = sanitize(self.lines[row].expandtabs(4))
        gutter = Text()
        if self._gutter:
            eqn = self._eqn_of_line.get(row)
            if eqn is None:
                gutter.append(" " * self._gutter)
            else:
                mark, style = _MARKS.get(self.marks.get(eqn, ""), (" ", ""))
                if eqn in self.alerts:
                    mark, style = "!", "bold red"
                gutter.append(f"{eqn:>{self._gutter - 2}}", style=self.dim_style())
                gutter.append(f"{mark} ", style=style)
        body = self._body(line)
        eqn = self._eqn_of_line.get(row)
        if eqn is not None:
            body.append_text(self._facts(eqn))
        return gutter + body

    def _facts(self, eqn: int) -> Text:
        """After an equation's first line: the values its outputs had, and a finding's mark."""
        text = Text()
        if eqn < len(self.eqn_values):
            values = values_text(self.eqn_values[eqn])
            text.append(f"  = {sanitize(values)[:_VALUES_WIDTH]}", style="dim")
        kind = self.alerts.get(eqn)
        if kind is not None:
            text.append(f"  ◀ {_ALERTS.get(kind, kind)}", style="bold red")
        return text

    def _body(self, line: str) -> Text:
        stage = self.stage
        if stage is None or not stage.available or not line:
            return Text(line, style="red" if stage is not None and not stage.available else "")
        if stage.jaxpr is not None and stage.jaxpr.text:
            return highlight_jaxpr(line)
        if stage.text is not None:
            return highlight_compiled(line)
        return Text(line)

    def search_rows(self, query: str) -> list[int]:
        if self.map is None and self.stage is None:
            return []
        q = query.lower()
        if "\n" in q:
            return []
        text, starts = self._search_text()
        found: list[int] = []
        at = text.find(q)
        while at >= 0:
            line = bisect.bisect_right(starts, at) - 1
            found.append(line)
            # the next match starts on a later line: each line counts once
            at = text.find(q, starts[line + 1] if line + 1 < len(starts) else len(text))
        return found

    def _search_text(self) -> tuple[str, list[int]]:
        """The stage's text lower-cased in one string, and where each line starts: a search
        of 16,000 equations is then a few `str.find`s, not a pass over every line."""
        if self._search is None or self._search[0] is not self.lines:
            text = "\n".join(self.lines).lower()
            starts = [0, *itertools.accumulate(len(line) + 1 for line in self.lines[:-1])]
            self._search = (self.lines, text, starts)
        return self._search[1], self._search[2]

    def action_choose(self) -> None:
        eqn = self._eqn_of_line.get(self.cursor)
        if eqn is not None and self.stage is not None:
            self.post_message(EquationChosen(self.call_index, self.stage_index, eqn))
