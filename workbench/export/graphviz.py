"""Graphviz views of recorded data: collect first, then draw.

`collect_jaxpr`, `collect_stages`, `collect_tower` and `collect_pytree` are pure:
records in, a `Graph` of plain nodes, edges and clusters out, tested on their
own. `to_dot` only maps a Graph to DOT text (micrograd's `draw_dot`), escaping
every label. Nothing here runs Graphviz or imports JAX: see `_write.py`.

This module holds the stages view and is the exporter's surface: the jaxpr view is
`_jaxpr_view.py` (what it folds `_jaxpr_folds.py`, the names of its inputs and outputs
`_names.py`), the graph as data and DOT text `_graph.py`, the tower and pytree views
`_call_views.py`.
"""
from __future__ import annotations

from transforms.model import Call, Stage, diff_stages

from ._call_views import collect_pytree as collect_pytree, collect_tower as collect_tower
from ._graph import (
    Cluster as Cluster,
    CollectError as CollectError,
    Edge as Edge,
    Graph as Graph,
    GraphOptions as GraphOptions,
    Node as Node,
    count as count,
    dot_escape as dot_escape,
    dot_string as dot_string,
    origin_of as origin_of,
    to_dot as to_dot,
)
from ._jaxpr_folds import find_repeats as find_repeats
from ._jaxpr_view import (
    MIN_JAXPR_NODES as MIN_JAXPR_NODES,
    _check_jaxpr_stage,
    _JaxprBuilder,
    _within_max_nodes,
    collect_jaxpr as collect_jaxpr,
)
from ._names import input_names as input_names, output_names as output_names

# --- stages view -------------------------------------------------------------------

def collect_stages(before: Stage, after: Stage, call: Call | None = None,
                   options: GraphOptions = GraphOptions()) -> Graph:
    """Two stages side by side, equations added, removed and changed marked."""
    _check_jaxpr_stage(before)
    _check_jaxpr_stage(after)
    diff = diff_stages(before, after)
    marks_a: dict[int, str] = {}
    marks_b: dict[int, str] = {}
    for row in diff.rows:
        if row.kind == "removed" and row.before is not None:
            marks_a[row.before] = "removed"
        elif row.kind == "added" and row.after is not None:
            marks_b[row.after] = "added"
        elif row.kind == "changed":
            if row.before is not None:
                marks_a[row.before] = "changed"
            if row.after is not None:
                marks_b[row.after] = "changed"
    title = f"{before.name} -> {after.name}: {diff.summary()}"

    def build(builder: _JaxprBuilder) -> Graph:
        notes = []
        for prefix, stage, marks in (("a_", before, marks_a), ("b_", after, marks_b)):
            cluster = f"cluster_{prefix}stage"
            count = stage.eqn_count if stage.eqn_count is not None else len(stage.eqns)
            builder.clusters.append(Cluster(cluster, f"{stage.name}  ({count} equations)", None,
                                            "stage"))
            notes += [f"{stage.name}: {n}" for n in
                      builder.add_stage(stage, call, prefix, cluster, marks)]
        return builder.graph(title, notes)

    return _within_max_nodes(build, options, expand=options.collapse_subjaxprs is False)


__all__ = ["Node", "Edge", "Cluster", "Graph", "GraphOptions", "CollectError", "collect_jaxpr",
           "collect_stages", "collect_tower", "collect_pytree", "to_dot", "dot_string",
           "dot_escape", "find_repeats", "input_names", "output_names", "origin_of", "count"]
