"""The pytree view's rows as plain data: a call's tree pairs and trees, one row per line.

Nothing here imports Textual. `call_tree_rows` returns `TreeRows`: blocks of
rows (a pair side by side, a tree with guide lines) that make each row's
pieces only when it is asked for, so a 10,000-leaf call costs one pass over
its nodes (their texts, for the columns' widths) to show, and nothing more
until a row is drawn. A row is (text, style name) pieces, padded to its
table's column widths.
"""
from __future__ import annotations

import bisect
import itertools
from typing import NamedTuple, Sequence

from transforms.model import Call, TreeNode, TreePair, TreeRecord

from .._safe_text import terminal

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

    @property
    def plain(self) -> str:
        return "".join(text for text, _ in self.pieces)


def short_type(type_name: str) -> str:
    return type_name.rsplit(".", 1)[-1]


def _cut(text: str) -> str:
    text = terminal(text.replace("\n", " "))  # recorded text: shown safely, escapes visible
    return text if len(text) <= MAX_CELL else text[:MAX_CELL - 1] + "…"


def static_of(node: TreeNode) -> str:
    return terminal(", ".join(f"{k}={v}" for k, v in node.static) if node.static else node.aux)


def node_text(node: TreeNode, with_static: bool = True) -> tuple[str, str]:
    """A node as (text, style): a leaf's aval and concrete value, a container's type and
    static data, or what went wrong describing it."""
    kind = node.kind
    if kind == "leaf":
        text = node.aval or short_type(node.type_name)
        if node.traced:
            text += f"  traced {node.tracer}" if node.tracer else "  traced"
        if node.summary is not None:  # a jit's arguments too: bound before the trace
            text += f" = {node.summary.describe()}"
            text += f"  ({node.summary.origin})" if node.summary.origin else ""
        elif node.value is not None and not node.traced:
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


def wrap(text: str, width: int) -> list[str]:
    """Greedy wrap at spaces (a value's `, `), hard where a word is longer than the width."""
    width = max(width, 1)
    out = []
    while len(text) > width:
        cut = text.rfind(" ", 0, width + 1)
        if cut <= 0:
            cut = width
        out.append(text[:cut])
        text = text[cut:].lstrip(" ")
    out.append(text)
    return out


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(width - 1, 0)] + "…"


class Block:
    """A run of rows made on demand."""

    def __len__(self) -> int:
        raise NotImplementedError

    def row(self, i: int) -> TreeRow:
        raise NotImplementedError

    def search(self, q: str) -> list[int]:
        """Rows (of this block) whose text holds q, lower-cased already."""
        return [i for i in range(len(self)) if q in self.row(i).plain.lower()]

    width = 0


class Fixed(Block):
    """A few rows made up front (titles, headers)."""

    def __init__(self, rows: Sequence[TreeRow]):
        self.rows = list(rows)
        self.width = max((len(r.plain) for r in self.rows), default=0)

    def __len__(self) -> int:
        return len(self.rows)

    def row(self, i: int) -> TreeRow:
        return self.rows[i]


def _header(tree: TreeRecord, default: str) -> str:
    name = tree.name or default
    return terminal(f"{name} ({tree.role})" if tree.role and tree.role != name else name)


class PairBlock(Block):
    """Two trees row by row, by key path; a value wider than its column wraps onto rows
    below (the gradient's values are the point of the view: never cut), a container's
    static data on a row of its own."""

    def __init__(self, pair: TreePair, width: int | None):
        def cell(tree: TreeRecord, index: int | None) -> tuple[str, str]:
            if index is None or not 0 <= index < len(tree.nodes):
                return "-", "dim"
            return node_text(tree.nodes[index], with_static=False)

        def static(tree: TreeRecord, index: int | None) -> str:
            if index is None or not 0 <= index < len(tree.nodes):
                return ""
            node = tree.nodes[index]
            return static_of(node) if node.kind == "node" else ""

        first = pair.first_difference
        entries = []
        for row in pair.rows:
            is_first = first is not None and row.path == first and row.status != "same"
            mark = (">", "first") if is_first else (MARKS.get(row.status, "?"),
                                                    MARK_STYLES.get(row.status, ""))
            left_static, right_static = static(pair.left, row.left), static(pair.right, row.right)
            both = left_static if left_static == right_static else (
                f"{left_static or '-'}  vs  {right_static or '-'}"
                if left_static or right_static else "")
            entries.append((mark, _cut(row.path or "(root)"), cell(pair.left, row.left),
                            cell(pair.right, row.right), both))
        heads = ("path", _header(pair.left, "left"), _header(pair.right, "right"))
        w_path = max([len(heads[0])] + [len(e[1]) for e in entries])
        w_left = max([len(heads[1])] + [len(e[2][0]) for e in entries])
        w_right = max([len(heads[2])] + [len(e[3][0]) for e in entries])
        if width is not None and 6 + w_path + w_left + w_right > width:
            w_path = min(w_path, 30)
            share = max((width - 6 - w_path) // 2, MIN_COLUMN)
            w_left, w_right = min(w_left, share), min(w_right, share)
        self.widths = (w_path, w_left, w_right)
        self.entries = entries
        self.head = [
            TreeRow(((terminal(pair.title), "title"),)),
            TreeRow(((terminal(pair.summary), "same_structure" if first is None else "differs"),)),
            TreeRow((("  ", ""), (_fit(heads[0], w_path).ljust(w_path), "head"), ("  ", ""),
                     (_fit(heads[1], w_left).ljust(w_left), "head"), ("  ", ""),
                     (_fit(heads[2], w_right), "head"))),
            TreeRow((("─" * (w_path + w_left + w_right + 6), "dim"),))]
        # Rows per entry: its wrapped lines, and one for static data.
        counts = [max(self._lines(e[2][0], w_left), self._lines(e[3][0], w_right))
                  + (1 if e[4] else 0) for e in entries]
        self.starts = list(itertools.accumulate(counts, initial=len(self.head)))
        self.count = self.starts[-1] + 1  # and a blank row after
        statics = max((len(e[4]) for e in entries), default=0)
        self.width = max(w_path + w_left + w_right + 6, w_path + 12 + statics,
                         max(len(r.plain) for r in self.head))
        self._cached: tuple[int, list[TreeRow]] | None = None

    def search(self, q: str) -> list[int]:
        found = [i for i, r in enumerate(self.head) if q in r.plain.lower()]
        for n, (_, path, (left, _ls), (right, _rs), both) in enumerate(self.entries):
            if q in f"{path}\0{left}\0{right}".lower():
                found.append(self.starts[n])
            if both and q in f"static: {both}".lower():  # its own row, the entry's last
                found.append(self.starts[n + 1] - 1)
        return found

    @staticmethod
    def _lines(text: str, width: int) -> int:
        return 1 if len(text) <= width else len(wrap(text, width))

    def __len__(self) -> int:
        return self.count

    def row(self, i: int) -> TreeRow:
        if i < len(self.head):
            return self.head[i]
        if i >= self.starts[-1]:
            return TreeRow(())
        n = bisect.bisect_right(self.starts, i) - 1
        return self._entry_rows(n)[i - self.starts[n]]

    def _entry_rows(self, n: int) -> list[TreeRow]:
        if self._cached is not None and self._cached[0] == n:
            return self._cached[1]
        w_path, w_left, w_right = self.widths
        (mark, mstyle), path, (left, lstyle), (right, rstyle), both = self.entries[n]
        lefts, rights = wrap(left, w_left), wrap(right, w_right)
        rows = []
        for i in range(max(len(lefts), len(rights))):
            first = i == 0
            rows.append(TreeRow((
                (mark + " " if first else "  ", mstyle if first else ""),
                ((_fit(path, w_path) if first else "").ljust(w_path), ""), ("  ", ""),
                ((lefts[i] if i < len(lefts) else "").ljust(w_left), lstyle), ("  ", ""),
                (rights[i] if i < len(rights) else "", rstyle))))
        if both:
            rows.append(TreeRow((("  " + " " * w_path + "  ", ""), ("static: ", "static"),
                                 (both, ""))))
        self._cached = (n, rows)
        return rows


class TreeBlock(Block):
    """One tree with guide lines, a node per row, in preorder (as recorded)."""

    def __init__(self, tree: TreeRecord):
        self.tree = tree
        head = f"{tree.name} ({tree.role})" if tree.role else tree.name
        self.head = TreeRow(((terminal(head), "title"),))
        nodes = tree.nodes
        by_index = {n.index: n for n in nodes}
        # The guide each node's children inherit: "│   " below a node with later siblings.
        inherited: dict[int, str] = {}
        self.prefixes: list[tuple[str, str]] = []
        for node in nodes:
            parent = by_index.get(node.parent) if node.parent is not None else None
            if parent is None:
                self.prefixes.append(("", f"{terminal(tree.name)}: "))
                inherited[node.index] = ""
                continue
            last = not parent.children or parent.children[-1] == node.index
            base = inherited.get(parent.index, "")
            self.prefixes.append((base + ("└── " if last else "├── "), f"{terminal(node.key)}: "))
            inherited[node.index] = base + ("    " if last else "│   ")
        self.texts = [node_text(node) for node in nodes]
        self.tail = ([TreeRow(((f"<empty tree{': ' + tree.note if tree.note else ''}>", "dim"),))]
                     if not nodes else [])
        if tree.note and nodes:
            self.tail.append(TreeRow(((f"({tree.note})", "dim"),)))
        self.tail.append(TreeRow(()))
        self.width = max([len(head)] + [len(g) + len(k) + len(t[0]) for (g, k), t in
                                        zip(self.prefixes, self.texts)])

    def __len__(self) -> int:
        return 1 + len(self.texts) + len(self.tail)

    def search(self, q: str) -> list[int]:
        found = [0] if q in self.head.plain.lower() else []
        found += [1 + i for i, ((_, key), (text, _s)) in enumerate(zip(self.prefixes, self.texts))
                  if q in f"{key}{text}".lower()]
        base = 1 + len(self.texts)
        return found + [base + i for i, r in enumerate(self.tail) if q in r.plain.lower()]

    def row(self, i: int) -> TreeRow:
        if i == 0:
            return self.head
        i -= 1
        if i < len(self.texts):
            (guide, key), (text, style) = self.prefixes[i], self.texts[i]
            return TreeRow(((guide, "dim"), (key, ""), (text, style)))
        return self.tail[i - len(self.texts)]


class TreeRows:
    """The view's rows, block after block; rows[i] makes row i."""

    def __init__(self, blocks: Sequence[Block]):
        self.blocks = [b for b in blocks if len(b)]
        self.starts = [0, *itertools.accumulate(len(b) for b in self.blocks)]
        self.width = max((b.width for b in self.blocks), default=0)

    def __len__(self) -> int:
        return self.starts[-1]

    def __getitem__(self, i: int) -> TreeRow:
        if not 0 <= i < len(self):
            raise IndexError(i)
        n = bisect.bisect_right(self.starts, i) - 1
        return self.blocks[n].row(i - self.starts[n])

    def search(self, query: str) -> list[int]:
        """Rows whose text holds `query`, case-insensitive."""
        q = query.lower()
        return [start + i for start, block in zip(self.starts, self.blocks)
                for i in block.search(q)]


def call_tree_rows(call: Call, width: int | None = None) -> TreeRows:
    """Each pair (an input and its gradient) side by side, then the trees in no pair;
    with `width`, the pairs' columns fitted to it."""
    pairs = tuple(call.pairs)
    paired = {(p.left.role, p.left.name) for p in pairs}
    paired |= {(p.right.role, p.right.name) for p in pairs}
    blocks: list[Block] = [PairBlock(pair, width) for pair in pairs]
    blocks += [TreeBlock(tree) for tree in call.trees if (tree.role, tree.name) not in paired]
    if not blocks and not call.diagnostics:
        blocks.append(Fixed([TreeRow(((
            "no pytree records in this call (recorded by an older workbench?)", "dim"),))]))
    return TreeRows(blocks)


def leaf_count(call: Call) -> int:
    return sum(1 for t in call.trees for n in t.nodes if n.kind == "leaf")
