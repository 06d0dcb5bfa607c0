"""The jaxpr view: a stage's equations as a Graph (inputs, equations, outputs; sub-jaxprs as
clusters or folded; repeats folded; long edges drawn as references; equations run in a module
or named scope boxed by its path, EqnRecord.scope), built within the node budget. What is
folded is decided in `_jaxpr_folds.py`. Re-exported by workbench/export/graphviz.py."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from transforms.model import Call, EqnRecord, Stage, SubJaxprRecord, ValueSummary, short_aval

from ..analysis import eqn_values, values_text
from ._call_views import collect_pytree as collect_pytree, collect_tower as collect_tower
from ._graph import (
    Cluster as Cluster,
    CollectError as CollectError,
    Edge as Edge,
    Folding,
    Graph as Graph,
    GraphOptions as GraphOptions,
    Node as Node,
    _shorten,
    count as count,
    dot_escape as dot_escape,
    dot_string as dot_string,
    origin_of as origin_of,
    to_dot as to_dot,
)
from ._jaxpr_folds import (
    Group,
    argument_keys,
    aval_summary,
    fold_groups,
    neighbourhood,
    padded,
)
from ._names import input_names, output_names

# --- jaxpr view --------------------------------------------------------------------

def collect_jaxpr(stage: Stage, call: Call | None = None,
                  options: GraphOptions = GraphOptions()) -> Graph:
    """A stage's dataflow: equations, inputs and outputs named by pytree key paths."""
    _check_jaxpr_stage(stage)
    title = f"{stage.name}: {stage.title}" if stage.title else stage.name
    count = stage.eqn_count if stage.eqn_count is not None else len(stage.eqns)
    title += f"  ({count} equations)"

    def build(builder: _JaxprBuilder) -> Graph:
        return builder.graph(title, builder.add_stage(stage, call, prefix="", cluster=None))

    if options.collapse_subjaxprs is None and options.max_nodes is None \
            and options.focus is None:  # nothing asked: bodies drawn as deep as is quick
        return _bodies_within(build, options)
    return _within_max_nodes(build, options, expand=options.collapse_subjaxprs is not True)


# Drawn by default, bodies (of a scan, a while loop, an inner jit) are expanded only as deep
# as keeps the graph to this many nodes: dot lays out nested clusters far slower than a flat
# graph (numpyro's sampling loop, one equation around bodies of 1,308 nodes: 32 s of dot's
# CPU, a 2 MB SVG; the same drawn with its bodies as one node each: 63 nodes, 0.2 s).
DEFAULT_BODY_NODES = 300


def _bodies_within(build: Callable[[_JaxprBuilder], Graph], options: GraphOptions) -> Graph:
    """The graph with bodies expanded as deep as fits DEFAULT_BODY_NODES (a flat graph as it
    is), and a note saying what was drawn as one node and how to see it."""
    whole = build(_JaxprBuilder(options, expand=True))
    if len(whole.nodes) <= DEFAULT_BODY_NODES or not any(c.kind == "eqn" for c in whole.clusters):
        return whole  # no body drawn (a module's box is no body)
    for depth in range(options.max_depth - 1, -1, -1):
        shallower = replace(options, max_depth=depth)
        graph = build(_JaxprBuilder(shallower, expand=depth > 0))
        if len(graph.nodes) <= DEFAULT_BODY_NODES or depth == 0:
            which = ("every body (of a control-flow or inner-jit equation) as one node"
                     if depth == 0 else f"bodies nested more than {depth} deep as one node each")
            note = (f"drawn with {which}: {len(graph.nodes):,} nodes of the "
                    f"{len(whole.nodes):,} that drawing every body takes (Graphviz lays out "
                    f"nested bodies that large in minutes); --expand draws every body, "
                    f"--focus EQN the neighbourhood of one equation")
            return replace(graph, notes=(*graph.notes, note))
    return whole



# How a jaxpr graph is folded to fit max_nodes, from none to the most: inputs, consts and
# outputs grouped by argument (FOLD_ARGUMENTS), then each kind as one node with no
# per-reader references (FOLD_ALL). Equations past a budget are one node at every level.
FOLD_NONE, FOLD_ARGUMENTS, FOLD_ALL = 0, 1, 2
MIN_JAXPR_NODES = 3  # inputs, equations and outputs, one node each


def _within_max_nodes(build: Callable[[_JaxprBuilder], Graph], options: GraphOptions,
                      expand: bool) -> Graph:
    """build() with the equation budget and folding that keep it to options.max_nodes nodes.

    Every node counts (inputs, references, bodies' nodes, the group of what was left out):
    the budget of equations shrinks in proportion to the excess and is built again.
    """
    cap = options.max_nodes
    if cap is None or options.focus is not None:
        return build(_JaxprBuilder(options, expand))
    if cap < MIN_JAXPR_NODES:
        raise CollectError(f"max_nodes={cap}: a jaxpr graph needs at least {MIN_JAXPR_NODES} "
                           f"nodes (its inputs, equations and outputs as one node each)")
    fold, budget = FOLD_NONE, cap
    while True:
        graph = build(_JaxprBuilder(options, expand, budget, fold))
        drawn = len(graph.nodes)
        if drawn <= cap:
            return graph
        if fold == FOLD_NONE and graph.folding.inputs_and_outputs > cap // 4:
            fold = FOLD_ARGUMENTS
        elif budget > 0:
            budget = max(0, min(budget - 1, budget * cap // drawn))
        elif fold < FOLD_ALL:
            fold, budget = FOLD_ALL, cap
        else:
            raise CollectError(f"max_nodes={cap}: this graph needs at least {drawn} nodes "
                               f"even with every equation folded into one node")


def _check_jaxpr_stage(stage: Stage) -> None:
    if stage.jaxpr is None:
        why = stage.reason or "it is a compiled or metrics stage, not a jaxpr"
        raise CollectError(f"stage {stage.name!r} has no jaxpr to draw: {why}")
    if stage.eqns and not stage.in_vars and stage.jaxpr.in_avals:
        raise CollectError(f"stage {stage.name!r} was recorded without dataflow (variable "
                           f"names): record it again with this version of transforms")


# Characters of an equation's values in its node (record(values=True)).
VALUE_CHARS = 60


def nonfinite_marks(call: Call | None, stage: str) -> dict[int, str]:
    """The equations of this stage a NaN/Inf finding names (find_nans), marked."""
    if call is None:
        return {}
    return {f.eqn: "nonfinite" for f in call.nonfinite if f.stage == stage and f.eqn >= 0}


# In graphs of more top-level equations than this, edges spanning more than
# LONG_EDGE equations become references too.
LONG_EDGE_GRAPH = 60
LONG_EDGE = 12


class _JaxprBuilder:
    def __init__(self, options: GraphOptions, expand: bool, budget: int | None = None,
                 fold: int = FOLD_NONE):
        self.o = options
        self.expand = expand
        self.budget = options.max_nodes if budget is None else budget  # equation nodes
        self.fold = fold
        self.folding = Folding()
        self.nodes: list[Node] = []
        self.edges: list[Edge] = []
        self.clusters: list[Cluster] = []
        self.legend: dict[str, None] = {}
        self._long = False
        self._refs = 0
        self._scopes: dict[tuple[str | None, str], str] = {}  # (box, scope path) -> its cluster

    def graph(self, title: str, notes: Sequence[str], rankdir: str = "TB") -> Graph:
        return Graph(title, tuple(self.nodes), tuple(self.edges), tuple(self.clusters),
                     tuple(notes), rankdir, tuple(self.legend), folding=self.folding)

    def _count_folded(self, **counts: int) -> None:
        f = self.folding
        self.folding = Folding(*(getattr(f, name) + counts.get(name, 0)
                                 for name in Folding.__slots__))

    def node(self, node: Node) -> None:
        self.nodes.append(node)
        if node.mark:
            self.legend[node.mark] = None
        elif node.kind == "eqn":
            self.legend[node.origin] = None
        if node.batched:
            self.legend["batched"] = None

    def edge(self, src: str, dst: str, var: str, aval: str, style: str = "") -> None:
        label = f"{var}: {short_aval(aval)}" if self.o.edge_labels and var else ""
        self.edges.append(Edge(src, dst, label, style))

    # The producers of values: var name -> (node id, aval), per jaxpr scope.
    def add_stage(self, stage: Stage, call: Call | None, prefix: str, cluster: str | None,
                  marks: dict[int, str] | None = None) -> list[str]:
        notes: list[str] = []
        jaxpr = stage.jaxpr
        assert jaxpr is not None, "checked by the caller"
        in_names, why = input_names(stage, call)
        if why:
            notes.append(why)
        out_names, why = output_names(stage, call)
        if why:
            notes.append(why)
        eqns = stage.eqns
        n = len(eqns)
        values = eqn_values(call, stage.name)  # record(values=True): a line in each node
        marks = {**(marks or {}), **nonfinite_marks(call, stage.name)}
        groups, group_notes, folded = fold_groups(eqns, self.o, self.budget, self.expand)
        self._count_folded(equations_folded=folded)
        notes += group_notes
        focus = self.o.focus
        kept = neighbourhood(eqns, focus, self.o.radius) if focus is not None else None
        if kept is not None and self.o.focus is not None:
            notes.append(f"showing equation #{self.o.focus} ({eqns[self.o.focus].primitive}) and "
                         f"the {len(kept) - 1} equations within {self.o.radius} dataflow steps "
                         f"of it, of {n}; values from elsewhere are shown as their names")
        lazy = kept is not None
        producers: dict[str, tuple[str, str]] = {}
        pending_inputs: dict[str, Node] = {}
        self._count_folded(inputs_and_outputs=len(stage.const_vars) + len(stage.in_vars)
                           + len(stage.out_vars))
        const_word = "residual" if stage.role in ("linear", "transposed") else "const"
        if self.fold != FOLD_NONE and kept is None:
            notes += self._fold_inputs(stage, in_names, const_word, prefix, cluster, producers)
        for i, var in enumerate(stage.const_vars):
            if var in producers:
                continue
            node = Node(f"{prefix}k{i}", f"{const_word} {var}", "const", cluster)
            pending_inputs[var] = node
            producers[var] = (node.id, "")
        for i, var in enumerate(stage.in_vars):
            if var in producers:
                continue
            aval = jaxpr.in_avals[i] if i < len(jaxpr.in_avals) else ""
            name = in_names[i] if in_names else var
            label = f"{name}\n{short_aval(aval)}" if name == var else \
                f"{name}\n{var}: {short_aval(aval)}"
            node = Node(f"{prefix}i{i}", label, "input", cluster, tooltip=f"input {i}: {var}")
            pending_inputs[var] = node
            producers[var] = (node.id, aval)
        if not lazy:
            for node in pending_inputs.values():
                self.node(node)
            pending_inputs.clear()
        scope = _Scope(producers, pending_inputs, {})
        notes += self._plan_refs(stage, eqns, scope, in_names)
        group_nodes: dict[int, str] = {}
        for index, eqn in enumerate(eqns):
            scope.position = index
            if kept is not None and index not in kept:
                for var, aval in zip(eqn.out_vars, eqn.out_avals):
                    scope.hidden[var] = (index, eqn.primitive, aval)
                continue
            group = groups.get(index)
            if group is not None:
                self._add_grouped(eqn, index, group, group_nodes, scope, prefix, cluster)
                continue
            mark = marks.get(index, "")
            if kept is not None and index == self.o.focus:
                mark = mark or "focus"
            self._add_eqn(eqn, f"{prefix}e{index}", f"#{index}", scope, cluster, mark, depth=0,
                          values=values[index] if index < len(values) else None)
        if self.fold != FOLD_NONE and kept is None:
            notes += self._fold_outputs(stage, out_names, scope, prefix, cluster)
            return notes
        for i, var in enumerate(stage.out_vars):
            aval = jaxpr.out_avals[i] if i < len(jaxpr.out_avals) else ""
            if lazy and var not in scope.producers:
                continue  # made outside the neighbourhood drawn
            src = self._source(var, aval, scope, prefix, cluster)
            name = out_names[i] if out_names else f"out[{i}]"
            label = f"{name}\n{short_aval(aval)}"
            if var.startswith("="):
                label += f"\n= {var[1:]}"
            self.node(Node(f"{prefix}o{i}", label, "output", cluster, tooltip=f"output {i}"))
            if src:
                self.edge(src, f"{prefix}o{i}", var, aval)
        return notes

    def _fold_inputs(self, stage: Stage, in_names: Sequence[str] | None, const_word: str,
                     prefix: str, cluster: str | None,
                     producers: dict[str, tuple[str, str]]) -> list[str]:
        """Inputs and consts as one node per argument (FOLD_ALL: one node for all)."""
        jaxpr = stage.jaxpr
        assert jaxpr is not None
        members: dict[str, list[tuple[str, str]]] = {}
        for var in stage.const_vars:
            members.setdefault(f"{const_word}s", []).append((var, ""))
        names = in_names if in_names and self.fold != FOLD_ALL else ("inputs",) * len(
            stage.in_vars)
        for key, (var, aval) in zip(argument_keys(names, self.budget or 0),
                                    zip(stage.in_vars, padded(jaxpr.in_avals, stage.in_vars))):
            members.setdefault(key, []).append((var, aval))
        if self.fold == FOLD_ALL and len(members) > 1:
            members = {"inputs and consts": [m for ms in members.values() for m in ms]}
        for k, (key, group) in enumerate(members.items()):
            node_id = f"{prefix}ig{k}"
            label = f"{key}: {len(group)} {'value' if len(group) == 1 else 'values'}"
            self.node(Node(node_id, f"{label}\n{aval_summary(a for _, a in group)}", "input",
                           cluster, tooltip=f"{label} (max_nodes={self.o.max_nodes})"))
            for var, aval in group:
                producers[var] = (node_id, aval)
        total = len(stage.const_vars) + len(stage.in_vars)
        self._count_folded(inputs_folded=total)
        what = ", ".join(f"{key}: {len(group)}" for key, group in members.items())
        return [f"max_nodes={self.o.max_nodes}: the {total} inputs and consts are drawn as "
                f"{len(members)} node{'s' if len(members) != 1 else ''} ({_shorten(what, 120)})"]

    def _fold_outputs(self, stage: Stage, out_names: Sequence[str] | None, scope: _Scope,
                      prefix: str, cluster: str | None) -> list[str]:
        jaxpr = stage.jaxpr
        assert jaxpr is not None
        members: dict[str, list[tuple[str, str]]] = {}
        names = out_names if out_names and self.fold != FOLD_ALL else ("outputs",) * len(
            stage.out_vars)
        for key, (var, aval) in zip(argument_keys(names, self.budget or 0),
                                    zip(stage.out_vars, padded(jaxpr.out_avals,
                                                                stage.out_vars))):
            members.setdefault(key, []).append((var, aval))
        for k, (key, group) in enumerate(members.items()):
            node_id = f"{prefix}og{k}"
            label = f"{key}: {len(group)} {'output' if len(group) == 1 else 'outputs'}"
            self.node(Node(node_id, f"{label}\n{aval_summary(a for _, a in group)}", "output",
                           cluster, tooltip=f"{label} (max_nodes={self.o.max_nodes})"))
            fed: set[str] = set()
            for var, aval in group:
                src = self._source(var, aval, scope, prefix, cluster)
                if src and src not in fed:
                    fed.add(src)
                    self.edge(src, node_id, var, aval)
        self._count_folded(outputs_folded=len(stage.out_vars))
        if len(members) == len(stage.out_vars):
            return []
        return [f"max_nodes={self.o.max_nodes}: the {len(stage.out_vars)} outputs are drawn as "
                f"{len(members)} node{'s' if len(members) != 1 else ''}"]

    def _plan_refs(self, stage: Stage, eqns: Sequence[EqnRecord], scope: _Scope,
                   in_names: Sequence[str] | None) -> list[str]:
        made = {v: -1 for v in (*stage.const_vars, *stage.in_vars)}
        readers: Counter[str] = Counter()
        for i, eqn in enumerate(eqns):
            for v in eqn.out_vars:
                made[v] = i
            readers.update(set(eqn.in_vars))
        busy = [v for v, n in readers.items() if n > self.o.max_fanout and v in made]
        scope.made, scope.busy = made, set(busy)
        self._long = len(eqns) > LONG_EDGE_GRAPH
        names = dict(zip(stage.in_vars, in_names)) if in_names else {}
        for v, i in made.items():
            scope.labels[v] = names.get(v, v) if i < 0 else f"{v} from #{i}"
        notes = []
        if busy:
            notes.append(f"{len(busy)} values read by more than {self.o.max_fanout} equations "
                         f"are drawn as a dashed reference beside each reader")
        if self._long:
            notes.append(f"values read more than {LONG_EDGE} equations after they are made "
                         f"are drawn as a dashed reference beside the reader")
        return notes


    def _source(self, var: str, aval: str, scope: _Scope, prefix: str,
                cluster: str | None) -> str:
        """The node a value comes from ("" for a literal), creating lazy inputs/boundaries."""
        if var.startswith("=") or var == "_":
            return ""
        hit = scope.producers.get(var)
        if hit is not None:
            node = scope.pending.pop(var, None)
            if node is not None:
                self.node(node)
            return hit[0]
        hidden = scope.hidden.get(var)
        if hidden is not None:
            index, primitive, h_aval = hidden
            node_id = f"{prefix}v_{_safe_id(var)}"
            self.node(Node(node_id, f"{var}: {short_aval(h_aval)}\nfrom #{index} {primitive}",
                           "boundary", cluster))
            scope.producers[var] = (node_id, h_aval)
            return node_id
        return ""

    def _ref(self, var: str, aval: str, scope: _Scope, cluster: str | None) -> str:
        """A reference node for this read of `var`, or "" to draw an edge from its maker."""
        made = scope.made.get(var)
        if made is None or (var not in scope.producers and var not in scope.hidden):
            return ""
        if self.fold == FOLD_ALL:
            return ""  # a few nodes: dot is quick with long edges too
        if var not in scope.busy and not (self._long and scope.position - made > LONG_EDGE):
            return ""
        self._refs += 1
        node_id = f"ref{self._refs}"
        self.node(Node(node_id, f"{scope.labels.get(var, var)}\n{short_aval(aval)}", "ref",
                       cluster, tooltip=f"{var}, made by " +
                       (f"equation #{made}" if made >= 0 else "the caller (an input)")))
        scope.pending.pop(var, None)  # in focus mode a reference stands for the input
        return node_id

    def _add_grouped(self, eqn: EqnRecord, index: int, group: Group,
                     group_nodes: dict[int, str], scope: _Scope, prefix: str,
                     cluster: str | None) -> None:
        node_id = f"{prefix}g{group.key}"
        if group.start not in group_nodes:
            group_nodes[group.start] = node_id
            self.node(Node(node_id, group.label, "group", cluster,
                           tooltip=f"equations #{group.start}-#{group.end}"))
            scope.group_inputs[node_id] = set()
        seen = scope.group_inputs[node_id]
        for var, aval in zip(eqn.in_vars, eqn.in_avals):
            src = self._source(var, aval, scope, prefix, cluster)
            if src and src != node_id and src not in seen:
                seen.add(src)
                self.edge(self._ref(var, aval, scope, cluster) or src, node_id, var, aval)
        for var, aval in zip(eqn.out_vars, eqn.out_avals):
            scope.producers[var] = (node_id, aval)

    def _in_scope(self, cluster: str | None, path: str) -> str | None:
        """The cluster of the module or named scope `path` (`GPT/blocks_1/attn`) inside
        `cluster`: one per path, nested as the path is (GPT > blocks_1 > attn), each labelled
        with its own name; `cluster` itself for no scope."""
        if not path:
            return cluster
        box, prefix = cluster, ""
        for name in path.split("/"):
            prefix = f"{prefix}/{name}" if prefix else name
            found = self._scopes.get((cluster, prefix))
            if found is None:
                found = self._scopes[(cluster, prefix)] = f"cluster_scope{len(self._scopes)}"
                self.clusters.append(Cluster(found, name, box, "scope"))
            box = found
        return box

    def _add_eqn(self, eqn: EqnRecord, node_id: str, title: str, scope: _Scope,
                 cluster: str | None, mark: str, depth: int, outer_stack: str = "",
                 values: Sequence[ValueSummary | None] | None = None) -> None:
        # Boxed by its module; a body's scopes are relative to it, boxed inside its cluster.
        cluster = self._in_scope(cluster, eqn.scope)
        # A body's name stacks are relative to it: its equation's stack comes first.
        stack = f"{outer_stack}/{eqn.name_stack}" if outer_stack else eqn.name_stack
        origin, batched = origin_of(stack)
        lines = [f"{title} {eqn.primitive}" if title else eqn.primitive]
        for key, value in _key_params(eqn, self.o.max_params):
            lines.append(f"{key}={_shorten(value, 40)}")
        literals = [v[1:] for v in eqn.in_vars if v.startswith("=")]
        if literals:
            lines.append("literals: " + ", ".join(literals))
        if values is not None:  # its outputs' values (record(values=True))
            lines.append(f"= {_shorten(values_text(values), VALUE_CHARS)}")
        expand = bool(self.expand and eqn.subjaxprs and depth < self.o.max_depth)
        if eqn.subjaxprs and not expand:
            lines.append(_shorten("; ".join(f"{s.label}: {_eqns(s.eqn_count)}"
                                            for s in eqn.subjaxprs), 60))
        tooltip = " / ".join(x for x in (eqn.name_stack, eqn.source) if x)
        fed: set[int] = set()
        inner_cluster = cluster
        if expand:
            inner_cluster = f"cluster_{node_id}"
            self.clusters.append(Cluster(inner_cluster, f"{title} {eqn.primitive}".strip(),
                                         cluster, "eqn"))
            for k, sub in enumerate(eqn.subjaxprs):
                fed |= self._add_subjaxpr(eqn, node_id, sub, f"{node_id}_{k}", scope,
                                          inner_cluster, depth, stack)
        self.node(Node(node_id, "\n".join(lines), "eqn", inner_cluster, origin, batched, mark,
                       tooltip))
        for i, (var, aval) in enumerate(zip(eqn.in_vars, eqn.in_avals)):
            if i in fed:
                continue
            src = self._ref(var, aval, scope, cluster) or self._source(var, aval, scope, "",
                                                                        cluster)
            if src:
                self.edge(src, node_id, var, aval)
        for var, aval in zip(eqn.out_vars, eqn.out_avals):
            if var != "_":
                scope.producers[var] = (node_id, aval)

    def _add_subjaxpr(self, eqn: EqnRecord, eqn_id: str, sub: SubJaxprRecord, prefix: str,
                      outer: _Scope, parent: str, depth: int, stack: str) -> set[int]:
        """A sub-jaxpr as a cluster; returns the equation inputs it consumed."""
        cluster = f"cluster_{prefix}"
        self.clusters.append(Cluster(cluster, _sub_title(sub), parent, "subjaxpr"))
        inner = _Scope({}, {}, {})
        fed: set[int] = set()
        for i, var in enumerate(sub.in_vars):
            aval = sub.in_avals[i] if i < len(sub.in_avals) else ""
            role = sub.in_roles[i] if i < len(sub.in_roles) else ""
            node_id = f"{prefix}i{i}"
            self.node(Node(node_id, f"{role} {var}".strip() + f"\n{short_aval(aval)}",
                           "input", cluster))
            inner.producers[var] = (node_id, aval)
            operand = sub.operands[i] if i < len(sub.operands) else -1
            if 0 <= operand < len(eqn.in_vars):
                fed.add(operand)
                var, aval = eqn.in_vars[operand], eqn.in_avals[operand]
                src = self._ref(var, aval, outer, parent) or self._source(var, aval, outer, "",
                                                                           None)
                if src:
                    self.edge(src, node_id, eqn.in_vars[operand], eqn.in_avals[operand])
        for k, inner_eqn in enumerate(sub.eqns):
            self._add_eqn(inner_eqn, f"{prefix}e{k}", "", inner, cluster, "", depth + 1, stack)
        if len(sub.eqns) < sub.eqn_count:
            self.node(Node(f"{prefix}more", f"{sub.eqn_count - len(sub.eqns)} nested equations "
                                             f"not recorded", "note", cluster))
        for i, var in enumerate(sub.out_vars):
            aval = sub.out_avals[i] if i < len(sub.out_avals) else ""
            role = sub.out_roles[i] if i < len(sub.out_roles) else ""
            src = self._source(var, aval, inner, "", cluster)
            if src:
                label = f"{role} {var}".strip() if self.o.edge_labels else ""
                self.edges.append(Edge(src, eqn_id, label, "dashed"))
        return fed


@dataclass
class _Scope:
    producers: dict[str, tuple[str, str]]
    pending: dict[str, Node]          # inputs drawn once something reads them (focus mode)
    hidden: dict[str, tuple[int, str, str]]  # values of equations left out (focus mode)
    group_inputs: dict[str, set[str]] = field(default_factory=dict)
    # Values drawn as a reference beside each reader instead of one long edge per
    # reader: dot's layout time explodes with long edges (a weight read by 300
    # equations of a chain: over 60 s for 300 nodes; 0.1 s with references).
    made: dict[str, int] = field(default_factory=dict)  # var -> its equation (-1: an input)
    busy: set[str] = field(default_factory=set)          # read by more than max_fanout
    labels: dict[str, str] = field(default_factory=dict)  # var -> what a reference shows
    position: int = -1        # the top-level equation being drawn


def _sub_title(sub: SubJaxprRecord) -> str:
    counts = Counter(r for r in sub.in_roles if r)
    roles = ", ".join(f"{n} {r}" for r, n in counts.items())
    return f"{sub.label} ({roles})" if roles else sub.label


def _eqns(n: int) -> str:
    return f"{n} eqn" if n == 1 else f"{n} eqns"


# Params worth a line on a node, per primitive; others show their first few.
_KEY_PARAMS: dict[str, tuple[str, ...]] = {
    "jit": ("name",), "pjit": ("name",), "scan": ("length", "reverse"),
    "cond": (), "while": (), "dot_general": ("dimension_numbers",),
    "custom_jvp_call": ("num_consts",), "custom_vjp_call": ("num_consts",),
    "broadcast_in_dim": ("shape", "broadcast_dimensions"), "reduce_sum": ("axes",),
    "convert_element_type": ("new_dtype",), "integer_pow": ("y",),
}
_SKIP_PARAMS = frozenset({"jaxpr", "branches", "body_jaxpr", "cond_jaxpr", "call_jaxpr",
                          "sharding", "out_sharding", "ft_in", "ft_out", "jvp_jaxpr_fun",
                          "jvp_jaxpr_thunk", "fwd_jaxpr_thunk", "bwd", "symbolic_zeros",
                          "in_shardings", "out_shardings", "in_layouts", "out_layouts",
                          "donated_invars", "ctx_mesh", "compiler_options_kvs", "keep_unused",
                          "inline", "resource_env", "accumulation_type", "unroll",
                          "memory_space"})


def _key_params(eqn: EqnRecord, limit: int) -> list[tuple[str, str]]:
    wanted = _KEY_PARAMS.get(eqn.primitive)
    params = dict(eqn.params)
    if wanted is not None:
        return [(k, params[k]) for k in wanted if k in params][:limit]
    return [(k, v) for k, v in eqn.params if k not in _SKIP_PARAMS and v != "None"][:limit]


def _safe_id(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", text)
