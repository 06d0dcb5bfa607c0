"""A call's diagnostics as a table: the pre-trace check's findings, and what the recorder
could not record (kind LOST), shown in the pytree view and, for the latter, the failure view."""
from __future__ import annotations

from rich import box
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

from transforms.model import LOST, Call, Diagnostic

from ._safe import safe
from .step import shorten_paths


def lost_diagnostics(call: Call) -> tuple[Diagnostic, ...]:
    """What the recorder could not record for `call`, and why."""
    return tuple(d for d in call.diagnostics if d.kind == LOST)


class DiagnosticsView:
    """The pre-trace check's findings (custom pytree nodes and their functions), and what
    the recorder lost."""

    def __init__(self, diagnostics: tuple[Diagnostic, ...] | list[Diagnostic]):
        self.diagnostics = tuple(diagnostics)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield safe(self._build, "diagnostics")

    def _build(self) -> RenderableType:
        if not self.diagnostics:
            return Text("no findings: every custom pytree node round-trips", style="green")
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        table.add_column("kind", no_wrap=True)
        table.add_column("where", overflow="fold")
        table.add_column("finding", overflow="fold")
        for d in self.diagnostics:
            where = shorten_paths(str(d.source)) if d.source is not None else d.path
            style = "red" if d.kind == LOST else "yellow"
            table.add_row(Text(d.kind, style=style), Text(where), Text(shorten_paths(d.message)))
        return table
