"""The tower view (the levels of a call, innermost first, and the steps each saw, linked by
cause) and the pytree view (a call's trees and pairs): collected from records into a Graph."""
from __future__ import annotations

import textwrap
from typing import Sequence

from transforms.model import Call, TreePair, TreeRecord, short_aval

from ..analysis import call_label, failing_steps, scope_runs, step_label, steps_by_level
from ._graph import Cluster, CollectError, Edge, Graph, GraphOptions, Node, _shorten

# --- tower view --------------------------------------------------------------------

DEFAULT_MAX_STEPS = 400


def collect_tower(call: Call, options: GraphOptions = GraphOptions()) -> Graph:
    """The levels of a call, innermost first, and the steps each saw, linked by cause."""
    cap = options.max_nodes if options.max_nodes is not None else DEFAULT_MAX_STEPS
    nodes: list[Node] = []
    edges: list[Edge] = []
    clusters: list[Cluster] = []
    legend: dict[str, None] = {}
    notes: list[str] = []
    by_level = steps_by_level(call)
    failing = failing_steps(call)
    shown: set[int] = set()
    # Each level keeps one node for its "more steps" (or "no steps") note.
    per_level = max(0, cap // max(1, len(call.levels)) - 1)
    if options.max_nodes is None:
        per_level = max(1, per_level)
    elif cap < len(call.levels):
        raise CollectError(f"max_nodes={cap}: the tower of call {call.index} needs at least "
                           f"{len(call.levels)} nodes (one per level)")
    for level in sorted(call.levels, key=lambda lv: (-lv.depth, lv.index)):
        cluster = f"cluster_L{level.index}"
        options_text = " ".join(f"{k}={v}" for k, v in level.options)
        label = f"{level.label}   {level.kind} ({level.trace_type})"
        detail = " ".join(x for x in (level.function, options_text) if x)
        if detail:
            label += "\n" + _shorten(detail, 90)
        positions = by_level.get(level.index, ())
        steps = [call.steps[p] for p in positions]
        label += f"\n{len(steps)} steps"
        clusters.append(Cluster(cluster, label, None, "level"))
        # a run of steps in one module or named scope: a box inside the level's, named for it
        scope_box: dict[int, str] = {}  # step index -> its box
        for run in scope_runs(call.steps, positions[:per_level]):
            if run.scope:
                box = f"{cluster}_s{run.positions[0]}"
                clusters.append(Cluster(box, run.scope, cluster, "scope"))
                scope_box.update((call.steps[p].index, box) for p in run.positions)
        previous = None
        if not steps:
            nodes.append(Node(f"L{level.index}_empty", "no steps at this level", "note", cluster))
        for step in steps[:per_level]:
            mark = "error" if step.index in failing else (
                "backward" if step.phase == "backward" else "rule" if step.phase == "rule" else "")
            outs = ", ".join(short_aval(v.aval) for v in step.outputs[:3])
            lines = [f"#{step.index} {step_label(step)}"]
            if outs:
                lines.append(f"-> {outs}")
            if step.phase != "forward":
                lines.append(step.phase)
            if step.error:
                lines.append(_shorten(step.error.splitlines()[0] if step.error else "", 50))
            tooltip = str(step.source) if step.source is not None else ""
            node_id = f"s{step.index}"
            nodes.append(Node(node_id, "\n".join(lines), "step",
                              scope_box.get(step.index, cluster), mark=mark, tooltip=tooltip))
            if mark:
                legend[mark] = None
            shown.add(step.index)
            if previous is not None:  # keeps each level's steps in order, in one column
                edges.append(Edge(previous, node_id, style="invis"))
            previous = node_id
        if len(steps) > per_level:
            rest = len(steps) - per_level
            nodes.append(Node(f"L{level.index}_more", f"{rest} more steps not drawn", "note",
                              cluster))
            if previous is not None:
                edges.append(Edge(previous, f"L{level.index}_more", style="invis"))
            notes.append(f"{level.label}: {rest} of {len(steps)} steps not drawn "
                         f"(max_nodes={cap} across {len(call.levels)} levels)")
    for step in call.steps:
        if step.cause is not None and step.index in shown and step.cause in shown:
            edges.append(Edge(f"s{step.cause}", f"s{step.index}", "", "dashed"))
    title = f"call {call.index}: {call_label(call)}: {len(call.levels)} levels, " \
            f"{len(call.steps)} steps; dashed: the step that caused it"
    return Graph(title, tuple(nodes), tuple(edges), tuple(clusters), tuple(notes), "TB",
                 tuple(legend))


# --- pytree view -------------------------------------------------------------------

def collect_pytree(call: Call, options: GraphOptions = GraphOptions()) -> Graph:
    """Input and gradient (or tangent) trees side by side, aux data shown, mismatches marked."""
    nodes: list[Node] = []
    edges: list[Edge] = []
    clusters: list[Cluster] = []
    notes: list[str] = []
    legend: dict[str, None] = {}
    same_rank: list[tuple[str, ...]] = []
    pairs: Sequence[TreePair] = call.pairs
    trees: Sequence[TreeRecord] = call.trees
    mismatch_pairs = [e.mismatch for e in call.errors if e.mismatch is not None]
    pairs = list(pairs) + [p for p in mismatch_pairs if p not in pairs]
    cap = options.max_nodes if options.max_nodes is not None else 500
    tree_count = 2 * len(pairs) if pairs else len(trees)
    if options.max_nodes is not None and tree_count:
        if cap < tree_count:
            raise CollectError(f"max_nodes={cap}: the pytree view of call {call.index} needs at "
                               f"least {tree_count} nodes (one per tree)")
        cap //= tree_count  # shared by the trees drawn
    if pairs:
        for k, pair in enumerate(pairs):
            cluster = f"cluster_pair{k}"
            summary = pair.summary or ("same structure" if pair.same_structure else
                                       f"first difference at {pair.first_difference!r}")
            clusters.append(Cluster(cluster, f"{pair.title}\n{_wrap(summary, 90, 4)}", None,
                                    "pair"))
            status = {}
            for row in pair.rows:
                if row.status != "same":
                    what = row.note or {"left_only": f"only in {pair.left.name}",
                                        "right_only": f"only in {pair.right.name}"
                                        }.get(row.status, row.status)
                    if row.left is not None:
                        status[("L", row.left)] = what
                    if row.right is not None:
                        status[("R", row.right)] = what
            # NB: the right tree's cluster is emitted first: with the flat same-rank links,
            # dot then places the left tree on the left (measured; the other order flips it).
            for side, tree in (("R", pair.right), ("L", pair.left)):
                _tree_nodes(tree, f"p{k}{side}", f"{cluster}_{side}", cluster, nodes, edges,
                            clusters, {i: s for (sd, i), s in status.items() if sd == side},
                            cap, notes, legend)
            for row in pair.rows:
                if row.left is not None and row.right is not None:
                    # Side by side, left tree first: a flat edge between nodes of one rank.
                    style = "dotted" if row.status == "same" else "dashed"
                    a, b = f"p{k}L{row.left}", f"p{k}R{row.right}"
                    edges.append(Edge(a, b, "", style))
                    same_rank.append((a, b))
        title = f"call {call.index}: {call_label(call)}: trees paired by key path"
    elif trees:
        for k, tree in enumerate(trees):
            cluster = f"cluster_tree{k}"
            clusters.append(Cluster(cluster, f"{tree.role}: {tree.name}", None, "tree"))
            _tree_nodes(tree, f"t{k}", f"{cluster}_t", cluster, nodes, edges, clusters, {}, cap,
                        notes, legend)
        title = f"call {call.index}: {call_label(call)}: trees (none paired)"
    else:
        for k, (role, text) in enumerate((("input", call.in_tree), ("output", call.out_tree))):
            nodes.append(Node(f"td{k}", f"{role} treedef\n{_wrap(text or '(not recorded)', 60)}",
                              "tree"))
        notes.append("this dump has no pytree records (Call.trees, Call.pairs): showing the "
                     "treedef text recorded with the call")
        title = f"call {call.index}: {call_label(call)}: treedefs"
    return Graph(title, tuple(nodes), tuple(edges), tuple(clusters), tuple(notes), "TB",
                 tuple(legend), tuple(same_rank))


def _tree_nodes(tree: TreeRecord, prefix: str, cluster: str, parent: str, nodes: list[Node],
                edges: list[Edge], clusters: list[Cluster], marks: dict[int, str], cap: int,
                notes: list[str], legend: dict[str, None]) -> None:
    clusters.append(Cluster(cluster, f"{tree.role}: {tree.name}", parent, "tree"))
    drawn = tree.nodes[:cap]
    for node in drawn:
        key = tree.name if node.parent is None else node.key
        lines = [key]
        if node.kind == "leaf":
            lines.append(short_aval(node.aval) if node.aval else node.type_name)
            if node.value is not None:
                lines.append(_shorten(node.value, 40))
            if node.tracer:
                lines.append(_shorten(node.tracer, 50))
        else:
            lines.append(node.type_name.rsplit(".", 1)[-1] if node.kind == "node" else node.kind)
            if node.static:
                lines += [_shorten(f"{k}={v}", 50) for k, v in node.static]
            elif node.aux:
                lines.append(_shorten(f"aux: {node.aux}", 50))
        if node.note:
            lines.append(_shorten(node.note, 50))
        mark = ""
        if node.index in marks:
            mark = "mismatch"
            lines.append(_shorten(f"differs: {marks[node.index]}", 50))
            legend["mismatch"] = None
        kind = "leaf" if node.kind == "leaf" else "tree"
        nodes.append(Node(f"{prefix}{node.index}", "\n".join(lines), kind, cluster, mark=mark,
                          tooltip=tree.full_path(node)))
        if node.parent is not None:
            edges.append(Edge(f"{prefix}{node.parent}", f"{prefix}{node.index}"))
    if len(tree.nodes) > cap:
        notes.append(f"{tree.name}: {len(tree.nodes) - cap} of {len(tree.nodes)} nodes not drawn "
                     f"(at most {cap} per tree)")
    if tree.note:
        notes.append(f"{tree.name}: {tree.note}")


def _wrap(text: str, width: int, max_lines: int = 20) -> str:
    """Lines of at most `width` characters, broken between words (a word longer than a
    line, a treedef, is broken inside)."""
    lines = textwrap.wrap(text, width, break_on_hyphens=False) or [text]
    if len(lines) > max_lines:
        lines = lines[:max_lines - 1] + [_shorten(lines[max_lines - 1] + "…", width)]
    return "\n".join(lines)


