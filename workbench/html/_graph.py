"""A call's jaxpr graph as inline SVG: the Graphviz export (workbench/export) drawn to a
temporary file and read back, its XML prolog and comments dropped so it sits in a page."""
from __future__ import annotations

import re
import tempfile
from pathlib import Path

from transforms.model import Call, Session

from ..export import ExportError, GraphOptions, GraphvizMissing, collect, write_graph
from ._blocks import DEFAULT, Budget, h

__all__ = ["graph_html"]

# Graphviz's prolog, doctype and comments: not wanted inside an HTML page.
_PROLOG = re.compile(r"<\?xml.*?\?>|<!DOCTYPE.*?>|<!--.*?-->", re.DOTALL)


def graph_svg(call: Call, budget: Budget, stage: str | None = None) -> str:
    """The SVG of the call's jaxpr (its outermost stage unless `stage`); ExportError or
    OSError when it cannot be drawn."""
    options = GraphOptions(max_nodes=budget.graph_nodes, collapse_repeats=True)
    drawn = collect(Session(calls=[call]), "jaxpr", call.index, stage, options=options)
    with tempfile.TemporaryDirectory(prefix="workbench-html-") as work:
        out = write_graph(drawn, Path(work) / "graph.svg", timeout=budget.graph_seconds,
                          quiet=True)
        svg = out.read_text(encoding="utf-8", errors="replace")
    svg = _PROLOG.sub("", svg).strip()
    # Labels reach Graphviz through _safe_text.dot (pure ASCII, entities): nothing in its
    # SVG is markup of a recording's. A script element would be Graphviz's own: refused.
    if not svg.startswith("<svg") or re.search(r"<\s*script|\son\w+\s*=", svg, re.I):
        raise ExportError("Graphviz wrote something other than a plain SVG")
    return svg


def graph_html(call: Call, budget: Budget = DEFAULT) -> str:
    """The graph, or a line saying why there is none."""
    if not any(s.jaxpr is not None for s in call.stages):
        return ""
    try:
        return f'<div class="graph">{graph_svg(call, budget)}</div>'
    except GraphvizMissing:  # its message names a DOT file left in a folder now gone
        return ('<p class="dim">(no graph: Graphviz is not installed; `apt-get install -y '
                'graphviz`, `brew install graphviz` or `conda install graphviz`)</p>')
    except (ExportError, OSError) as e:
        return f'<p class="dim">(no graph: {h(e, 400)})</p>'
