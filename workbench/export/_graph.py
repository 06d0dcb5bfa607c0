"""The graph as data (nodes, edges, clusters: what every view collects) and DOT text
(`to_dot` maps a Graph to DOT through the graphviz package, escaping every label). Nothing
here reads records, runs Graphviz or imports JAX."""
from __future__ import annotations

from dataclasses import dataclass, field

import graphviz as gv

from .. import _safe_text as safe_text

# --- the graph as data -------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Node:
    id: str
    label: str                # lines separated by "\n"; escaped by to_dot
    kind: str = "eqn"         # input | output | const | eqn | group | boundary | step | tree | leaf
                              # | note
    cluster: str | None = None
    origin: str = ""          # primal | jvp | transpose (fill colour), from the name stack
    batched: bool = False     # traced under vmap (magenta border)
    mark: str = ""            # added | removed | changed | mismatch | error | focus | backward
                              # | rule | nonfinite
    tooltip: str = ""
    fill: str = ""            # an explicit fill colour ("#rrggbb"): a device's block


@dataclass(frozen=True, slots=True)
class Edge:
    src: str
    dst: str
    label: str = ""
    style: str = ""           # "" (solid) | dashed | dotted | invis
    constraint: bool = True   # False: drawn, but does not rank its ends


@dataclass(frozen=True, slots=True)
class Cluster:
    id: str                   # starts with "cluster" (Graphviz draws only those as boxes)
    label: str
    parent: str | None = None
    kind: str = ""            # eqn | subjaxpr | stage | level | scope | tree | pair


@dataclass(frozen=True, slots=True)
class Graph:
    title: str
    nodes: tuple[Node, ...] = ()
    edges: tuple[Edge, ...] = ()
    clusters: tuple[Cluster, ...] = ()
    notes: tuple[str, ...] = ()   # what was left out, and how names were chosen
    rankdir: str = "TB"
    legend: tuple[str, ...] = ()  # origins/marks present, explained in the graph label
    same_rank: tuple[tuple[str, ...], ...] = ()  # nodes drawn side by side, in this order
    folding: Folding = field(default_factory=lambda: Folding())  # what max_nodes folded
    # Why the stage drawn is not the one asked for by default (the call's outermost stage
    # is unavailable): said on stderr and among the notes. "" when it is that stage.
    stage_note: str = ""

    def node(self, node_id: str) -> Node | None:
        for n in self.nodes:
            if n.id == node_id:
                return n
        return None


@dataclass(frozen=True, slots=True)
class Folding:
    """What a jaxpr graph drew as one node to keep to max_nodes (zero: nothing folded)."""
    inputs_and_outputs: int = 0   # the stage's inputs, consts and outputs (folded or not)
    inputs_folded: int = 0        # inputs and consts drawn inside a group node
    outputs_folded: int = 0
    equations_folded: int = 0     # top-level equations in the "not drawn" node


@dataclass(frozen=True)
class GraphOptions:
    """How much to draw. The defaults draw everything, labelled."""
    collapse_subjaxprs: bool | None = None  # None: the view's default (jaxpr expands, stages not)
    collapse_repeats: bool = False  # runs of a repeated block of equations -> one node
    max_nodes: int | None = None    # at most this many nodes: the rest folded, with a note
    focus: int | None = None        # only this top-level equation and its neighbourhood
    radius: int = 2                 # ... within this many dataflow steps
    edge_labels: bool = True        # avals (and names) on edges
    max_params: int = 3             # key params shown per equation
    max_depth: int = 4              # sub-jaxpr nesting expanded
    max_fanout: int = 6             # values read by more equations: a reference per reader


class CollectError(ValueError):
    """The records cannot be drawn as asked (e.g. a stage without a jaxpr)."""


ORIGIN_COLOURS = {"primal": "#ffffff", "jvp": "#dbeafe", "transpose": "#fde2c8"}
MARK_COLOURS = {"added": "#bbf7d0", "removed": "#fecaca", "changed": "#fef08a",
                "mismatch": "#fca5a5", "error": "#fca5a5", "backward": "#fde2c8",
                "rule": "#ede9fe", "nonfinite": "#f87171"}
BATCHED_COLOUR = "#c026d3"  # not green: green fills say "added"
_LEGEND_TEXT = {
    "primal": "white: primal", "jvp": "blue: traced under jvp", "transpose": "orange: transpose "
    "(backward pass)", "batched": "magenta border: batched (vmap)", "added": "green: added",
    "removed": "red: removed", "changed": "yellow: changed", "mismatch": "red: differs",
    "error": "red: error", "backward": "orange: backward phase", "rule": "violet: custom rule",
    "nonfinite": "bright red: first NaN/Inf (find_nans)",
}


def origin_of(name_stack: str) -> tuple[str, bool]:
    """(primal | jvp | transpose, batched) from a name stack such as `vmap(transpose(jvp()))`."""
    if "transpose(" in name_stack:
        origin = "transpose"
    elif "jvp(" in name_stack or "linearize(" in name_stack:
        origin = "jvp"
    else:
        origin = "primal"
    return origin, "vmap(" in name_stack


_shorten = safe_text.shorten


# --- DOT text ----------------------------------------------------------------------

# Every label and id goes through the shared DOT escaping (workbench/_safe_text.py): pure
# ASCII, no control character left, cut below Graphviz's 16,384-character label limit.
dot_escape = safe_text.dot_escape


def dot_string(text: str) -> str:
    """`text` as a DOT double-quoted string (see dot_escape)."""
    return '"' + dot_escape(text) + '"'


def _q(text: str) -> gv.quoting.NoHtml:
    """Text for the graphviz package: escaped here, quoted by the package.

    NB: the package quotes what is not a plain DOT id and escapes quotes that
    are not escaped yet; backslashes it keeps as Graphviz escapes, which is why
    the text is escaped first. `nohtml`: a label that happens to read `<...>`
    is text, not an HTML label (escaping already turns `<` into `&lt;`).
    """
    return gv.nohtml(dot_escape(text))


_GRAPH_ATTRS = {"labelloc": "t", "labeljust": "l", "fontname": "Helvetica", "fontsize": "12",
                "nodesep": "0.25", "ranksep": "0.35", "newrank": "true"}
_NODE_ATTRS = {"shape": "box", "style": "rounded,filled", "fillcolor": "#ffffff",
               "fontname": "Helvetica", "fontsize": "10", "height": "0.3", "margin": "0.08,0.04"}
_EDGE_ATTRS = {"fontname": "Helvetica", "fontsize": "8", "color": "#555555",
               "fontcolor": "#333333", "arrowsize": "0.6"}


def to_dot(graph: Graph) -> str:
    """The Graph as DOT text, built with the graphviz package: clusters nested, pure ASCII."""
    label_lines = [graph.title] + list(graph.notes)
    legend = [_LEGEND_TEXT[k] for k in graph.legend if k in _LEGEND_TEXT]
    if legend:
        label_lines.append("; ".join(legend))
    dot = gv.Digraph("workbench", graph_attr={"rankdir": graph.rankdir,
                                              "label": _q("\n".join(label_lines)),
                                              **_GRAPH_ATTRS},
                     node_attr=_NODE_ATTRS, edge_attr=_EDGE_ATTRS)
    by_cluster: dict[str | None, list[Node]] = {}
    for node in graph.nodes:
        by_cluster.setdefault(node.cluster, []).append(node)
    children: dict[str | None, list[Cluster]] = {}
    known = {c.id for c in graph.clusters}
    for cluster in graph.clusters:
        parent = cluster.parent if cluster.parent in known else None
        children.setdefault(parent, []).append(cluster)

    def emit(into: gv.Digraph, cluster_id: str | None) -> None:
        for node in by_cluster.get(cluster_id, ()):
            _add_node(into, node)
        for child in children.get(cluster_id, ()):
            style = _CLUSTER_STYLES.get(child.kind, _CLUSTER_STYLES[""])
            with into.subgraph(name=_q(child.id)) as sub:
                sub.attr("graph", label=_q(child.label), **style)
                emit(sub, child.id)

    emit(dot, None)
    for cluster_id, nodes in by_cluster.items():  # nodes naming an unknown cluster: top level
        if cluster_id is not None and cluster_id not in known:
            for node in nodes:
                _add_node(dot, node)
    for group in graph.same_rank:
        with dot.subgraph() as row:
            row.attr(rank="same")
            for node_id in group:
                row.node(_q(node_id))
    for edge in graph.edges:
        attrs = {}
        if edge.label:
            attrs["label"] = _q(edge.label)
        if edge.style:
            attrs["style"] = edge.style
        if not edge.constraint:
            attrs["constraint"] = "false"
        dot.edge(_q(edge.src), _q(edge.dst), **attrs)
    return dot.source


_CLUSTER_STYLES: dict[str, dict[str, str]] = {
    "": {"style": "rounded", "color": "#94a3b8", "fontsize": "10", "labeljust": "l"},
    "eqn": {"style": "rounded,dashed", "color": "#64748b", "fontsize": "10", "labeljust": "l"},
    "subjaxpr": {"style": "rounded,filled", "fillcolor": "#f8fafc", "color": "#94a3b8",
                 "fontsize": "10", "labeljust": "l"},
    "stage": {"style": "rounded", "color": "#334155", "fontsize": "12", "labeljust": "l"},
    "level": {"style": "rounded,filled", "fillcolor": "#f8fafc", "color": "#475569",
              "fontsize": "11", "labeljust": "l"},
    "scope": {"style": "rounded,dashed", "color": "#7c3aed", "fontsize": "10", "labeljust": "l"},
    "tree": {"style": "rounded", "color": "#94a3b8", "fontsize": "10", "labeljust": "l"},
    "pair": {"style": "rounded", "color": "#334155", "fontsize": "11", "labeljust": "l"},
}

_KIND_STYLES: dict[str, dict[str, str]] = {
    "input": {"shape": "box", "style": "filled", "fillcolor": "#e2e8f0"},
    "const": {"shape": "box", "style": "filled", "fillcolor": "#f1f5f9"},
    "output": {"shape": "box", "style": "filled,bold", "fillcolor": "#e2e8f0"},
    "group": {"shape": "box3d", "style": "filled", "fillcolor": "#f1f5f9"},
    "boundary": {"shape": "box", "style": "dashed", "fontsize": "9"},
    "ref": {"shape": "box", "style": "dashed", "fontsize": "9", "color": "#64748b"},
    "note": {"shape": "note", "style": "filled", "fillcolor": "#fffbeb"},
    "leaf": {"shape": "box", "style": "filled"},
    "tree": {"shape": "box", "style": "rounded,filled", "fillcolor": "#f1f5f9"},
}


def _add_node(into: gv.Digraph, node: Node) -> None:
    attrs = dict(_KIND_STYLES.get(node.kind, {}))
    fill = node.fill or MARK_COLOURS.get(node.mark) or (
        ORIGIN_COLOURS.get(node.origin) if node.kind == "eqn" else None)
    if fill:
        attrs["fillcolor"] = fill
    if node.batched:
        attrs.update(color=BATCHED_COLOUR, penwidth="2")
    if node.mark == "focus":
        attrs.update(peripheries="2", penwidth="2")
    if node.tooltip:
        attrs["tooltip"] = _q(node.tooltip)
    into.node(_q(node.id), label=_q(node.label), **attrs)


def count(graph: Graph) -> tuple[int, int]:
    """(nodes, edges), the figures that decide how long Graphviz takes."""
    return len(graph.nodes), sum(1 for e in graph.edges if e.style != "invis")
