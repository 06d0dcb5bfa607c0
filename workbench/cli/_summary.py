"""Plain-text summaries of a recorded call, as `workbench show` prints them: its levels
nested by parent with their step counts, its steps, its errors and diagnostics, its stages."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from transforms.model import Call, Step, level_rows

from .._safe_text import first_line as _first_line, terminal as _t
from .._words import plural
from ..analysis import (
    ScopeRun,
    call_label,
    level_note,
    level_title,
    no_stages_reason,
    phased,
    scope_runs,
    scope_totals,
    step_label,
    steps_by_level,
    values_text,
)
from ..render.stages import eqn_text

__all__ = ["MAX_INDENT", "stage_lines", "summarize_call"]


def stage_lines(call: Call, first_with: dict[int, int] | None = None) -> list[str]:
    """Each stage with its equation count (or what it holds, or why it is missing).

    Calls that share a signature share one stages tuple: after the first, one line.
    """
    if not call.stages:
        return [f"  stages: none ({no_stages_reason(call)})"]
    if first_with is not None:
        first = first_with.setdefault(id(call.stages), call.index)
        if first != call.index:
            return [f"  stages: {len(call.stages)}, shared with call {first} (same signature)"]
    width = min(36, max(len(s.name) for s in call.stages))
    lines = [f"  stages: {len(call.stages)}"]
    for s in call.stages:
        lines.append(f"    {s.name:<{width}}  {_stage_summary(s)}")
    notes = dict.fromkeys(s.note for s in call.stages if s.note)
    lines.extend(f"    note: {note}" for note in notes)
    return lines


def _stage_summary(stage: Any) -> str:
    if not stage.available:
        reason = (stage.reason or "unavailable").splitlines()[0]
        return "unavailable: " + (reason if len(reason) <= 100 else reason[:99] + "…")
    if stage.jaxpr is not None:
        return f"{stage.jaxpr.eqn_count} eqns"
    if stage.text is not None:
        collectives = f", {len(stage.collectives)} collectives" if stage.collectives else ""
        return f"{stage.text.count(chr(10)) + 1} lines{collectives}"
    if stage.metrics:
        return ", ".join(f"{m.name}={m.value:g}" for m in stage.metrics[:3])
    return ""


def summarize_call(call: Call, with_steps: bool = False, expand: bool = False) -> list[str]:
    """Plain-text lines describing one call: its levels, step counts and errors."""
    status = "ok" if call.ok else "FAILED"
    missing = sum(1 for stage in call.stages if not stage.available)
    if call.ok and missing:  # the call ran, but not every stage was captured: say so here
        status += f"; {missing} of {plural(len(call.stages), 'stage')} unavailable"
    where = f" at {_t(call.source)}" if call.source else ""
    if call.thread and call.thread != "MainThread":
        where += f" in thread {_t(call.thread)}"
    lines = [f"call {call.index}: {call_label(call, _t)}{where}  [{status}]"]
    by_level = steps_by_level(call)
    with_phase = with_steps and phased(call)
    # Levels nest by parent (a root at its own depth: jit#1 below where eval#0 would be);
    # runs of identical sibling levels are one row (`expand`: each).
    base = 0
    for row in level_rows(call, range(len(call.levels)) if expand else ()):
        level = call.levels[row.position]
        if row.depth == 0:
            base = max(level.depth, 0)
        depth = base + row.depth
        runs = scope_runs(call.steps, by_level.get(level.index, ()))
        count = sum(len(run.positions) for run in runs)
        repeats = f"  ×{row.repeats} identical levels" if row.folded else ""
        note = level_note(call, level, _t)
        lines.append(f"  {_indent(depth)}{level_title(call, level, _t)}  {_t(level.trace_type)}"
                     f"  {plural(count, 'step')}{repeats}{f' ({note})' if note else ''}")
        if with_steps:
            lines.extend(_step_lines(call.steps, runs, depth, with_phase))
        else:  # the modules and named scopes its steps ran in (flax's MLP/Dense_0)
            lines.extend(f"  {_indent(depth + 1)}in {_t(scope)}  {plural(n, 'step')}"
                         for scope, n in scope_totals(runs))
    lines.extend(value_lines(call))
    for finding in call.nonfinite:  # record(find_nans=True): where its NaN or Inf came from
        lines.extend(f"  {_t(line)}" for line in finding.lines())
    lines.extend(equation_value_lines(call, with_steps))
    for error in call.errors:
        at = f" at step {error.step}" if error.step is not None else ""
        message = _first_line(error.message) or "(no message)"
        lines.append(f"  error{at}: {_t(error.type_name)}: {message}")
    # NB: the pre-trace check's findings, and what the recorder could not record ("internal")
    for d in call.diagnostics:
        where = f" at {_t(d.path)}" if d.path else ""
        lines.append(f"  diagnostic {_t(d.kind)}{where}: {_first_line(d.message)}")
    return lines


# Leaves whose values `show` prints, per tree (then a count of the others).
MAX_VALUE_LEAVES = 8


def value_lines(call: Call) -> list[str]:
    """The concrete values of the call's arguments and results (a jit's too), leaf by leaf:
    NumPy's print when small, statistics with NaN, Inf and zero counts otherwise."""
    lines = []
    for tree in call.trees:
        shown = [n for n in tree.leaves if n.summary is not None]
        for node in shown[:MAX_VALUE_LEAVES]:
            assert node.summary is not None  # filtered above
            origin = f" ({node.summary.origin})" if node.summary.origin else ""
            lines.append(f"  {_t(tree.role)} {_t(tree.full_path(node))}: {_t(node.aval)} = "
                         f"{_clip(_t(node.summary.describe()))}{origin}")
        if len(shown) > MAX_VALUE_LEAVES:
            lines.append(f"  {_t(tree.role)} {_t(tree.name)}: "
                         f"{len(shown) - MAX_VALUE_LEAVES} more leaves with values")
    return lines


def equation_value_lines(call: Call, each: bool) -> list[str]:
    """record(values=True): the stages evaluated after the call; with `each` (`--steps`),
    every equation with its outputs' values. Stages not evaluated for one reason share a
    line, where the first of them was."""
    lines: list[str | list[str]] = []
    unevaluated: dict[str, list[str]] = {}  # why: its stages (a list placed in `lines`)
    for values in call.values:
        stage = next((s for s in call.stages if s.name == values.stage), None)
        if not values.outputs:  # not evaluated
            if values.note not in unevaluated:
                unevaluated[values.note] = []
                lines.append(unevaluated[values.note])
            unevaluated[values.note].append(values.stage)
            continue
        note = f" ({_t(values.note)})" if values.note else ""
        lines.append(f"  values of {_t(values.stage)}: {len(values.outputs)} equations{note}")
        if not each or stage is None:
            continue
        for i, (eqn, outs) in enumerate(zip(stage.eqns, values.outputs)):
            lines.append(f"    {i} {_t(eqn_text(eqn))} = {_clip(_t(values_text(outs)))}")
    why = {id(stages): note for note, stages in unevaluated.items()}
    return [line if isinstance(line, str) else
            f"{_unevaluated_line(line)}: {_t(why[id(line)]) or 'none'}" for line in lines]


def _unevaluated_line(stages: list[str]) -> str:
    return f"  values of {', '.join(_t(s) for s in stages)}"


def _clip(text: str, width: int = 160) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


# Levels nest at most this deep on screen; a dump's depth is only checked to be sane.
MAX_INDENT = 20


def _indent(depth: int) -> str:
    return "  " * min(depth, MAX_INDENT)


def _step_lines(steps: Sequence[Step], runs: list[ScopeRun], depth: int,
                with_phase: bool) -> list[str]:
    """Each step of a level; a run of steps in a module or named scope under its path."""
    lines = []
    for run in runs:
        pad = "  " + _indent(depth + 1)
        if run.scope:
            lines.append(f"{pad}in {_t(run.scope)}:")
            pad += "  "
        for pos in run.positions:
            step = steps[pos]
            ins = ", ".join(v.describe() for v in step.inputs)
            outs = ", ".join(v.describe() for v in step.outputs)
            phase = f" [{_t(step.phase)}]" if with_phase else ""
            lines.append(f"{pad}#{step.index} {_t(step_label(step))}{phase} ({_t(ins)}) -> "
                         f"({_t(outs)})")
    return lines
