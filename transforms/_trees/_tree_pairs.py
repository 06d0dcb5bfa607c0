"""Trees paired node by node (a gradient with its input, a primal with its tangent), and
trees made of other trees (argument tuples, a Jacobian's nesting of its input in its output)."""
from __future__ import annotations

import re

from ..model import PairRow, TreeNode, TreePair, TreeRecord
from ._pytrees import MAX_NODES, _fields, _freeze

__all__ = ["joined_aval", "nest_trees", "pair_trees", "tuple_tree"]


# --- pairing ----------------------------------------------------------------------

def _shape_of(tree: TreeRecord, node: TreeNode) -> str:
    """What a node is, for a diff: `a Primal with children .x`, `a leaf float32[]`."""
    if node.kind == "leaf":
        return f"a leaf {node.aval}".rstrip()
    if node.kind == "none":
        return "None"
    if node.kind in ("error", "cycle", "truncated"):
        return f"{node.kind} ({node.note})"
    keys = ", ".join(tree.nodes[c].key for c in node.children) or "no children"
    aux = f" with static {node.aux}" if node.aux else ""
    return f"a {node.type_name}{aux} with children {keys}"


def _differs(tree_a: TreeRecord, a: TreeNode, tree_b: TreeRecord, b: TreeNode) -> str:
    """Why two nodes at one key path differ structurally; "" when they agree."""
    if a.kind != b.kind and not (a.kind == "leaf" and b.kind == "leaf"):
        return "kind"
    if a.kind == "leaf":
        return ""
    if a.type_name != b.type_name:
        return "type"
    if a.aux != b.aux:
        return "static data"
    if [tree_a.nodes[c].key for c in a.children] != [tree_b.nodes[c].key for c in b.children]:
        return "children"
    return ""


def pair_trees(kind: str, title: str, left: TreeRecord, right: TreeRecord,
               left_label: str = "", right_label: str = "") -> TreePair:
    """Pair two trees by key path, in the left tree's order, noting differences."""
    right_by_path = {n.path: n for n in right.nodes}
    rows: list[PairRow] = []
    first: str | None = None
    left_has = right_has = ""
    seen: set[str] = set()
    for a in left.nodes:
        seen.add(a.path)
        b = right_by_path.get(a.path)
        if b is None:
            if _under_difference(first, a.path):
                rows.append(PairRow(a.path, a.index, None, "left_only"))
                continue
            rows.append(PairRow(a.path, a.index, None, "left_only"))
            if first is None:
                first, left_has, right_has = a.path, _shape_of(left, a), "nothing"
            continue
        why = _differs(left, a, right, b)
        note = why
        if not why and a.kind == "leaf" and a.aval != b.aval:
            note = f"{a.aval} vs {b.aval}"
        status = "differs" if (why or note) else "same"
        rows.append(PairRow(a.path, a.index, b.index, status, note))
        if why and first is None:
            first, left_has, right_has = a.path, _shape_of(left, a), _shape_of(right, b)
    for b in right.nodes:
        if b.path not in seen:
            rows.append(PairRow(b.path, None, b.index, "right_only"))
            if first is None:
                first, left_has, right_has = b.path, "nothing", _shape_of(right, b)
    left_label = left_label or left.name
    right_label = right_label or right.name
    if first is None:
        summary = f"{left_label} and {right_label} have the same structure"
    else:
        where = f"at {first}" if first else "at the root"
        summary = f"first difference {where}: {left_label} has {left_has}; " \
                  f"{right_label} has {right_has}"
    return TreePair(kind, title, left, right, tuple(rows), first, left_has, right_has, summary)


def _under_difference(first: str | None, path: str) -> bool:
    return first is not None and first != "" and path.startswith(first)


# --- trees made of other trees: tuples of arguments, Jacobians' nesting ------------

def tuple_tree(trees: list[TreeRecord]) -> TreeRecord:
    """Several argument trees as one tuple, as `argnums=(0, 1)` gives them."""
    root = _fields(0, None, 0, "", "", "node", "tuple")
    nodes = [root]
    for i, t in enumerate(trees):
        offset = len(nodes)
        root["children"].append(offset)
        for n in t.nodes:
            fields = n._asdict()
            key = f"[{i}]" if n.parent is None else n.key
            fields.update(index=offset + n.index, depth=n.depth + 1, key=key,
                          path=f"[{i}]" + n.path, children=[offset + c for c in n.children],
                          parent=0 if n.parent is None else offset + n.parent)
            nodes.append(fields)
    name = "(" + ", ".join(t.name for t in trees) + ")"
    return TreeRecord("input", name, "", tuple(_freeze(n) for n in nodes), None)


_AVAL = re.compile(r"^(\w+)\[([^\]]*)\]$")


def joined_aval(outer: str, inner: str) -> str:
    """A Jacobian block's aval: the outer leaf's dtype, its shape then the inner's."""
    a, b = _AVAL.match(outer or ""), _AVAL.match(inner or "")
    if a is None or b is None:
        return ""
    return f"{a.group(1)}[{','.join(d for d in (a.group(2), b.group(2)) if d)}]"


def nest_trees(outer: TreeRecord, inner: TreeRecord) -> TreeRecord:
    """`outer` with a copy of `inner` in place of each of its leaves (in preorder)."""
    nodes: list[dict] = []
    note = ""
    placed: dict[int, int] = {}  # outer node -> its index here
    for a in outer.nodes:
        parent = placed.get(a.parent) if a.parent is not None else None
        if a.parent is not None and parent is None:
            continue  # below a node that was not placed (truncated)
        if a.kind != "leaf":
            if len(nodes) >= MAX_NODES:
                note = f"truncated at {MAX_NODES} nodes"
                break
            placed[a.index] = _place(nodes, a, parent, a.depth, a.key, a.path, a.aval)
            continue
        copied: dict[int, int] = {}
        for b in inner.nodes:
            if len(nodes) >= MAX_NODES:
                note = f"truncated at {MAX_NODES} nodes"
                break
            b_parent = parent if b.parent is None else copied.get(b.parent)
            if b.parent is not None and b_parent is None:
                continue
            aval = joined_aval(a.aval, b.aval) if b.kind == "leaf" else ""
            copied[b.index] = _place(nodes, b, b_parent, a.depth + b.depth,
                                     a.key if b.parent is None else b.key, a.path + b.path, aval)
        placed[a.index] = copied.get(0, -1)
        if note:
            break
    return TreeRecord("expected", outer.name, "", tuple(_freeze(n) for n in nodes), None, note)


def _place(nodes: list[dict], node: TreeNode, parent: int | None, depth: int, key: str,
           path: str, aval: str) -> int:
    index = len(nodes)
    fields = _fields(index, parent, depth, key, path, node.kind, node.type_name, node.note)
    fields.update(aux=node.aux, static=node.static, aval=aval)
    nodes.append(fields)
    if parent is not None:
        nodes[parent]["children"].append(index)
    return index
