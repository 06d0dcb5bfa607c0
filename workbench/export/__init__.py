"""Graphviz exports of recorded sessions: jaxpr graphs, stage diffs, transformation towers, pytrees,
devices.

    from workbench import export
    export.graph(session, view="jaxpr", call=0, stage="grad(f)", out="grad.svg")
    export.graph("trace.json", view="tower", out="tower.png")

Collect first (`collect`, pure, returning a `Graph`), then draw (`to_dot`,
`write_graph`). The output suffix picks the format: .svg, .png, .pdf, or .dot.
"""
from ._api import VIEWS as VIEWS
from ._api import add_graph_arguments as add_graph_arguments
from ._api import cli_graph as cli_graph
from ._api import collect as collect
from ._api import export_session_graphs as export_session_graphs
from ._api import graph as graph
from ._api import main as main
from ._api import write_call_graph as write_call_graph
from ._write import MAX_RENDER_NODES as MAX_RENDER_NODES
from ._write import ExportError as ExportError
from ._write import GraphTooLarge as GraphTooLarge
from ._write import GraphvizMissing as GraphvizMissing
from ._write import write_graph as write_graph
from .devices import collect_devices as collect_devices
from .graphviz import Cluster as Cluster
from .graphviz import Edge as Edge
from .graphviz import Graph as Graph
from .graphviz import GraphOptions as GraphOptions
from .graphviz import Node as Node
from .graphviz import collect_jaxpr as collect_jaxpr
from .graphviz import collect_pytree as collect_pytree
from .graphviz import collect_stages as collect_stages
from .graphviz import collect_tower as collect_tower
from .graphviz import to_dot as to_dot

__all__ = ["VIEWS", "graph", "collect", "write_graph", "to_dot", "cli_graph",
           "add_graph_arguments", "main", "export_session_graphs", "write_call_graph",
           "ExportError", "GraphTooLarge", "GraphvizMissing", "MAX_RENDER_NODES", "Graph",
           "Node", "Edge", "Cluster", "GraphOptions", "collect_jaxpr", "collect_stages",
           "collect_tower", "collect_pytree", "collect_devices"]
