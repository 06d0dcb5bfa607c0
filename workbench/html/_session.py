"""A session as HTML: what was recorded, a table of its calls (levels, steps, failures), and
the first calls' whole views folded; a multi-process run, process by process."""
from __future__ import annotations

from transforms.model import Call, Session

from .._words import plural
from ..analysis import process_label, process_sessions
from ._blocks import DEFAULT, Budget, details, h, more, table
from ._call import call_head, call_html, call_label, call_status

__all__ = ["session_html"]


def _call_row(call: Call) -> tuple[str, ...]:
    return (str(call.index), call_label(call), f"{len(call.levels):,}", f"{len(call.steps):,}",
            f"{len(call.stages):,}", call_status(call))


def _calls(session: Session, budget: Budget) -> str:
    calls = session.calls
    rows = [_call_row(c) for c in calls[:budget.calls_listed]]
    parts = [table(["call", "function", "levels", "steps", "stages", "status"], rows),
             more(len(calls) - budget.calls_listed, "call")]
    graphs = budget.graphs
    first_failed = next((c.index for c in calls if not c.ok), None)
    for call in calls[:budget.calls_detailed]:
        drawn = graphs > 0 and any(s.jaxpr is not None for s in call.stages)
        graphs -= drawn
        # A short session opens its calls; a longer one its first failure.
        opened = len(calls) <= 2 or call.index == first_failed
        parts.append(details(call_head(call), call_html(call, budget, graph=drawn,
                                                        heading=False), opened=opened))
    parts.append(more(len(calls) - budget.calls_detailed, "call", " in detail"))
    return "".join(parts)


def _header(session: Session) -> str:
    title = h(session.title) if session.title else "session"
    facts = [plural(len(session.calls), "call"), plural(session.step_count, "step")]
    if session.jax_version:
        facts.append(f"jax {h(session.jax_version)}")
    failed = sum(not c.ok for c in session.calls)
    if failed:
        facts.append(f'<span class="failed">{failed:,} failed</span>')
    parts = [f"<h3>{title}</h3>", f'<p class="dim">{", ".join(facts)}</p>']
    description = session.metadata.get("description", "")
    if description:
        parts.append(f"<p>{h(description, 4000)}</p>")
    if session.dropped_calls:
        parts.append(f'<p class="changed">{h(session.dropped_note())}</p>')
    return "".join(parts)


def session_html(session: Session, budget: Budget = DEFAULT) -> str:
    """The session; a merged multi-process run shows each process as a session of its own."""
    if not session.processes:
        return _header(session) + _calls(session, budget)
    parts = [_header(session)]
    for i, one in enumerate(process_sessions(session)):
        label = h(process_label(one.process) or f"process {i}")
        parts.append(details(label, _calls(one, budget), opened=i == 0))
    return "".join(parts)
