"""`workbench show`'s table of jit compiles: per function, its call site, traces, compiles,
seconds, and why it traced again, with the fix."""
from __future__ import annotations

from transforms.model import Session

from .._safe_text import terminal as _t
from .._words import plural
from ..analysis import compile_groups, compile_totals, reason_lines, short_place

__all__ = ["compile_lines"]

_HEAD = ("function", "call site", "traces", "compiles", "seconds")


def compile_lines(session: Session) -> list[str]:
    """The table; no lines for a session where no jit of the user's traced (older dumps too:
    eager jnp's own compiles alone are no reason for it, as for the TUI's compiles view)."""
    groups = compile_groups(session)
    if all(g.internal for g in groups):
        return []
    totals = compile_totals(groups)
    lines = [f"jit compiles: {plural(totals.traces, 'trace')}, "
             f"{plural(totals.compiles, 'compile')}, {totals.seconds:.2f} s; "
             f"your jitted functions {totals.again()}"]
    rows = [(_t(_label(g.function, g.internal)), _t(short_place(g.location)), str(g.traces),
             str(g.compiles), f"{g.seconds:.2f}") for g in groups]
    widths = [min(40, max(len(h), *(len(r[i]) for r in rows))) for i, h in enumerate(_HEAD)]
    lines.append("  " + _row(_HEAD, widths) + "  why again")
    for group, row in zip(groups, rows):
        lines.append(("  " + _row(row, widths)).rstrip())
        for text, fix, count in reason_lines(group):
            times = f" (×{count})" if count > 1 else ""
            lines.append(f"      {_t(text)}{times}")
            if fix:
                lines.append(f"        fix: {_t(fix)}")
    return lines


def _label(function: str, internal: bool) -> str:
    return f"(jax) {function}" if internal else function


def _row(cells: tuple[str, ...], widths: list[int]) -> str:
    left = [f"{_cut(c, w):<{w}}" for c, w in zip(cells[:2], widths)]
    right = [f"{c:>{w}}" for c, w in zip(cells[2:], widths[2:])]
    return "  ".join(left + right)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"
