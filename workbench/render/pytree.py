"""Rich renderables for pytrees: a tree with avals and static data, and two
trees side by side (inputs vs gradients, primal vs tangent) with differences marked.

Each reads `transforms.model` trees only and never crashes its caller: a
failure renders as `<render-error ...>`.
"""
from __future__ import annotations

from typing import Any, Callable

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from transforms.model import TreeNode, TreePair, TreeRecord

from .._safe_text import terminal as _t
from ._safe import safe
from .diagnostics import DiagnosticsView

_MARKS = {"same": " ", "differs": "~", "left_only": "-", "right_only": "+"}
_MARK_STYLES = {"same": "", "differs": "yellow", "left_only": "red", "right_only": "green"}


def short_type(type_name: str) -> str:
    """`corpus.NTContainer` -> `NTContainer`: views have little room."""
    return _t(type_name.rsplit(".", 1)[-1])


def static_text(node: TreeNode) -> str:
    return _t(", ".join(f"{k}={v}" for k, v in node.static))


def leaf_value_text(node: TreeNode) -> tuple[str | None, str]:
    """A leaf's values as text (None for none) and where they came from ("" the call itself,
    "replayed"): the terminal's views and workbench.html show the same."""
    if node.summary is not None:  # a jit's arguments too: their values, bound before the trace
        return node.summary.describe(), node.summary.origin
    if node.value is not None and not node.traced:
        return node.value, ""
    return None, ""


# --- node labels: an ordered handler chain, most specific first -----------------------
# Each handler returns a Text, or NotImplemented to pass the node on.

def _label_problem(node: TreeNode) -> Any:
    if node.kind not in ("error", "cycle", "truncated"):
        return NotImplemented
    return Text.assemble((f"<{_t(node.kind)}: {_t(node.note)}>", "red"))


def _label_leaf(node: TreeNode) -> Any:
    if node.kind != "leaf":
        return NotImplemented
    text = Text.assemble((_t(node.aval) or short_type(node.type_name), "cyan"))
    if node.static_leaf:  # a library's wrapper kept it out of the trace (eqx.filter_jit)
        text.append("  static", style="magenta")
    if node.traced:
        text.append("  traced ", style="bold")
        text.append(_t(node.tracer))
    value, origin = leaf_value_text(node)
    if value is not None:
        text.append(f" = {_t(value)}")
        if origin:
            text.append(f"  ({_t(origin)})", style="dim")
    if node.note:
        text.append(f"  ({_t(node.note)})", style="red")
    return text


def _label_none(node: TreeNode) -> Any:
    return Text("None", style="dim") if node.kind == "none" else NotImplemented


def _label_node(node: TreeNode) -> Any:
    text = Text(short_type(node.type_name), style="bold")
    if node.static:
        text.append("  static: ", style="magenta")
        text.append(static_text(node))
    elif node.aux:
        text.append("  static: ", style="magenta")
        text.append(_t(node.aux))
    if node.note:
        text.append(f"  ({_t(node.note)})", style="red")
    return text


LABEL_HANDLERS: list[Callable[[TreeNode], Any]] = [_label_problem, _label_leaf, _label_none,
                                                   _label_node]


def node_label(node: TreeNode) -> Text:
    for handler in LABEL_HANDLERS:
        out = handler(node)
        if out is not NotImplemented:
            return out
    return Text(_t(repr(node.kind)))


class TreeView:
    """One pytree: containers with their static data, leaves with avals and tracers."""

    def __init__(self, tree: TreeRecord, title: str | None = None):
        self.tree = tree
        self.title = title

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield safe(self._build, "pytree")

    def _build(self) -> RenderableType:
        record = self.tree
        head = Text(_t(self.title if self.title is not None
                       else f"{record.name} ({record.role})"), style="bold")
        if not record.nodes:
            return Group(head, Text(f"<empty tree{': ' + _t(record.note) if record.note else ''}>",
                                    style="dim"))
        root = record.nodes[0]
        label = Text(f"{_t(record.name)}: ")
        label.append_text(node_label(root))
        view = Tree(label, guide_style="dim")
        branches: dict[int, Tree] = {0: view}
        # Nodes are in preorder, each after its parent: one pass builds the tree.
        for node in record.nodes[1:]:
            parent = branches.get(node.parent) if node.parent is not None else None
            if parent is None:
                continue
            label = Text(f"{_t(node.key)}: ")
            label.append_text(node_label(node))
            branches[node.index] = parent.add(label)
        parts: list[RenderableType] = [head, view]
        if record.note:
            parts.append(Text(f"({_t(record.note)})", style="dim"))
        return Group(*parts)


def _cell(tree: TreeRecord, index: int | None) -> Text:
    if index is None or index >= len(tree.nodes):
        return Text("-", style="dim")
    node = tree.nodes[index]
    if node.kind == "node":
        text = Text(short_type(node.type_name))
        if node.static:
            text.append(f" [{static_text(node)}]", style="magenta")
        elif node.aux:
            text.append(f" [{_t(node.aux)}]", style="magenta")
        return text
    if node.kind == "leaf":
        text = Text(_t(node.aval) or short_type(node.type_name), style="cyan")
        if node.traced:
            text.append(" traced")
        value, origin = leaf_value_text(node)
        if value is not None:  # as the tree view shows it: NumPy's print, or statistics
            text.append(f" = {_t(value)}")
            if origin:
                text.append(f"  ({_t(origin)})", style="dim")
        return text
    return node_label(node)


def tree_header(tree: TreeRecord, default: str) -> str:
    """`container (gradient)`: a tree's column title beside another tree."""
    # Both sides often share a name (`container` and its gradient): the role tells them apart.
    name = tree.name or default
    return f"{name} ({tree.role})" if tree.role and tree.role != name else name


class PairView:
    """Two trees row by row, by key path; `~` differs, `-` only left, `+` only right,
    `>` the first structural difference."""

    def __init__(self, pair: TreePair):
        self.pair = pair

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield safe(self._build, "pytree pair")

    def _build(self) -> RenderableType:
        pair = self.pair
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        table.add_column("", width=1, no_wrap=True)
        table.add_column("path", no_wrap=True)
        table.add_column(tree_header(pair.left, "left"), overflow="fold")
        table.add_column(tree_header(pair.right, "right"), overflow="fold")
        for row in pair.rows:
            first = pair.first_difference is not None and row.path == pair.first_difference \
                and row.status != "same"
            mark = ">" if first else _MARKS.get(row.status, "?")
            style = "bold red" if first else _MARK_STYLES.get(row.status, "")
            table.add_row(Text(mark, style=style), Text(row.path or "(root)"),
                          _cell(pair.left, row.left), _cell(pair.right, row.right))
        summary = Text(pair.summary, style="yellow" if pair.first_difference is not None
                       else "green")
        return Group(Text(pair.title, style="bold"), summary, table)


class CallTreesView:
    """A call's pytrees: each pair (an input and its gradient) side by side, the
    trees in no pair on their own, then the pre-trace check's findings."""

    def __init__(self, call: Any):
        self.call = call

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield safe(self._build, "pytrees")

    def _build(self) -> RenderableType:
        call = self.call
        pairs = tuple(call.pairs)
        paired = {(p.left.role, p.left.name) for p in pairs}
        paired |= {(p.right.role, p.right.name) for p in pairs}
        parts: list[RenderableType] = [PairView(p) for p in pairs]
        parts += [TreeView(t) for t in call.trees if (t.role, t.name) not in paired]
        diagnostics = tuple(call.diagnostics)
        if diagnostics:
            parts.append(DiagnosticsView(diagnostics))
        if not parts:
            return Text("no pytree records in this call (recorded by an older workbench?)",
                        style="dim")
        return Group(*parts)
