"""The pytree view's rows as plain data: a call's tree pairs and trees, one row per line.

Nothing here imports Textual. Every row is a tuple of (text, style name) pieces,
already padded to its table's column widths, so the view draws only the rows on
screen and a 10,000-leaf call costs one pass over its nodes to show.
"""
from __future__ import annotations

import textwrap
from typing import NamedTuple

from transforms.record import Call, TreeNode, TreePair, TreeRecord

# A cell is cut to this many characters (a recorded value is at most 120).
MAX_CELL = 80
# Fitted to the view's width, a value column keeps at least this many.
MIN_COLUMN = 24

MARKS = {"same": " ", "differs": "~", "left_only": "-", "right_only": "+"}
MARK_STYLES = {"same": "", "differs": "differs", "left_only": "left_only",
               "right_only": "right_only"}


class TreeRow(NamedTuple):
    """One line of the view: (text, style name) pieces; style names are the view's own."""
    pieces: tuple[tuple[str, str], ...]


def short_type(type_name: str) -> str:
    return type_name.rsplit(".", 1)[-1]


def _cut(text: str) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= MAX_CELL else text[:MAX_CELL - 1] + "…"


def static_of(node: TreeNode) -> str:
    return ", ".join(f"{k}={v}" for k, v in node.static) if node.static else node.aux


def node_text(node: TreeNode, with_static: bool = True) -> tuple[str, str]:
    """A node as (text, style): a leaf's aval and concrete value, a container's type and
    static data, or what went wrong describing it."""
    kind = node.kind
    if kind == "leaf":
        text = node.aval or short_type(node.type_name)
        if node.traced:
            text += f"  traced {node.tracer}" if node.tracer else "  traced"
        elif node.value is not None:
            text += f" = {node.value}"
        if node.note:
            text += f"  ({node.note})"
        return _cut(text), "leaf"
    if kind == "node":
        text = short_type(node.type_name)
        static = static_of(node) if with_static else ""
        if static:
            text += f"  static: {static}"
        if node.note:
            text += f"  ({node.note})"
        return _cut(text), "node"
    if kind == "none":
        return "None", "dim"
    return _cut(f"<{kind}: {node.note}>"), "error"


def _wrap(text: str, width: int) -> list[str]:
    if len(text) <= width:
        return [text]
    return textwrap.wrap(text, width, break_on_hyphens=False) or [text[:width]]


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(width - 1, 0)] + "…"


def _header(tree: TreeRecord, default: str) -> str:
    name = tree.name or default
    return f"{name} ({tree.role})" if tree.role and tree.role != name else name


def pair_rows(pair: TreePair, width: int | None = None) -> list[TreeRow]:
    """Title, summary, a header and one row per key path, columns aligned. A container's
    static data goes on a row of its own below it; with `width`, the two value columns
    share it (never narrower than MIN_COLUMN), a longer value wrapping onto more rows."""
    def cell(tree: TreeRecord, index: int | None) -> tuple[str, str]:
        if index is None or not 0 <= index < len(tree.nodes):
            return "-", "dim"
        return node_text(tree.nodes[index], with_static=False)

    def static(tree: TreeRecord, index: int | None) -> str:
        if index is None or not 0 <= index < len(tree.nodes):
            return ""
        node = tree.nodes[index]
        return static_of(node) if node.kind == "node" else ""

    body = []
    for row in pair.rows:
        first = (pair.first_difference is not None and row.path == pair.first_difference
                 and row.status != "same")
        mark = (">", "first") if first else (MARKS.get(row.status, "?"),
                                             MARK_STYLES.get(row.status, ""))
        left, right = static(pair.left, row.left), static(pair.right, row.right)
        both = left if left == right else (f"{left or '-'}  vs  {right or '-'}"
                                           if left or right else "")
        body.append((mark, _cut(row.path or "(root)"), cell(pair.left, row.left),
                     cell(pair.right, row.right), both))
    heads = ("path", _header(pair.left, "left"), _header(pair.right, "right"))
    w_path = max([len(heads[0])] + [len(r[1]) for r in body])
    w_left = max([len(heads[1])] + [len(r[2][0]) for r in body])
    w_right = max([len(heads[2])] + [len(r[3][0]) for r in body])
    if width is not None and 6 + w_path + w_left + w_right > width:
        w_path = min(w_path, 30)
        share = max((width - 6 - w_path) // 2, MIN_COLUMN)
        w_left, w_right = min(w_left, share), min(w_right, share)
    ok = pair.first_difference is None
    rows = [TreeRow(((pair.title, "title"),)),
            TreeRow(((pair.summary, "same_structure" if ok else "differs"),)),
            TreeRow((("  ", ""), (_fit(heads[0], w_path).ljust(w_path), "head"), ("  ", ""),
                     (_fit(heads[1], w_left).ljust(w_left), "head"), ("  ", ""),
                     (_fit(heads[2], w_right), "head"))),
            TreeRow((("─" * (w_path + w_left + w_right + 6), "dim"),))]
    for (mark, path, (left, lstyle), (right, rstyle), both) in body:
        # A value wider than its column wraps onto rows below (the gradient's values are
        # the point of the view: never cut).
        lefts, rights = _wrap(left, w_left), _wrap(right, w_right)
        for i in range(max(len(lefts), len(rights))):
            first_row = i == 0
            rows.append(TreeRow((
                (mark[0] + " " if first_row else "  ", mark[1] if first_row else ""),
                ((_fit(path, w_path) if first_row else "").ljust(w_path), ""), ("  ", ""),
                ((lefts[i] if i < len(lefts) else "").ljust(w_left), lstyle), ("  ", ""),
                (rights[i] if i < len(rights) else "", rstyle))))
        if both:
            rows.append(TreeRow((("  " + " " * w_path + "  ", ""), ("static: ", "static"),
                                 (both, ""))))
    rows.append(TreeRow(()))
    return rows


def tree_rows(tree: TreeRecord) -> list[TreeRow]:
    """A tree with guide lines, one node per row, in preorder (as recorded)."""
    head = f"{tree.name} ({tree.role})" if tree.role else tree.name
    rows = [TreeRow(((head, "title"),))]
    if not tree.nodes:
        rows.append(TreeRow(((f"<empty tree{': ' + tree.note if tree.note else ''}>", "dim"),)))
        return rows + [TreeRow(())]
    nodes = tree.nodes
    by_index = {n.index: n for n in nodes}
    # The guide each node's children inherit: "│   " below a node with later siblings.
    inherited: dict[int, str] = {}
    for node in nodes:
        parent = by_index.get(node.parent) if node.parent is not None else None
        if parent is None:
            guide, key = "", f"{tree.name}: "
            inherited[node.index] = ""
        else:
            last = not parent.children or parent.children[-1] == node.index
            base = inherited.get(parent.index, "")
            guide = base + ("└── " if last else "├── ")
            inherited[node.index] = base + ("    " if last else "│   ")
            key = f"{node.key}: "
        text, style = node_text(node)
        rows.append(TreeRow(((guide, "dim"), (key, ""), (text, style))))
    if tree.note:
        rows.append(TreeRow(((f"({tree.note})", "dim"),)))
    return rows + [TreeRow(())]


def call_tree_rows(call: Call, width: int | None = None) -> list[TreeRow]:
    """Each pair (an input and its gradient) side by side, then the trees in no pair."""
    pairs = tuple(call.pairs)
    paired = {(p.left.role, p.left.name) for p in pairs}
    paired |= {(p.right.role, p.right.name) for p in pairs}
    rows: list[TreeRow] = []
    for pair in pairs:
        rows += pair_rows(pair, width)
    for tree in call.trees:
        if (tree.role, tree.name) not in paired:
            rows += tree_rows(tree)
    if not rows and not call.diagnostics:
        rows.append(TreeRow((("no pytree records in this call (recorded by an older workbench?)",
                              "dim"),)))
    return rows


def leaf_count(call: Call) -> int:
    return sum(1 for t in call.trees for n in t.nodes if n.kind == "leaf")
