"""Rich renderables for failures: an error explained at its failing step, and
the pre-trace findings about custom pytree nodes.

Each reads `transforms.model` only and never crashes its caller: a failure
renders as `<render-error ...>`.
"""
from __future__ import annotations

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from transforms.model import Call, ErrorRecord, NonFiniteRecord

from .. import _safe_text as safe_text
from .diagnostics import DiagnosticsView
from .pytree import PairView, safe
from .step import shorten_paths


def _short_error(type_name: str) -> str:
    return type_name.rsplit(".", 1)[-1]


def failure_facts(e: ErrorRecord, call: Call | None = None) -> list[tuple[str, str]]:
    """What failed, where and at which tracer, as (name, text) rows (the hint apart): the
    terminal's panel and workbench.html's view show the same facts."""
    facts = [("error", safe_text.first_line(e.message))]
    if e.source is not None:
        facts.append(("line", shorten_paths(str(e.source))))
    if e.function:
        facts.append(("function", e.function))
    level = e.level_label
    if level:
        facts.append(("level", f"{level} ({e.transform})" if e.transform else level))
    step = _step_text(e, call)
    if step:
        facts.append(("step", step))
    if e.argument:
        bdim = f", batch_dim={e.batch_dim}" if e.batch_dim is not None else ""
        facts.append(("argument", f"{e.argument}{bdim}"))
    elif e.batch_dim is not None:
        facts.append(("batch_dim", str(e.batch_dim)))
    if e.tracer:
        facts.append(("tracer", e.tracer))
    return facts


def _step_text(e: ErrorRecord, call: Call | None) -> str:
    if e.step is None:
        return ""
    if call is None or not 0 <= e.step < len(call.steps):
        return f"#{e.step}"
    step = call.steps[e.step]
    label = ""
    if 0 <= step.level < len(call.levels):
        label = f" at {call.levels[step.level].label}"
    return f"#{step.index} {step.title}{label}"


class FailurePanel:
    """What failed, where, at which transformation's tracer, and the fix."""

    def __init__(self, error: ErrorRecord, call: Call | None = None):
        self.error = error
        self.call = call

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield safe(self._build, "failure")

    def _facts(self) -> Table:
        table = Table.grid(padding=(0, 1))
        table.add_column(style="bold", no_wrap=True)
        table.add_column(overflow="fold")
        for name, text in failure_facts(self.error, self.call):
            table.add_row(name, Text(text))
        if self.error.hint:
            table.add_row("hint", Text(shorten_paths(self.error.hint), style="green"))
        return table

    def _build(self) -> RenderableType:
        e = self.error
        parts: list[RenderableType] = [self._facts()]
        if e.mismatch is not None:
            parts.append(Text(""))
            parts.append(PairView(e.mismatch))
        # A Text title: rule names in brackets are not markup.
        title = Text(_short_error(e.type_name) + (f" [{e.rule}]" if e.rule else ""))
        return Panel(Group(*parts), title=title, title_align="left", border_style="red",
                     box=box.ROUNDED)


_NONFINITE_TITLES = {"first": "first NaN/Inf from finite inputs",
                     "first_nan": "first NaN (what jax_debug_nans names)",
                     "inputs": "NaN/Inf already in the inputs"}


class NonFinitePanel:
    """Where a call's NaN or Inf came from (record(find_nans=True)): the equation, its stage,
    level and line, its inputs' and outputs' values, and the known cause's hint."""

    def __init__(self, finding: NonFiniteRecord):
        self.finding = finding

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield safe(self._build, "nonfinite")

    def _build(self) -> RenderableType:
        f = self.finding
        table = Table.grid(padding=(0, 1))
        table.add_column(style="bold", no_wrap=True)
        table.add_column(overflow="fold")
        if f.primitive:
            inner = "".join(f" in {p}" for p in f.path)
            table.add_row("equation", Text(f"{f.primitive}{inner}: eqn {f.eqn} of {f.stage}"))
            table.add_row("pass", Text(f"{f.phase}" + (f" ({f.name_stack})" if f.name_stack
                                                        else "")))
        if f.level:
            table.add_row("level", Text(f.level))
        if f.source is not None:
            table.add_row("line", Text(shorten_paths(str(f.source))))
        for name, values in (("in", f.inputs), ("out", f.outputs)):
            for i, v in enumerate(values):
                style = "red" if v is not None and not v.finite else ""
                table.add_row(f"{name}[{i}]", Text(v.describe() if v is not None else "?",
                                                   style=style))
        if f.note:
            table.add_row("note", Text(f.note))
        if f.hint:
            table.add_row("hint", Text(f.hint, style="green"))
        title = Text(_NONFINITE_TITLES.get(f.kind, f.kind) + (f" [{f.rule}]" if f.rule else ""))
        return Panel(table, title=title, title_align="left", border_style="yellow",
                     box=box.ROUNDED)


__all__ = ["DiagnosticsView", "FailurePanel", "NonFinitePanel", "failure_facts"]
