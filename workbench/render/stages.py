"""Rich renderables for stages: a stage's jaxpr or compiled text, its stats,
a side-by-side diff of two stages, a call's chain of stages, and growth.

Each reads recorded data only (`transforms.model`, `transforms.model._diff`) and
never crashes its caller: a failure renders as `<render-error ...>`.
"""
from __future__ import annotations

import re
from typing import Any, Iterable, Sequence

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

from transforms.model import EqnChange, EqnRecord, Growth, Stage, StageDiff, short_aval

from .. import _safe_text as safe_text
from ._safe import safe as _safe

# --- highlighting --------------------------------------------------------------

_JAXPR_STYLES = (
    (r"\b(?:lambda|let|in)\b", "bold magenta"),
    (r"~?\b(?:bf|f|i|u|c)\d+\[[\d,]*\]|\bbool\[[\d,]*\]", "cyan"),
    (r"(?<== )[a-z_][a-z0-9_]*", "bold"),
    (r"-?\b\d+(?:\.\d+)?(?:e-?\d+)?(?=:)", "green"),
)
_COMPILED_STYLES = (
    (r"\bstablehlo\.[a-z_]+|\bfunc\.[a-z_]+", "bold"),
    (r"tensor<[^>]*>", "cyan"),
    (r"(?<== )[a-z][a-z0-9-]*(?=\()", "bold"),
    (r"%[\w.#-]+", "green"),
)
_MARKS = {"same": " ", "changed": "~", "added": "+", "removed": "-"}
_MARK_STYLES = {"same": "", "changed": "yellow", "added": "green", "removed": "red"}


_JAXPR_PATTERNS = tuple((re.compile(p), style) for p, style in _JAXPR_STYLES)
_COMPILED_PATTERNS = tuple((re.compile(p), style) for p, style in _COMPILED_STYLES)


def _highlighted(text: str, styles: Iterable[tuple[Any, str]]) -> Text:
    out = Text(text)
    for pattern, style in styles:
        out.highlight_regex(pattern, style)
    return out


def highlight_jaxpr(text: str) -> Text:
    """Jaxpr text coloured as JaxprView colours it (the TUI draws it line by line)."""
    return _highlighted(text, _JAXPR_PATTERNS)


def highlight_compiled(text: str) -> Text:
    """StableHLO/HLO text coloured as CompiledView colours it."""
    return _highlighted(text, _COMPILED_PATTERNS)


# --- folding sub-jaxprs --------------------------------------------------------

def fold_jaxpr(text: str, depth: int = 0) -> str:
    """Collapse the bodies of `{ lambda ... }` sub-jaxprs nested deeper than `depth`.

    depth 0 folds every sub-jaxpr (a cond's branches, a scan's body, a jit's
    jaxpr, and those JAX prints as `let name = { lambda ... } in` above the
    main one); depth 1 keeps the first level open. A body becomes `…` or
    `… N lines …`; the binders and the `in (...)` outputs stay.
    """
    spans = _lambda_spans(text)
    if spans is None:
        return text  # unbalanced braces: show the text as it is
    out, pos = [], 0
    for start, end, level in spans:
        if level <= depth or start < pos:
            continue
        folded = _folded(text[start:end + 1])
        if folded is None:
            continue
        out.append(text[pos:start])
        out.append(folded)
        pos = end + 1
    out.append(text[pos:])
    return "".join(out)


def _lambda_spans(text: str) -> list[tuple[int, int, int]] | None:
    """(start, end, level) of each `{ lambda`: level 0 is the program, 1 its sub-jaxprs, ..."""
    spans: list[tuple[int, int, int]] = []
    stack: list[tuple[int, int | None]] = []
    for m in re.finditer(r"\{ lambda|\{|\}", text):
        if m.group() == "}":
            if not stack:
                return None
            start, level = stack.pop()
            if level is not None:
                spans.append((start, m.start(), level))
            continue
        level = None
        if m.group() == "{ lambda":
            enclosing = sum(1 for _, lv in stack if lv is not None)
            line_start = text.rfind("\n", 0, m.start()) + 1
            let_bound = text[line_start:m.start()].rstrip().endswith("=") and not stack
            level = enclosing + (1 if let_bound else 0)
        stack.append((m.start(), level))
    if stack:
        return None
    return sorted(spans)


def _folded(span: str) -> str | None:
    let = span.find(". let")
    out = span.rfind("in (")
    if let < 0 or out < 0 or out < let:
        return None
    body = span[let + len(". let"):out]
    lines = body.strip().count("\n") + 1
    hidden = "…" if lines == 1 else f"… {lines} lines …"
    return f"{span[:let + len('. let')]} {hidden} {span[out:]}"


# --- one stage -----------------------------------------------------------------

class JaxprView:
    """A jaxpr's text, highlighted, with sub-jaxprs folded beyond `fold` levels (None: open)."""

    def __init__(self, text: str, fold: int | None = None, max_lines: int | None = None):
        self.text = text
        self.fold = fold
        self.max_lines = max_lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield _safe(self._render, "jaxpr")

    def _render(self) -> RenderableType:
        text = self.text if self.fold is None else fold_jaxpr(self.text, self.fold)
        return highlight_jaxpr(_clipped(text, self.max_lines))


class CompiledView:
    """StableHLO or optimised HLO text, highlighted."""

    def __init__(self, text: str, max_lines: int | None = None):
        self.text = text
        self.max_lines = max_lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield _safe(lambda: highlight_compiled(_clipped(self.text, self.max_lines)),
                    "compiled text")


def _clipped(text: str, max_lines: int | None) -> str:
    if max_lines is None:
        return text
    lines = text.split("\n")
    if len(lines) <= max_lines:
        return text
    return "\n".join(lines[:max_lines] + [f"… {len(lines) - max_lines} more lines"])


class StageStats:
    """A stage's figures: equation count, avals, primitive histogram, name stacks, source lines."""

    def __init__(self, stage: Stage, top: int = 8, bar_width: int = 20):
        self.stage = stage
        self.top = top
        self.bar_width = bar_width

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield _safe(self._render, "stage stats")

    def _render(self) -> RenderableType:
        stage = self.stage
        facts = Table.grid(padding=(0, 2))
        facts.add_column(style="bold")
        facts.add_column()
        if stage.jaxpr is not None:
            facts.add_row("equations", str(stage.jaxpr.eqn_count))
            facts.add_row("inputs", Text(_avals(stage.jaxpr.in_avals)))
            facts.add_row("outputs", Text(_avals(stage.jaxpr.out_avals)))
        stacks = _counted(e.name_stack or "(none)" for e in stage.eqns)
        for label, counts in (("name stacks", stacks),
                              ("source lines", _counted(e.source for e in stage.eqns))):
            if counts:
                # Text, not markup: name stacks and source lines are user text.
                facts.add_row(label, Text("\n".join(f"{n:>5}  {key}" for key, n in counts[:self.top])))
        parts: list[RenderableType] = [facts]
        if stage.histogram:
            parts.append(self._histogram())
        return Group(*parts)

    def _histogram(self) -> Table:
        bars = self.stage.histogram[:self.top]
        most = max(bar.count for bar in bars) or 1  # NB: not bars[0]: a bar is never wider
        table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 1))
        table.add_column(style="bold")
        table.add_column(justify="right")
        table.add_column()
        for bar in bars:
            width = max(1, round(self.bar_width * bar.count / most))
            table.add_row(Text(bar.primitive), str(bar.count), "█" * width)
        rest = len(self.stage.histogram) - len(bars)
        if rest > 0:
            table.add_row(f"… {rest} more", "", "")
        return table


def _avals(avals: Sequence[str]) -> str:
    return ", ".join(short_aval(a) for a in avals) or "()"


def _counted(keys: Iterable[str]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for key in keys:
        if key:
            counts[key] = counts.get(key, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


class MetricsView:
    """cost_analysis() or memory_analysis() figures."""

    def __init__(self, stage: Stage):
        self.stage = stage

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield _safe(self._render, "metrics")

    def _render(self) -> RenderableType:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        table.add_column(justify="right")
        for m in self.stage.metrics:
            table.add_row(Text(m.name), _number(m.value))
        return table


def _number(value: int | float) -> str:
    if isinstance(value, float) and value.is_integer():
        return f"{int(value):,}"
    return f"{value:,}" if isinstance(value, int) else f"{value:,.4g}"


class StageView:
    """One stage: what it is, how JAX made it, its program (jaxpr, text or figures), stats."""

    def __init__(self, stage: Stage, fold: int | None = None, max_lines: int | None = None,
                 stats: bool = True):
        self.stage = stage
        self.fold = fold
        self.max_lines = max_lines
        self.stats = stats

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield _safe(self._render, f"stage {getattr(self.stage, 'name', '?')!r}")

    def _render(self) -> RenderableType:
        stage = self.stage
        parts: list[RenderableType] = [Text.assemble((stage.name, "bold"), "  ", stage.title)]
        if stage.method:
            parts.append(Text(stage.method, style="dim"))
        if stage.note:
            parts.append(Text(stage.note, style="yellow"))
        if not stage.available:
            parts.append(Text(f"unavailable: {stage.reason}", style="red"))
            return Group(*parts)
        if stage.jaxpr is not None:
            parts.append(JaxprView(stage.jaxpr.text, self.fold, self.max_lines))
        elif stage.text is not None:
            parts.append(CompiledView(stage.text, self.max_lines))
        if stage.metrics:
            parts.append(MetricsView(stage))
        if self.stats and stage.jaxpr is not None:
            parts.append(StageStats(stage))
        return Group(*parts)


# --- a call's chain ------------------------------------------------------------

class ChainView:
    """The stages of one call in pipeline order: name, role, equations, status."""

    def __init__(self, stages: Sequence[Stage]):
        self.stages = stages

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield _safe(self._render, "stage chain")

    def _render(self) -> RenderableType:
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        table.add_column("stage", style="bold")
        table.add_column("role")
        table.add_column("eqns", justify="right")
        table.add_column("status")
        for stage in self.stages:
            count = stage.jaxpr.eqn_count if stage.jaxpr is not None else None
            status = (Text("ok", style="green") if stage.available
                      else Text(safe_text.first_line(stage.reason), style="red"))
            table.add_row(Text(stage.name), Text(stage.role), "" if count is None else str(count),
                          status)
        return table


# --- diff ----------------------------------------------------------------------

def eqn_text(eqn: EqnRecord) -> str:
    """One equation on one line: `dot_general(f32[3], f32[3]) -> f32[]`."""
    ins = ", ".join(short_aval(a) for a in eqn.in_avals)
    outs = ", ".join(short_aval(a) for a in eqn.out_avals)
    return f"{eqn.primitive}({ins}) -> {outs}"


class DiffView:
    """Two stages side by side, aligned equation by equation, with changes marked.

    Marks: `~` changed (details below the row when `details`), `+` added,
    `-` removed. Runs of unchanged rows longer than 2 * context collapse.
    """

    def __init__(self, diff: StageDiff, before: Stage, after: Stage, context: int = 2,
                 details: bool = True):
        self.diff = diff
        self.before = before
        self.after = after
        self.context = context
        self.details = details

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield _safe(self._render, "stage diff")

    def _render(self) -> RenderableType:
        d = self.diff
        head = [Text.assemble((f"{d.before} -> {d.after}", "bold"), f": {d.summary()}")]
        head.append(Text(f"in:  {arrow(*d.in_avals)}"))
        head.append(Text(f"out: {arrow(*d.out_avals)}"))
        for change in d.aval_changes:
            note = f" ({change.note})" if change.note else ""
            head.append(Text(f"  {change.before} -> {change.after} ×{change.count}{note}"))
        if d.primitives:
            head.append(Text("primitives: " + ", ".join(
                f"{p.primitive} {p.before} -> {p.after}" for p in d.primitives)))
        if not d.exact:
            head.append(Text("(coarse alignment: the stages are too large for an exact one)",
                             style="dim"))
        return Group(*head, self._table())

    def _table(self) -> Table:
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False, expand=False)
        table.add_column("#", justify="right", style="dim")
        table.add_column(self.diff.before)
        table.add_column("", width=1)
        table.add_column("#", justify="right", style="dim")
        table.add_column(self.diff.after)
        for row in with_context(self.diff.rows, self.context):
            if isinstance(row, int):
                table.add_row("", Text(f"… {row} unchanged", style="dim"), "", "", "")
            else:
                table.add_row(*self._cells(row))
        return table

    def _cells(self, row: EqnChange) -> tuple:
        style = _MARK_STYLES[row.kind]
        left = eqn_text(self.before.eqns[row.before]) if row.before is not None else ""
        right = eqn_text(self.after.eqns[row.after]) if row.after is not None else ""
        right_text = Text(right, style=style)
        if self.details and row.details:
            right_text.append("\n" + "\n".join(f"  {d}" for d in row.details), style="dim")
        return ("" if row.before is None else str(row.before), Text(left, style=style),
                Text(_MARKS[row.kind], style=style),
                "" if row.after is None else str(row.after), right_text)


def arrow(before: Sequence[str], after: Sequence[str]) -> str:
    """`f32[3] -> f32[2,3]`, or the avals once where they did not change."""
    x, y = ", ".join(before) or "()", ", ".join(after) or "()"
    return x if x == y else f"{x} -> {y}"


def with_context(rows: Sequence[EqnChange], context: int) -> list[EqnChange | int]:
    """Rows, with each long run of unchanged rows replaced by its length."""
    out: list[EqnChange | int] = []
    i = 0
    while i < len(rows):
        if rows[i].kind != "same":
            out.append(rows[i])
            i += 1
            continue
        j = i
        while j < len(rows) and rows[j].kind == "same":
            j += 1
        head = context if i > 0 else 0
        tail = context if j < len(rows) else 0
        if j - i > head + tail + 1:
            out += list(rows[i:i + head]) + [j - i - head - tail] + list(rows[j - tail:j])
        else:
            out += list(rows[i:j])
        i = j
    return out


# --- growth --------------------------------------------------------------------

class GrowthView:
    """Equations per batch size for each function; with `primitive`, its count too."""

    def __init__(self, growth: Growth, primitive: str | None = None):
        self.growth = growth
        self.primitive = primitive

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield _safe(self._render, "growth")

    def _render(self) -> RenderableType:
        g = self.growth
        table = Table(title=g.title, box=box.SIMPLE_HEAD, pad_edge=False)
        table.add_column("batch", justify="right")
        for series in g.series:
            table.add_column(series.label, justify="right")
        sizes = sorted({p.size for s in g.series for p in s.points})
        for size in sizes:
            table.add_row(str(size), *(self._cell(s, size) for s in g.series))
        table.add_row(Text("per element", style="bold"),
                      *(_slope(s.per_element) for s in g.series))
        return table

    def _cell(self, series: Any, size: int) -> Text:
        point = next((p for p in series.points if p.size == size), None)
        if point is None:
            return Text("")
        if point.eqn_count is None:
            return Text(safe_text.first_line(point.error), style="red")
        text = str(point.eqn_count)
        if self.primitive:
            text += f" ({point.count(self.primitive)} {self.primitive})"
        return Text(text)


def _slope(per_element: float | None) -> Text:
    if per_element is None:
        return Text("")
    text = f"+{per_element:g}" if per_element >= 0 else f"{per_element:g}"
    return Text(text, style="bold")


class GrowthChart:
    """Equations per batch size as text bars, one block per series, on one scale."""

    def __init__(self, growth: Growth, width: int = 40, title: bool = True):
        if width < 1:
            raise ValueError(f"GrowthChart width must be at least 1, got {width}")
        self.growth = growth
        self.width = width
        self.title = title

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield _safe(self._render, "growth chart")

    def _render(self) -> RenderableType:
        g = self.growth
        points = [p for s in g.series for p in s.points]
        largest = max((p.eqn_count for p in points if p.eqn_count is not None), default=0)
        pad = max((len(str(p.size)) for p in points), default=1)
        lines = [Text(g.title, style="bold")] if self.title else []
        for series in g.series:
            lines.append(Text(series.label, style="bold"))
            for p in series.points:
                line = Text(f"  {p.size:>{pad}} ")
                if p.eqn_count is None:
                    line.append(safe_text.first_line(p.error), style="red")
                else:
                    line.append("█" * _bar(p.eqn_count, largest, self.width), style="cyan")
                    line.append(f" {p.eqn_count}")
                lines.append(line)
        return Group(*lines)


def _bar(count: int, largest: int, width: int) -> int:
    """Bar length on a scale where `largest` fills `width`; any equation shows."""
    if count <= 0 or largest <= 0:
        return 0
    return max(1, round(count * width / largest))


def growing_primitive(growth: Growth) -> str | None:
    """The primitive whose count grows most from the smallest to the largest batch size."""
    best: tuple[int, str] | None = None
    for series in growth.series:
        ok = sorted((p for p in series.points if p.eqn_count is not None), key=lambda p: p.size)
        if len(ok) < 2:
            continue
        names = {bar.primitive for p in ok for bar in p.histogram}
        for name in names:
            grown = ok[-1].count(name) - ok[0].count(name)
            if grown > 0 and (best is None or (-grown, name) < (-best[0], best[1])):
                best = (grown, name)
    return best[1] if best else None


class GrowthPanel:
    """Every growth kept on a call (`Call.growth`): its table and its bar chart.

    The table also counts `primitive`, by default the one that grows most
    (dot_general for the seed's loop against vmap).
    """

    def __init__(self, growths: Sequence[Growth], primitive: str | None = None,
                 bar_width: int = 40):
        self.growths = tuple(growths)
        self.primitive = primitive
        self.bar_width = bar_width

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield _safe(self._render, "growth panel")

    def _render(self) -> RenderableType:
        if not self.growths:
            return Text("no growth recorded for this call (transforms.growth keeps it)",
                        style="dim")
        parts: list[RenderableType] = []
        for g in self.growths:
            primitive = self.primitive or growing_primitive(g)
            parts += [GrowthView(g, primitive), GrowthChart(g, self.bar_width, title=False),
                      Text("")]
        return Group(*parts[:-1])
