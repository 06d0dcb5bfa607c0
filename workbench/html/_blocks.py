"""The HTML pieces every view is made of: folding (<details>), tables, preformatted text, and
what a bounded view says it left out. Every recorded string reaches the page through `h`
(workbench/_safe_text.py); the markup here is our own."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from .._safe_text import html as h
from .._words import plural

__all__ = ["DEFAULT", "Budget", "badge", "details", "h", "more", "pre", "table"]


@dataclass(frozen=True)
class Budget:
    """How much one view shows: enough to read, bounded so that a session of a million steps
    stays a page a browser opens (bench/bench_html.py)."""
    calls_listed: int = 200       # rows of a session's call table
    calls_detailed: int = 10      # calls whose whole view a session holds (folded)
    graphs: int = 3               # inline SVG graphs in one page (each runs Graphviz)
    graph_nodes: int = 120        # nodes of one graph: the rest folded into group nodes
    graph_seconds: float = 10.0   # Graphviz's time for one graph
    levels: int = 100             # rows of a call's level table
    steps: int = 100              # steps listed per call
    stages: int = 40              # stages of a call shown
    stage_lines: int = 300        # lines of one stage's program text
    diff_rows: int = 300          # rows of a stage diff
    tree_rows: int = 300          # rows of a pytree or a pair
    line_chars: int = 400         # characters of one line of text
    trees: int = 20               # pytrees (and pairs) of a call
    failures: int = 10            # failures of a call explained


DEFAULT = Budget()


def details(summary: str, body: str, *, opened: bool = False, cls: str = "") -> str:
    """A folding block; `summary` and `body` are HTML already."""
    attrs = (" open" if opened else "") + (f' class="{cls}"' if cls else "")
    return f"<details{attrs}><summary>{summary}</summary>{body}</details>"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]],
          kinds: Sequence[str] | None = None) -> str:
    """A table; headers and cells are HTML already. `kinds`: each row's status (added,
    differs ...), a class the stylesheet colours."""
    head = "".join(f"<th>{x}</th>" for x in headers)
    body = "".join(_row(row, kinds[i] if kinds is not None else "")
                   for i, row in enumerate(rows))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _row(cells: Sequence[str], kind: str) -> str:
    cls = f' class="{h(kind)}"' if kind else ""
    return f"<tr{cls}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def pre(text: str, max_lines: int, line_chars: int) -> str:
    """Recorded text (a jaxpr, HLO) as a <pre>: escaped, at most `max_lines` lines."""
    lines = text.split("\n")
    shown = h("\n".join(lines[:max_lines]), line_chars, lines=True)
    return f"<pre>{shown}</pre>" + more(len(lines) - max_lines, "line")


def more(count: int, what: str, rest: str = "") -> str:
    """What a bounded list left out ("" when nothing was): `what` a singular noun, counted
    as the one count rule does (`1 more call`); `rest` after it ("in detail")."""
    if count <= 0:
        return ""
    return f'<p class="more">… {plural(count, "more " + what)}{rest} not shown</p>'


def badge(text: str, kind: str) -> str:
    """A short coloured word: ok, failed, changed ... (`text` is HTML already)."""
    return f'<span class="badge {kind}">{text}</span>'
