"""A call as HTML: its composition and status, its explained failures, its levels and steps,
its stages (the default pair side by side with their diff, every stage folded), its jaxpr
graph as inline SVG, and its pytrees with their values."""
from __future__ import annotations

from transforms.model import Call, Step, level_rows

from .._safe_text import terminal
from ..analysis import call_label as label_of, default_stage_pair, failing_steps, step_label, steps_by_level
from ..render.step import shorten_paths
from ._blocks import DEFAULT, Budget, badge, details, h, more, table
from ._failure import diagnostics_html, failure_html
from ._graph import graph_html
from ._stages import stage_html, stage_pair_html
from ._trees import pair_html, tree_html

__all__ = ["call_head", "call_html", "call_label", "call_status"]


def call_status(call: Call) -> str:
    if call.ok:
        return badge("ok", "ok")
    return badge("failed: " + h(call.errors[0].type_name.rsplit(".", 1)[-1]), "failed")


def call_label(call: Call) -> str:
    """`vmap(grad(f))`, as code."""
    # Each recorded name made safe and cut on its own: a long name is cut, not the label.
    return f"<code>{h(label_of(call, terminal))}</code>"


def call_head(call: Call) -> str:
    """`grad(f)` with its status and where it was called, as one line of HTML."""
    where = f' <span class="dim">at {h(shorten_paths(str(call.source)))}</span>' \
        if call.source else ""
    return f"<b>call {call.index}</b> {call_label(call)} {call_status(call)}{where}"


def call_html(call: Call, budget: Budget = DEFAULT, *, graph: bool = True,
              heading: bool = True) -> str:
    """The whole call; `graph=False` leaves Graphviz out (a session draws only a few),
    `heading=False` its title (a session's fold shows it)."""
    by_level = steps_by_level(call)
    parts = [f"<h3>{call_head(call)}</h3>" if heading else "",
             f'<p class="dim">{len(call.levels):,} levels, {len(call.steps):,} steps, '
             f"{len(call.stages):,} stages</p>"]
    parts += [failure_html(e, call, budget) for e in call.errors[:budget.failures]]
    parts.append(more(len(call.errors) - budget.failures, "failure"))
    parts.append(details("levels", _levels(call, by_level, budget), opened=True))
    if call.steps:
        parts.append(details(f"steps ({len(call.steps):,})", _steps(call, budget)))
    if call.stages:
        parts.append(details("stages", _stages(call, budget), opened=True))
    drawn = graph_html(call, budget) if graph else ""
    if drawn:
        parts.append(details("jaxpr graph", drawn, opened=True))
    trees = _trees(call, budget)
    if trees:
        parts.append(details("pytrees", trees, opened=True))
    return "".join(parts)


def _levels(call: Call, by_level: dict, budget: Budget) -> str:
    rows = []
    listed = level_rows(call)
    for row in listed[:budget.levels]:
        level = call.levels[row.position]
        repeats = f" ×{row.repeats} identical" if row.folded else ""
        label = f'<span style="padding-left:{min(row.depth, 20)}em">{h(level.label)}</span>'
        count = len(by_level.get(level.index, ()))
        rows.append((label, h(level.trace_type), h(level.function), f"{count:,}{repeats}"))
    return table(["level", "trace", "function", "steps"], rows) \
        + more(len(listed) - budget.levels, "level")


def _step_row(step: Step, call: Call, failed: set[int], budget: Budget) -> tuple[str, ...]:
    level = call.levels[step.level].label if 0 <= step.level < len(call.levels) else "?"
    ins = ", ".join(v.describe() for v in step.inputs)
    outs = ", ".join(v.describe() for v in step.outputs)
    mark = ' <span class="failed">failed</span>' if step.index in failed else ""
    return (str(step.index), h(level), h(step_label(step)) + mark, h(step.phase),
            h(ins, budget.line_chars), h(outs, budget.line_chars))


def _steps(call: Call, budget: Budget) -> str:
    failed = failing_steps(call)
    rows = [_step_row(s, call, failed, budget) for s in call.steps[:budget.steps]]
    return table(["#", "level", "primitive", "phase", "inputs", "outputs"], rows) \
        + more(len(call.steps) - budget.steps, "step")


def _stages(call: Call, budget: Budget) -> str:
    before, after = default_stage_pair(call.stages)
    parts = []
    # Two stages side by side with their diff; where either is missing the list says why.
    if before != after and call.stages[before].available and call.stages[after].available:
        pair = stage_pair_html(call.stages[before], call.stages[after], budget, call)
        title = (f"<code>{h(call.stages[before].name)}</code> against "
                 f"<code>{h(call.stages[after].name)}</code>")
        parts.append(details(title, pair, opened=True))
    shown = call.stages[:budget.stages]
    parts.append(details(f"all {len(call.stages)} stages",
                         "".join(stage_html(s, budget, call=call) for s in shown)
                         + more(len(call.stages) - len(shown), "stage")))
    return "".join(parts)


def _trees(call: Call, budget: Budget) -> str:
    """Each pair (an input and its gradient), the trees in no pair, the check's findings."""
    paired = {(t.role, t.name) for p in call.pairs for t in (p.left, p.right)}
    parts = [pair_html(p, budget) for p in call.pairs]
    parts += [tree_html(t, budget) for t in call.trees if (t.role, t.name) not in paired]
    shown = parts[:budget.trees]
    shown.append(more(len(parts) - budget.trees, "pytree"))
    parts = shown
    if call.diagnostics:
        parts.append(details("diagnostics", diagnostics_html(call.diagnostics, budget),
                             opened=True))
    return "".join(parts)
