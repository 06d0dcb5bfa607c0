"""The failure view: what failed, at which level and step, the user's line, and a hint.

Uses `workbench.render.failure` when it is there; otherwise a plain account of
each ErrorRecord with a short hint for the errors JAX users meet most.
"""
from __future__ import annotations

import importlib

from rich.console import Group, RenderableType
from rich.text import Text
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from transforms.model import Call, ErrorRecord

from ....render.diagnostics import DiagnosticsView, lost_diagnostics
from ....render.step import SourceView, shorten_paths
from ...guard import Guarded, guarded
from ...messages import FailureChosen
from ...navigation import (
    CallIndex,
    Outline,
    Selection,
    composed_label,
    session_ending,
    source_context,
    step_title,
)
from ..common.selection_view import SelectionView, call_changed

# A last resort when workbench.render.failure is absent: the fix for the common ones.
_HINTS = {
    "TracerBoolConversionError": "a traced value decided a Python `if`/`while`: use jnp.where, "
                                 "lax.cond or lax.while_loop, or mark the argument static",
    "ConcretizationTypeError": "a concrete value was needed from a tracer: use lax control "
                               "flow, or static_argnums for values that fix shapes",
    "TracerIntegerConversionError": "a tracer was used as a Python int (an index or a size): "
                                    "use lax.dynamic_slice or a static argument",
    "UnexpectedTracerError": "a tracer escaped its transformation (kept in a global or a "
                             "closure): return values instead of storing them",
}


class FailurePane(VerticalScroll, SelectionView, can_focus=True):
    VIEW = "failure"
    BINDINGS = [Binding("enter", "jump", "Go to failing step")]
    DEFAULT_CSS = """
    FailurePane { padding: 0 1; }
    """

    def __init__(self, outline: Outline, **kwargs) -> None:
        super().__init__(**kwargs)
        self.outline = outline
        self.call_index = -1
        self.call: Call | None = None

    depends_on = staticmethod(call_changed)

    def show_selection(self, selection: Selection) -> None:
        outline, c = self.outline, selection.call
        failing = tuple((call.index, outline.call_label(i))
                        for i, call in enumerate(outline.session.calls)
                        if call.errors or call.nonfinite)
        self.show(c, outline.session.calls[c], outline.index(c), outline.call_label(c), failing,
                  session_ending(outline.session))

    def compose(self):
        yield Static(id="failure-body")

    def show(self, call_index: int, call: Call, index: CallIndex, label: str = "",
             failing: tuple[tuple[int, str], ...] = (), ending: str = "") -> None:
        """`failing`: (index, label) of the session's calls that failed, to point at;
        `ending`: how the run ended when it died (texts.session_ending), said first."""
        self.call_index, self.call = call_index, call
        self.query_one("#failure-body", Static).update(
            guarded(lambda: failure_view(call, index, label, failing, ending), "failure"))

    def action_jump(self) -> None:
        if self.call is not None and self.call.errors:
            self.post_message(FailureChosen(self.call_index, 0))


def failure_view(call: Call, index: CallIndex, label: str = "",
                 failing: tuple[tuple[int, str], ...] = (), ending: str = "") -> RenderableType:
    view = _failure_view(call, index, label, failing, bool(ending))
    if ending:  # the run's own failure, whichever call is selected
        view = Group(Text(ending, style="bold red"), Text(""), view)
    lost = lost_diagnostics(call)
    if not lost:
        return view
    return Group(view, Text(""), Text("The recorder could not record all of this call:",
                                      style="bold red"), DiagnosticsView(lost))


def _failure_view(call: Call, index: CallIndex, label: str,
                  failing: tuple[tuple[int, str], ...], died: bool = False) -> RenderableType:
    if not call.errors and call.nonfinite:
        return _nonfinite_view(call, index, label)
    if not call.errors:
        text = Text(f"{label or composed_label(call)} ran without error.",
                    style="green")
        if not failing and died:
            text.append("\nNo call that finished failed: how the run ended is said above.",
                        style="dim")
        elif not failing:
            text.append("\nNo call of this session failed: nothing to show here.", style="dim")
        else:
            names = ", ".join(f"{i} {name}" for i, name in failing[:6])
            text.append(f"\nFailed: call{'s' if len(failing) > 1 else ''} {names} "
                        f"(x goes to the next failing step).", style="dim")
        return text
    parts: list[RenderableType] = []
    for n, error in enumerate(call.errors):
        panel = _external(error, call)
        if panel is None:
            parts.append(_plain(error, call, index, n))
        else:  # the panel, then the user's line with its context
            source = source_context(error.source, roots=index.source_roots)
            parts += [panel, SourceView(error.source, source), Text("")]
    parts.append(Text("x: go to the next failing step (or enter, with this view focused)",
                      style="dim"))
    return Group(*parts)


def _nonfinite_view(call: Call, index: CallIndex, label: str) -> RenderableType:
    """record(find_nans=True): the call returned a NaN or Inf; where it came from."""
    from ....render.failure import NonFinitePanel
    parts: list[RenderableType] = [Text(
        f"{label or f'{call.transform}({call.function})'} returned a NaN or Inf. Replayed "
        f"equation by equation after the call, on copies of its inputs:", style="bold yellow")]
    for finding in call.nonfinite:
        parts.append(Guarded(NonFinitePanel(finding), "nonfinite"))
        if finding.source is not None:
            source = source_context(finding.source, roots=index.source_roots)
            parts.append(SourceView(finding.source, source))
        parts.append(Text(""))
    return Group(*parts)


def _external(error: ErrorRecord, call: Call) -> RenderableType | None:
    try:
        module = importlib.import_module("workbench.render.failure")
    except ImportError:
        return None
    cls = getattr(module, "FailurePanel", None)
    return Guarded(cls(error, call), "failure") if cls is not None else None


def hint_for(error: ErrorRecord) -> str | None:
    name = error.type_name.rsplit(".", 1)[-1]
    return _HINTS.get(name)


def _plain(error: ErrorRecord, call: Call, index: CallIndex, n: int) -> RenderableType:
    parts: list[RenderableType] = [
        Text.assemble((f"✗ {error.type_name}", "bold red")),
        Text(shorten_paths(error.message[:4000])),
    ]
    where = Text("at ", style="dim")
    where.append(index.label(error.level) if error.level is not None else "no level", style="bold")
    pos = index.step_position(error.step)
    if pos is not None:
        step = call.steps[pos]
        where.append(f", step #{step.index} {step_title(step)}")
    parts.append(where)
    parts.append(SourceView(error.source, source_context(error.source, roots=index.source_roots)))
    hint = hint_for(error)
    if hint:
        parts.append(Text.assemble(("hint: ", "bold green"), hint))
    parts.append(Text(""))
    return Group(*parts)
