"""The plain-text fallback of each view (a console, a notebook asked for text/plain): short,
bounded, and drawn by the terminal's own renderables where there is one (workbench/render)."""
from __future__ import annotations

import io

from rich.console import Console, RenderableType

from transforms.model import Call, ErrorRecord, Session, Stage, StageDiff, TreePair

from .._safe_text import first_line, terminal
from .._words import plural
from ..analysis import call_label
from ..render import StageView
from ..render.failure import FailurePanel
from ..render.pytree import PairView

__all__ = ["call_text", "record_text", "session_text"]

LISTED_CALLS = 20


def _rendered(renderable: RenderableType) -> str:
    out = io.StringIO()
    # force_jupyter=False: in a kernel rich would display it as a cell output, not write it.
    Console(file=out, width=100, color_system=None, force_terminal=False,
            force_jupyter=False).print(renderable)
    return out.getvalue().rstrip("\n")


def call_text(call: Call) -> str:
    status = "ok" if call.ok else "FAILED"
    line = (f"call {call.index}: {call_label(call, terminal)}  [{status}]  "
            f"{plural(len(call.levels), 'level')}, {plural(len(call.steps), 'step')}, "
            f"{plural(len(call.stages), 'stage')}")
    errors = [f"  {terminal(e.type_name)}: {first_line(e.message, 200)}" for e in call.errors]
    return "\n".join([line, *errors])


def session_text(session: Session) -> str:
    head = (f"Session {terminal(session.title)!s}: " if session.title else "Session: ") + \
        f"{plural(len(session.calls), 'call')}, {plural(session.step_count, 'step')}"
    lines = [head, *(call_text(c) for c in session.calls[:LISTED_CALLS])]
    if len(session.calls) > LISTED_CALLS:
        lines.append(f"… {plural(len(session.calls) - LISTED_CALLS, 'more call')}")
    if session.processes:
        lines.append(plural(len(session.processes), "process", "processes"))
    return "\n".join(lines)


def record_text(record: object) -> str | None:
    """The text of a record the HTML views show; None for any other."""
    if isinstance(record, Session):
        return session_text(record)
    if isinstance(record, Call):
        return call_text(record)
    if isinstance(record, Stage):
        return _rendered(StageView(record, max_lines=40, stats=False))
    if isinstance(record, StageDiff):
        return f"{terminal(record.before)} -> {terminal(record.after)}: {record.summary()}"
    if isinstance(record, TreePair):
        return _rendered(PairView(record))
    if isinstance(record, ErrorRecord):
        return _rendered(FailurePanel(record))
    return None
