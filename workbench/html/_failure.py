"""A failure as HTML: what JAX raised, where, at which transformation's tracer, and the fix
(the facts the terminal's FailurePanel shows: workbench/render/failure.py's failure_facts)."""
from __future__ import annotations

from transforms.model import Call, Diagnostic, ErrorRecord

from .._safe_text import first_line
from ..render.failure import failure_facts
from ._blocks import DEFAULT, Budget, h, pre, table
from ._trees import pair_html

__all__ = ["diagnostics_html", "failure_html"]


def failure_html(error: ErrorRecord, call: Call | None = None, budget: Budget = DEFAULT) -> str:
    """The failure, explained: its facts, the hint, a structure mismatch's two trees, and the
    whole message folded."""
    name = error.type_name.rsplit(".", 1)[-1]
    rule = f' <span class="dim">[{h(error.rule)}]</span>' if error.rule else ""
    rows = [(f"<b>{h(k)}</b>", h(v or "(no message)", budget.line_chars))
            for k, v in failure_facts(error, call)]
    if error.hint:
        rows.append(("<b>hint</b>", f'<span class="hint">{h(error.hint, budget.line_chars)}</span>'))
    body = f'<h4 class="failed">{h(name)}{rule}</h4>' + table(["", ""], rows)
    if error.mismatch is not None:
        body += pair_html(error.mismatch, budget)
    if "\n" in error.message.strip():
        body += "<details><summary>the whole message</summary>"
        body += pre(error.message, budget.stage_lines, budget.line_chars) + "</details>"
    return f'<div class="failure">{body}</div>'


def diagnostics_html(diagnostics: tuple[Diagnostic, ...], budget: Budget = DEFAULT) -> str:
    """The pre-trace check's findings, and what the recorder could not record ("internal")."""
    rows = [(h(d.kind), h(d.node_type), h(d.path), h(first_line(d.message), budget.line_chars))
            for d in diagnostics]
    return table(["kind", "type", "at", "message"], rows) if rows else ""
