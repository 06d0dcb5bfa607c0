"""A rich renderable of a session's jit compiles, per function: each trace with its cost,
the user's line (and its source text, where the reader can show it), the key it was traced
with, and for each retrace why it missed (the difference from the nearest earlier key) and
the fix. The TUI's compiles view shows it.

Reads `transforms.model` only, through workbench.analysis; never crashes its caller.
"""
from __future__ import annotations

from typing import Callable

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.text import Text

from transforms.model import (
    CompileKey,
    CompileRecord,
    Session,
    SourceLocation,
    explain,
    hint,
    jax_says,
)

from .._safe_text import terminal as _t
from .._words import plural
from ..analysis import CompileGroup, compile_groups, compile_totals, short_place

__all__ = ["compiles_view", "key_text"]

SourceLine = Callable[[SourceLocation], "str | None"]
_KEY_LEAVES = 6  # leaves of a key shown before "and N more"


def compiles_view(session: Session, source_line: SourceLine | None = None) -> RenderableType:
    """The whole report: totals, then each function, the most retraced first (jnp's and
    libraries' own jits last)."""
    groups = compile_groups(session)
    if not groups:
        return Text("no jit traced or compiled while this session recorded "
                    "(or it was recorded before compiles were)", style="dim")
    totals = compile_totals(groups)
    spent = (f"{plural(totals.traces, 'trace')}, {plural(totals.compiles, 'compile')}, "
             f"{totals.seconds:.2f} s")
    if totals.retraces or totals.recompiles:
        parts: list[RenderableType] = [Text(
            f"{spent}; your jitted functions {totals.again()}", style="bold")]
    else:  # said first, plainly: a view of first traces only would look like nothing found
        parts = [Text("every jitted function compiled once: nothing recompiled",
                      style="bold green"), Text(spent)]
    ordered = sorted(groups, key=lambda g: (g.internal, -g.retraces, -g.recompiles))
    for group in ordered:
        parts.append(Text(""))
        parts.extend(_group(group, source_line))
    return Group(*parts)


def _group(group: CompileGroup, source_line: SourceLine | None) -> list[RenderableType]:
    label = f"(jax) {group.function}" if group.internal else group.function
    head = Text.assemble((_t(label), "bold cyan"),
                         f"  {plural(group.traces, 'trace')}, "
                         f"{plural(group.compiles, 'compile')}, {group.seconds:.2f} s")
    if group.retraces:
        head.append(f"  traced again {plural(group.retraces, 'time')}", style="bold yellow")
    if group.recompiles:
        head.append(f"  compiled again {plural(group.recompiles, 'time')}", style="bold yellow")
    lines: list[RenderableType] = [head]
    if group.internal:
        lines.append(Text("  jits JAX ran for jnp or a library, called from "
                          f"{_t(short_place(group.location))}", style="dim"))
    for record in group.records:
        lines.extend(_record(record, source_line, named=group.internal))
    return lines


def _detail(text: str, style: str) -> RenderableType:
    """A line under a trace: indented, and so are the lines it wraps to."""
    return Padding(Text(text, style=style), (0, 0, 0, 6))


def _record(record: CompileRecord, source_line: SourceLine | None,
            named: bool = False) -> list[RenderableType]:
    """A trace (or a later lowering or compile): `named` for a folded group's, whose
    records are of several functions."""
    what = "/".join(w for w, done in (("trace", record.traced), ("lower", record.lowered),
                                      ("compile", record.compiled)) if done)
    label = "first trace" if record.traced and record.number == 0 else \
        f"trace #{record.number + 1}" if record.traced else what
    line = Text(f"  {label:<12}", style="yellow" if record.is_miss and not named else "")
    if named:
        line.append(f"{_t(record.function, 40)}  ")
    line.append(f"{_t(short_place(record.location)):<20}")
    line.append(f" {record.seconds:6.3f} s  ({what})", style="dim")
    lines: list[RenderableType] = [line]
    source = source_line(record.location) if source_line and record.location else None
    if source:
        lines.append(_detail(_t(source.strip(), 120), "green"))
    reasons = record.reasons if not named else ()  # a folded group's: no key to explain
    last = {reason.kind: i for i, reason in enumerate(reasons)}
    for i, reason in enumerate(reasons):
        lines.append(_detail(f"why: {_t(explain(reason))}", "bold"))
        if last[reason.kind] != i:  # JAX's words and the fix: once per kind of reason
            continue
        said, fix = jax_says(reason), hint(reason)
        if said:
            lines.append(_detail(f"JAX's explain_cache_misses: {said}", "dim"))
        if fix:
            lines.append(_detail(f"fix: {_t(fix)}", "dim"))
    if record.key is not None and record.number == 0:
        lines.append(_detail(f"key: {_t(key_text(record.key), 400)}", "dim"))
    return lines


def key_text(key: CompileKey) -> str:
    """`batch['x']: float32[32,784], lr: float32[] weak; train=True`: a key as it reads."""
    leaves = [f"{leaf.path}: {leaf.aval}{' weak' if leaf.weak_type else ''}"
              + (f" {leaf.sharding}" if leaf.sharding else "")
              for leaf in key.leaves[:_KEY_LEAVES]]
    if len(key.leaves) > _KEY_LEAVES:
        leaves.append(f"and {len(key.leaves) - _KEY_LEAVES} more")
    statics = [f"{s.name}={s.value}" for s in key.statics]
    return ", ".join(leaves) + ("; " + ", ".join(statics) if statics else "")
