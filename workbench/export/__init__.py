"""Graphviz exports of recorded sessions: jaxpr graphs, stage diffs, transformation towers, pytrees,
devices.

    from workbench import export
    export.graph(session, view="jaxpr", call=0, stage="grad(f)", out="grad.svg")
    export.graph("trace.json", view="tower", out="tower.png")

Collect first (`collect`, pure, returning a `Graph`), then draw (`to_dot`,
`write_graph`). The output suffix picks the format: .svg, .png, .pdf, or .dot.
"""
from ._api import (
           VIEWS as VIEWS,
           add_graph_arguments as add_graph_arguments,
           cli_graph as cli_graph,
           collect as collect,
           export_session_graphs as export_session_graphs,
           graph as graph,
           main as main,
           write_call_graph as write_call_graph,
)
from ._write import (
           MAX_RENDER_NODES as MAX_RENDER_NODES,
           ExportError as ExportError,
           GraphTooLarge as GraphTooLarge,
           GraphvizMissing as GraphvizMissing,
           write_graph as write_graph,
)
from .devices import collect_devices as collect_devices
from .graphviz import (
           Cluster as Cluster,
           Edge as Edge,
           Graph as Graph,
           GraphOptions as GraphOptions,
           Node as Node,
           collect_jaxpr as collect_jaxpr,
           collect_pytree as collect_pytree,
           collect_stages as collect_stages,
           collect_tower as collect_tower,
           to_dot as to_dot,
)

__all__ = ["VIEWS", "graph", "collect", "write_graph", "to_dot", "cli_graph",
           "add_graph_arguments", "main", "export_session_graphs", "write_call_graph",
           "ExportError", "GraphTooLarge", "GraphvizMissing", "MAX_RENDER_NODES", "Graph",
           "Node", "Edge", "Cluster", "GraphOptions", "collect_jaxpr", "collect_stages",
           "collect_tower", "collect_pytree", "collect_devices"]
