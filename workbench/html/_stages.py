"""Stages as HTML: one stage's program (jaxpr or compiled text, figures), a stage diff aligned
equation by equation, and two stages side by side with their diff below (the rows and their
equations as the terminal's DiffView shows them, workbench/render/stages.py)."""
from __future__ import annotations

from transforms.model import Call, Stage, StageDiff, StageValues, diff_stages

from .._safe_text import first_line
from ..analysis import stage_values, values_text
from ..render.stages import arrow, eqn_text, with_context
from ._blocks import DEFAULT, Budget, badge, details, h, more, pre, table

__all__ = ["diff_html", "stage_body", "stage_html", "stage_pair_html", "stage_summary",
           "values_html"]


def stage_summary(stage: Stage) -> str:
    """The stage's name and what it holds, as one line of HTML (a <summary>)."""
    name = f"<code>{h(stage.name)}</code>"
    if not stage.available:
        return f"{name} {badge('unavailable', 'failed')} {h(first_line(stage.reason), 200)}"
    if stage.jaxpr is not None:
        what = f"{stage.jaxpr.eqn_count:,} equations"
    elif stage.text is not None:
        what = f"{stage.text.count(chr(10)) + 1:,} lines"
    else:
        what = ", ".join(f"{h(m.name)}={m.value:g}" for m in stage.metrics[:3])
    title = f' <span class="dim">{h(stage.title, 200)}</span>' if stage.title else ""
    return f"{name} {what}{title}"


def stage_body(stage: Stage, budget: Budget = DEFAULT, call: Call | None = None) -> str:
    """What a stage holds: how JAX made it, its note, its program text, its figures, and
    with the call recorded with values, each equation's values."""
    parts = []
    if stage.method:
        parts.append(f'<p class="dim">{h(stage.method)}</p>')
    if stage.note:
        parts.append(f'<p class="changed">{h(stage.note)}</p>')
    if not stage.available:
        parts.append(pre(stage.reason, budget.stage_lines, budget.line_chars))
        return "".join(parts)
    text = stage.jaxpr.text if stage.jaxpr is not None else stage.text
    if text:
        parts.append(pre(text, budget.stage_lines, budget.line_chars))
    elif stage.jaxpr is not None:
        parts.append('<p class="dim">(its text was not kept)</p>')
    if stage.metrics:
        parts.append(table(["figure", "value"],
                           ((h(m.name), f"{m.value:,}") for m in stage.metrics)))
    if stage.histogram:
        bars = ", ".join(f"{h(b.primitive)} ×{b.count}" for b in stage.histogram[:12])
        parts.append(f'<p class="dim">primitives: {bars}</p>')
    values = stage_values(call, stage.name) if call is not None else None
    if values is not None:
        parts.append(values_html(stage, values, budget))
    return "".join(parts)


def values_html(stage: Stage, values: StageValues, budget: Budget = DEFAULT) -> str:
    """Each equation with its outputs' values (record(values=True)), or why there are none."""
    if not values.outputs:
        return f'<p class="dim">values: {h(values.note or "none")}</p>'
    note = f" ({h(values.note)})" if values.note else ""
    rows = [(str(i), h(eqn_text(eqn)), h(values_text(outs), budget.line_chars))
            for i, (eqn, outs) in enumerate(zip(stage.eqns, values.outputs[:budget.stage_lines]))]
    return (f'<p class="dim">values, each equation evaluated again{note}</p>'
            + table(["#", "equation", "values"], rows)
            + more(len(values.outputs) - budget.stage_lines, "equation"))


def stage_html(stage: Stage, budget: Budget = DEFAULT, *, opened: bool = False,
               call: Call | None = None) -> str:
    return details(stage_summary(stage), stage_body(stage, budget, call), opened=opened)


def diff_html(diff: StageDiff, before: Stage | None = None, after: Stage | None = None,
              budget: Budget = DEFAULT) -> str:
    """The alignment: counts, how avals changed, primitives whose count changed, and the rows
    (equations shown when the two stages are given; long unchanged runs folded)."""
    head = [f"<p><code>{h(diff.before)}</code> → <code>{h(diff.after)}</code>: "
            f"{h(diff.summary())}</p>",
            f"<p>in: {h(arrow(*diff.in_avals))}<br>out: {h(arrow(*diff.out_avals))}</p>"]
    if diff.aval_changes:
        head.append(table(["before", "after", "values", ""], (
            (h(c.before), h(c.after), str(c.count), h(c.note)) for c in diff.aval_changes[:20])))
    if diff.primitives:
        head.append('<p>primitives: ' + ", ".join(
            f"{h(p.primitive)} {p.before} → {p.after}" for p in diff.primitives[:30]) + "</p>")
    if not diff.exact:
        head.append('<p class="dim">(coarse alignment: the stages are too large for an exact '
                    'one)</p>')
    return "".join(head) + _rows(diff, before, after, budget)


def _eqn(stage: Stage | None, index: int | None) -> str:
    if index is None:
        return ""
    if stage is None or not 0 <= index < len(stage.eqns):
        return f"#{index}"
    return h(eqn_text(stage.eqns[index]))


def _rows(diff: StageDiff, before: Stage | None, after: Stage | None, budget: Budget) -> str:
    rows, kinds = [], []
    shown = with_context(diff.rows, 2)
    for row in shown[:budget.diff_rows]:
        if isinstance(row, int):
            rows.append(("", f'<span class="dim">… {row:,} unchanged</span>', "", "", ""))
            kinds.append("")
            continue
        details_text = "".join(f'<br><span class="dim">{h(d)}</span>' for d in row.details)
        rows.append(("" if row.before is None else str(row.before), _eqn(before, row.before),
                     h({"same": "", "changed": "~", "added": "+", "removed": "-"}[row.kind]),
                     "" if row.after is None else str(row.after),
                     _eqn(after, row.after) + details_text))
        kinds.append(row.kind)
    return (table(["#", h(diff.before), "", "#", h(diff.after)], rows, kinds)
            + more(len(shown) - budget.diff_rows, "row"))


def stage_pair_html(before: Stage, after: Stage, budget: Budget = DEFAULT,
                    call: Call | None = None) -> str:
    """Before and after side by side, the diff below."""
    side = (f'<div class="side"><div>{stage_html(before, budget, opened=True, call=call)}'
            f'</div><div>{stage_html(after, budget, opened=True, call=call)}</div></div>')
    try:
        diff = diff_html(diff_stages(before, after), before, after, budget)
    except ValueError as e:  # a stage without a jaxpr: said in place of the diff
        diff = f'<p class="dim">{h(e)}</p>'
    return side + diff
