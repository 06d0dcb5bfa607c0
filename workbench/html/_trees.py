"""Pytrees as HTML: a tree's nodes with their values, and two trees paired key path by key path
(an input and its gradient, or a structure mismatch with the first difference marked)."""
from __future__ import annotations

from transforms.model import TreeNode, TreePair, TreeRecord

from ..render.pytree import leaf_value_text, short_type, static_text, tree_header
from ._blocks import DEFAULT, Budget, details, h, more, table

__all__ = ["node_html", "pair_html", "tree_html"]


def node_html(node: TreeNode, budget: Budget) -> str:
    """One node: a container's type and static data, a leaf's aval and value or tracer."""
    if node.kind in ("error", "cycle", "truncated"):
        return f'<span class="failed">&lt;{h(node.kind)}: {h(node.note, budget.line_chars)}&gt;</span>'
    if node.kind == "none":
        return '<span class="dim">None</span>'
    if node.kind == "leaf":
        text = h(node.aval) or h(short_type(node.type_name))
        if node.static_leaf:
            text += ' <span class="dim">static</span>'
        if node.traced:
            text += f" <b>traced</b> {h(node.tracer, budget.line_chars)}"
        value, origin = leaf_value_text(node)
        if value is not None:
            text += f" = {h(value, budget.line_chars)}"
            if origin:
                text += f' <span class="dim">({h(origin)})</span>'
    else:
        text = f"<b>{h(short_type(node.type_name))}</b>"
        static = static_text(node) if node.static else node.aux
        if static:
            text += f' <span class="dim">static: {h(static, budget.line_chars)}</span>'
    if node.note:
        text += f' <span class="failed">({h(node.note, budget.line_chars)})</span>'
    return text


def tree_html(tree: TreeRecord, budget: Budget = DEFAULT) -> str:
    """One pytree, a row per node in preorder, indented by depth."""
    rows = [(f'<span style="padding-left:{min(n.depth, 20)}em">{h(n.path) or "(root)"}</span>',
             node_html(n, budget)) for n in tree.nodes[:budget.tree_rows]]
    body = table(["path", "value"], rows) + more(len(tree.nodes) - budget.tree_rows, "node")
    if tree.note:
        body += f'<p class="dim">({h(tree.note)})</p>'
    summary = f"<b>{h(tree_header(tree, tree.role))}</b> <span class=\"dim\">{h(tree.treedef, 200)}</span>"
    return details(summary, body, opened=len(tree.nodes) <= 40)


def _cell(tree: TreeRecord, index: int | None, budget: Budget) -> str:
    if index is None or not 0 <= index < len(tree.nodes):
        return '<span class="dim">-</span>'
    return node_html(tree.nodes[index], budget)


def pair_html(pair: TreePair, budget: Budget = DEFAULT) -> str:
    """Two trees side by side by key path; the first structural difference marked."""
    rows = []
    for row in pair.rows[:budget.tree_rows]:
        first = row.path == pair.first_difference and row.status != "same"
        mark = "&gt; first difference" if first else h(row.status)
        note = f' <span class="dim">{h(row.note)}</span>' if row.note else ""
        rows.append((h(row.path) or "(root)", _cell(pair.left, row.left, budget),
                     _cell(pair.right, row.right, budget), mark + note, row.status))
    cells = [r[:4] for r in rows]
    kinds = [r[4] for r in rows]
    headers = ["path", h(tree_header(pair.left, "left")), h(tree_header(pair.right, "right")), ""]
    body = table(headers, cells, kinds)
    body += more(len(pair.rows) - budget.tree_rows, "row")
    status = "ok" if pair.same_structure else "failed"
    summary = (f"<b>{h(pair.title)}</b> <span class=\"{status}\">{h(pair.summary)}</span>")
    return details(summary, body, opened=True)

