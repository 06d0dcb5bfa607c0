"""Rich renderables for one recorded step: its params, its tracers as towers, its source line.

A tower shows what each transformation holds for one value, outermost first:
`grad#2` holds a primal and a tangent; the primal is `vmap#1`'s batched value,
which holds a float32[4] array. Read from `ValueRecord.children`, nothing live.
Every renderable degrades to `<render-error ...>` rather than raise.
"""
from __future__ import annotations

import os
from typing import Mapping, Sequence

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from transforms.model import SourceLocation, Step, ValueRecord, tracer_kind

from .. import _safe_text as safe_text
from ..analysis import StepValue, step_label
from ._safe import safe

_CHILD_NAMES = {"val": "batched value", "primal": "primal", "tangent": "tangent"}


def shown_path(path: object) -> str:
    """A file as the user knows it: relative to the working directory when under it, an
    installed library's from its package folder (`equinox/_jit.py`)."""
    text = str(path)
    for packages in ("/site-packages/", "/dist-packages/"):
        if packages in text:
            return text[text.rindex(packages) + len(packages):]
    here = os.getcwd() + os.sep
    return text[len(here):] if text.startswith(here) else text


def _clip(text: object, limit: int = 400) -> str:
    """Recorded text for the step view: made terminal-safe (lines kept), cut to `limit`."""
    s = str(text)
    s = s if len(s) <= limit else s[:limit] + "…"
    return safe_text.terminal(s, limit + 1, lines=True)


class TowerView:
    """One value as a tree of what each level holds: tracer -> primal/tangent/batched -> array."""

    def __init__(self, value: ValueRecord, labels: Mapping[int, str] | None = None,
                 name: str = "", max_depth: int = 12):
        self.value = value
        self.labels = labels or {}
        self.name = name
        self.max_depth = max_depth

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield safe(self._render, "tower")

    def _render(self) -> RenderableType:
        tree = Tree(self._label(self.value, self.name), guide_style="dim")
        self._grow(tree, self.value, 0)
        return tree

    def _grow(self, node: Tree, value: ValueRecord, depth: int) -> None:
        if depth >= self.max_depth:
            node.add(Text("…", style="dim"))
            return
        for key, child in value.children or ():
            if not isinstance(child, ValueRecord):
                node.add(Text(f"{key}: <{type(child).__name__}>", style="dim"))
                continue
            sub = node.add(self._label(child, _CHILD_NAMES.get(key, str(key))))
            self._grow(sub, child, depth + 1)

    def _label(self, value: ValueRecord, role: str) -> Text:
        text = Text()
        if role:
            text.append(f"{role}: ", style="bold")
        if value.is_tracer:
            kind = tracer_kind(value.kind)  # its name, colour and what it holds
            text.append(_clip(kind.display or value.type_name), style=kind.style)
            text.append(f" {_clip(value.aval)}")
            if value.level is not None:
                text.append(f"  @ {_clip(self.labels.get(value.level, f'level {value.level}'))}",
                            style="dim")
            if value.batch_dim is not None:
                text.append(f"  batch_dim={value.batch_dim}")
            holds = kind.holds
            if holds and value.children:
                text.append(f"  holds {holds}", style="dim italic")
        else:
            text.append(_clip(value.aval), style="cyan")
            if value.value is not None:
                text.append(f" = {_clip(value.value, 200)}")
            text.append(f"  ({_clip(value.type_name)})", style="dim")
        return text


class SourceView:
    """The user's line with a few lines around it, the line itself marked."""

    def __init__(self, location: SourceLocation | None, context: tuple[int, Sequence[str]] | None):
        self.location = location
        self.context = context

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield safe(self._render, "source")

    def _render(self) -> RenderableType:
        loc = self.location
        if loc is None:
            return Text("no source line recorded", style="dim")
        head = Text.assemble(("at ", "dim"), (_clip(shown_path(loc.file)), "underline"), f":{loc.line}",
                             (f" in {_clip(loc.function)}", "dim"))
        via = loc.via
        if via is not None:  # the installed library's line between the user's and JAX
            head.append_text(Text.assemble(("\nvia ", "dim"), _clip(shown_path(via.file)),
                                           f":{via.line}", (f" in {_clip(via.function)}", "dim")))
        if self.context is None:
            return Group(head, Text("(the file cannot be read here)", style="dim"))
        first, lines = self.context
        table = Table.grid(padding=(0, 1))
        table.add_column(justify="right", style="dim", no_wrap=True,
                         min_width=len(str(first + len(lines))) + 1)
        table.add_column(no_wrap=True, overflow="ellipsis")
        for n, line in enumerate(lines, start=first):
            here = n == loc.line
            table.add_row(Text(f"{'>' if here else ' '}{n}", style="bold" if here else "dim"),
                          Text(_clip(line, 300), style="bold" if here else ""))
        return Group(head, table)


class StepView:
    """One step: what it is, where it ran, its params, its input and output towers."""

    def __init__(self, step: Step, labels: Mapping[int, str] | None = None,
                 source: RenderableType | None = None, caused: Sequence[Step] = (),
                 cause: Step | None = None, values: Sequence[StepValue] = (),
                 phased: bool = True):
        self.step = step
        self.phased = phased  # the call has a backward pass: the step's phase is shown
        self.labels = labels or {}
        self.source = source
        self.caused = caused
        self.cause = cause
        self.values = values  # the equations it was staged as, with their values

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield safe(self._render, f"step {getattr(self.step, 'index', '?')}")

    def _render(self) -> RenderableType:
        s = self.step
        level = self.labels.get(s.level, f"level {s.level}")
        head = Text.assemble((f"#{s.index} ", "dim"), (_clip(_title(s, label=True)), "bold"),
                             f"  at {level}", (f"  [{s.phase}]" if self.phased else "", "dim"))
        if s.kind not in ("primitive",):
            head.append(f"  ({s.kind})", style="dim")
        parts: list[RenderableType] = [head]
        if s.error:
            parts.append(Text(f"✗ {_clip(shorten_paths(s.error), 2000)}", style="bold red"))
        if s.library:  # read as its operation; what it is, one line down
            parts.append(Text(f"{_clip(_title(s))}: a jit of JAX's own function, one step "
                              "(its body in the params and the Stages pane)", style="dim"))
        if s.name_stack:
            parts.append(Text(f"name stack: {_clip(s.name_stack)}"
                              + (f"  (in {_clip(s.scope)})" if s.scope else ""), style="dim"))
        if s.module:  # an nnx or equinox model's module, read from the stack
            parts.append(Text(f"module: {_clip(s.module)}", style="dim"))
        parts.append(self._links())
        if s.params:
            parts.append(_params(s))
        for label, values in (("inputs", s.inputs), ("outputs", s.outputs)):
            parts.append(Text(f"{label} ({len(values)})", style="bold underline"))
            if not values:
                parts.append(Text("  none", style="dim"))
            for i, v in enumerate(values[:64]):
                parts.append(TowerView(v, self.labels, name=f"{label[:-1]} {i}")
                             if isinstance(v, ValueRecord) else Text(f"  <{type(v).__name__}>"))
            if len(values) > 64:
                parts.append(Text(f"  … {len(values) - 64} more", style="dim"))
        if self.values:
            parts.append(_values(self.values))
        if s.subjaxprs:
            parts.append(Text("sub-jaxprs", style="bold underline"))
            for j in s.subjaxprs[:16]:
                prims = ", ".join(j.primitives[:12]) + (" …" if len(j.primitives) > 12 else "")
                parts.append(Text(f"  {j.name}: {j.eqn_count} eqns  {prims}"))
                if j.text:
                    parts.append(Text(_clip(j.text, 3000), style="dim"))
        parts.append(Text("source", style="bold underline"))
        parts.append(self.source if self.source is not None else SourceView(s.source, None))
        return Group(*parts)

    def _links(self) -> RenderableType:
        text = Text(style="dim")
        if self.cause is not None:
            text.append(f"caused by #{self.cause.index} {_title(self.cause, label=True)} at "
                        f"{self.labels.get(self.cause.level, self.cause.level)}")
        if self.caused:
            if text:
                text.append("; ")
            shown = ", ".join(f"#{c.index} at {self.labels.get(c.level, c.level)}"
                              for c in self.caused[:4])
            more = f" … +{len(self.caused) - 4}" if len(self.caused) > 4 else ""
            text.append(f"seen next as {shown}{more}")
        return text


def shorten_paths(text: str) -> str:
    """Paths under the working directory written relative to it (JAX's messages name files):
    the one convention for paths in every view, in a message or hint as in a `line` row."""
    return str(text).replace(os.getcwd() + os.sep, "")


def _title(step: Step, label: bool = False) -> str:
    """The step's primitive as jaxprs print it, or (`label`) as the navigator lists it."""
    try:
        return step_label(step) if label else step.title
    except (AttributeError, TypeError, ValueError):  # odd params (not pairs of text)
        return str(step.primitive)


# Equations listed with their values in a step view, at most.
MAX_STEP_VALUES = 16


def _values(values: Sequence[StepValue]) -> RenderableType:
    """The equations the step was staged as (record(values=True)), each with its values."""
    table = Table.grid(padding=(0, 1))
    table.add_column(style="dim", no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column()
    for v in values[:MAX_STEP_VALUES]:
        table.add_row(Text(f"{_clip(v.stage, 60)} #{v.eqn}"), Text(_clip(v.primitive, 60)),
                      Text(f"= {_clip(v.text, 600)}"))
    more = len(values) - MAX_STEP_VALUES
    rows: list[RenderableType] = [Text("values (its equations, evaluated again)",
                                       style="bold underline"), table]
    if more > 0:
        rows.append(Text(f"  … {more} more", style="dim"))
    return Group(*rows)


def _params(step: Step) -> Table:
    table = Table.grid(padding=(0, 1))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    for pair in step.params[:64]:
        key, value = (pair + ("", ""))[:2] if isinstance(pair, tuple) else (pair, "")
        # Text, not str: a table cell's str is parsed as markup ("[/]" raises, "[b]" styles).
        table.add_row(Text(_clip(key, 60)), Text(_clip(value, 600)))
    return table
