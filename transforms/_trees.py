"""Live pytrees -> TreeRecords, and trees paired node by node.

A tree is walked one level at a time with JAX's public flattening
(`tree_flatten_with_path` with an `is_leaf` that stops below the node), with
an explicit stack: no recursion, so a 10,000-level structure or a cycle gives
a record with a note, never a RecursionError. Every user function (a custom
node's flatten, an aux `repr`) is called inside a guard.
"""
from __future__ import annotations

import ast
import copy
import dataclasses
import functools
import inspect
import re
import sys
import weakref
from typing import Any, Callable, Iterable, NamedTuple

import jax
import numpy as np
from jax import tree_util

from ._interpreters import Tracer
from ._snapshot import describe_concrete, leaf_value
from .model import PairRow, TreeNode, TreePair, TreeRecord, ValueRecord

MAX_NODES = 2000    # per tree: larger trees end in a "truncated" node
MAX_DEPTH = 100     # deeper nodes end in a "truncated" node
_MAX_TEXT = 120

# Containers JAX flattens natively: their aux data is structure, not user static data.
_BUILTIN_NODES = frozenset({tuple, list, dict, type(None)})


def safe_text(x: Any, limit: int = _MAX_TEXT) -> str:
    """repr(x), or a note when its repr raises; shortened to `limit` characters."""
    try:
        text = repr(x)
    except Exception as e:  # a user object whose repr raises
        return f"<repr-error {type(e).__name__}>"
    if not isinstance(text, str):
        return f"<repr-error {type(text).__name__}>"
    return text if len(text) <= limit else text[:limit - 1] + "…"


_qualified_names: dict[int, tuple[Any, str]] = {}


def qualified_name(cls: Any) -> str:
    # Once per class (keyed by id, the class kept to rule out a reused id):
    # trees are built on every recorded call.
    hit = _qualified_names.get(id(cls))
    if hit is None or hit[0] is not cls:
        hit = _qualified_names[id(cls)] = (cls, _qualified_name(cls))
    return hit[1]


def _qualified_name(cls: Any) -> str:
    try:
        module = getattr(cls, "__module__", "") or ""
        name = getattr(cls, "__qualname__", None) or getattr(cls, "__name__", None)
        if not isinstance(name, str):
            return safe_text(cls)
        if module in ("builtins", "") or not isinstance(module, str):
            return name
        if module.startswith("jaxlib") or module.startswith("jax."):
            module = "jax"  # ArrayImpl lives in jaxlib: users know it as jax.Array
            name = "Array" if name == "ArrayImpl" else name
        return f"{module}.{name}"
    except Exception as e:  # a metaclass with a raising __getattr__
        return f"<type-error {type(e).__name__}>"


def is_custom_node(type_: Any, aux: Any) -> bool:
    """A registered node with user static data (not a builtin container or a plain namedtuple)."""
    if type_ in _BUILTIN_NODES:
        return False
    if aux is None and isinstance(type_, type) and issubclass(type_, tuple):
        return False  # JAX's own namedtuple handling
    return True


def flatten_one(x: Any) -> tuple[list, Any]:
    """Children (with key paths) and treedef of `x`'s top node only; raises what flatten raises."""
    first = [True]

    def stop_below_root(y):
        # The first call is the root itself; everything below is a child.
        if first[0]:
            first[0] = False
            return False
        return True

    return tree_util.tree_flatten_with_path(x, is_leaf=stop_below_root)


def _attributes(x: Any) -> list[tuple[str, Any]]:
    """Named attributes, used to name aux values and anonymous children."""
    try:
        fields = getattr(type(x), "_fields", None)
        if isinstance(fields, tuple):
            return [(f, getattr(x, f)) for f in fields if isinstance(f, str)]
        names = getattr(type(x), "__dataclass_fields__", None)
        if isinstance(names, dict):
            return [(f, getattr(x, f)) for f in names]
        d = getattr(x, "__dict__", None)
        if isinstance(d, dict):
            return [(k, v) for k, v in d.items() if isinstance(k, str)]
    except Exception:  # an attribute that raises: name nothing rather than fail
        return []
    return []


def _name_of(value: Any, attrs: list[tuple[str, Any]], used: set[str]) -> str | None:
    for name, v in attrs:
        if v is value and name not in used:
            used.add(name)
            return name
    return None


_key_texts: dict[Any, str] = {}


def _key_text(key_path: tuple) -> str:
    key_path = tuple(key_path)
    try:
        text = _key_texts.get(key_path)
    except TypeError:  # a key JAX accepts but that does not hash
        text = None
    if text is None:
        try:
            text = tree_util.keystr(key_path)
        except Exception as e:
            return f"[<key-error {type(e).__name__}>]"
        try:
            if len(_key_texts) > 10_000:
                _key_texts.clear()
            _key_texts[key_path] = text
        except TypeError:
            pass
    return text


class TreeBuilder:
    """Builds one TreeRecord from a live object; `describe` turns a leaf into a ValueRecord."""

    def __init__(self, describe: Callable[[Any], ValueRecord] | None = None,
                 max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH):
        self.describe = describe or _describe_leaf
        self.max_nodes = max_nodes
        self.max_depth = max_depth

    def build(self, obj: Any, role: str, name: str, argnum: int | None = None) -> TreeRecord:
        """The tree of `obj`; its structure is built once per PyTreeDef, then only leaves."""
        try:
            leaves, treedef = tree_util.tree_flatten(obj)
            key = (treedef, self.max_nodes, self.max_depth)
            skeleton = _skeletons.get(key)
        except Exception:  # cyclic, too deep, a raising flatten, unhashable aux data
            return self._walk(obj, role, name, argnum)
        if skeleton is None:
            record = self._walk(obj, role, name, argnum)
            _remember(key, record, len(leaves))
            return record
        text, skeleton_nodes, leaf_indices = skeleton
        nodes = list(skeleton_nodes)
        for i, leaf in zip(leaf_indices, leaves):
            nodes[i] = self._fill_leaf(nodes[i], leaf)
        return TreeRecord(role, name, text, tuple(nodes), argnum, "")

    def _fill_leaf(self, node: TreeNode, x: Any) -> TreeNode:
        """A cached leaf node with this call's leaf: as `_leaf` makes it, without the dict."""
        type_name = qualified_name(type(x))
        try:
            rec = self.describe(x)
        except Exception as e:  # a leaf we cannot describe still gets a node
            return TreeNode(node.index, node.parent, node.depth, node.key, node.path, "leaf",
                            type_name, note=f"not described: {type(e).__name__}")
        traced = rec.is_tracer
        return TreeNode(node.index, node.parent, node.depth, node.key, node.path, "leaf",
                        type_name, "", (), (), rec.aval, leaf_value(x, rec), traced,
                        rec.describe() if traced else "", "")

    def _walk(self, obj: Any, role: str, name: str, argnum: int | None) -> TreeRecord:
        nodes: list[dict] = []
        ids: list[int] = []      # id() of each node's object, for cycle checks up the path
        note = ""
        treedef = _treedef_text(obj)
        # (object, parent index, depth, key, path); children pushed reversed: preorder.
        stack: list[tuple[Any, int | None, int, str, str]] = [(obj, None, 0, "", "")]
        while stack:
            x, parent, depth, key, path = stack.pop()
            index = len(nodes)
            if index >= self.max_nodes:
                note = f"truncated at {self.max_nodes} nodes"
                nodes.append(_fields(index, parent, depth, key, path, "truncated", "",
                                     note=f"more than {self.max_nodes} nodes: not shown"))
                ids.append(0)
                break
            ids.append(id(x))
            if parent is not None:
                nodes[parent]["children"].append(index)
            if depth >= self.max_depth:
                note = note or f"truncated at depth {self.max_depth}"
                nodes.append(_fields(index, parent, depth, key, path, "truncated",
                                     qualified_name(type(x)),
                                     note=f"deeper than {self.max_depth} levels: not shown"))
                continue
            if _on_path(ids, nodes, parent, id(x)):
                nodes.append(_fields(index, parent, depth, key, path, "cycle",
                                     qualified_name(type(x)),
                                     note="cycle: this object contains itself"))
                continue
            nodes.append(self._node(x, index, parent, depth, key, path, stack))
        return TreeRecord(role, name, treedef, tuple(_freeze(n) for n in nodes), argnum, note)

    def _node(self, x: Any, index: int, parent: int | None, depth: int, key: str, path: str,
              stack: list) -> dict:
        type_name = qualified_name(type(x))
        if isinstance(x, _LEAF_TYPES):  # JAX's leaves for sure: no flatten needed
            return self._leaf(x, index, parent, depth, key, path, type_name)
        builtin = _builtin_children(x)
        if builtin is not None:  # no JAX flatten needed: the common case, kept cheap
            stack.extend(reversed([(child, index, depth + 1, k, path + k) for k, child in builtin]))
            return _fields(index, parent, depth, key, path, "node", type_name)
        try:
            keyed, td = flatten_one(x)
        except Exception as e:  # the user's flatten raised (or JAX refused the object)
            return _fields(index, parent, depth, key, path, "error", type_name,
                           note=f"flatten raised {type(e).__name__}: {_message(e)}")
        if td.num_nodes == 1 and td.num_leaves == 1:
            return self._leaf(x, index, parent, depth, key, path, type_name)
        try:
            node_data = td.node_data()
        except Exception as e:
            node_data = None
            error_note = f"node data unavailable: {type(e).__name__}"
        else:
            error_note = ""
        if td.num_nodes == 1 and td.num_leaves == 0 and x is None:
            return _fields(index, parent, depth, key, path, "none", "None")
        node_type, aux = node_data if node_data is not None else (type(x), None)
        fields = _fields(index, parent, depth, key, path, "node", qualified_name(node_type),
                         note=error_note)
        attrs: list = []
        used: set[str] = set()
        if is_custom_node(node_type, aux):
            attrs = _attributes(x)
            fields["aux"] = safe_text(aux)
            fields["static"] = tuple(_static_fields(aux, attrs, used, node_type))
        children = []
        for key_path, child in keyed:
            child_key = _key_text(key_path)
            if attrs and child_key.startswith("[<flat index"):
                # A node registered without keys: name the child by the attribute holding it.
                attr = _name_of(child, attrs, used)
                if attr is not None:
                    child_key = "." + attr
            children.append((child, index, depth + 1, child_key, path + child_key))
        stack.extend(reversed(children))
        return fields

    def _leaf(self, x: Any, index, parent, depth, key, path, type_name) -> dict:
        fields = _fields(index, parent, depth, key, path, "leaf", type_name)
        try:
            rec = self.describe(x)
        except Exception as e:  # a leaf we cannot describe still gets a node
            fields["note"] = f"not described: {type(e).__name__}"
            return fields
        fields["aval"] = rec.aval
        fields["value"] = leaf_value(x, rec)
        if rec.is_tracer:
            fields["traced"] = True
            fields["tracer"] = rec.describe()
        return fields


_LEAF_TYPES = (Tracer, jax.Array, np.ndarray, np.generic, bool, int, float, complex)

# (PyTreeDef, limits) -> (treedef text, nodes, indices of the leaf nodes in flatten order).
# Every recorded call builds its input and output trees, mostly of one structure
# again and again: the walk (and the user's flatten functions) run once per structure.
_skeletons: dict[tuple, tuple[str, tuple[TreeNode, ...], tuple[int, ...]]] = {}
_MAX_SKELETONS = 512


def _remember(key: tuple, record: TreeRecord, num_leaves: int) -> None:
    """Keep a walked tree's structure when it is complete and its leaves are JAX's."""
    if any(n.kind in ("error", "cycle", "truncated") for n in record.nodes):
        return
    leaf_indices = tuple(n.index for n in record.nodes if n.kind == "leaf")
    if len(leaf_indices) != num_leaves:
        return
    if len(_skeletons) >= _MAX_SKELETONS:
        _skeletons.clear()
    try:
        _skeletons[key] = (record.treedef, record.nodes, leaf_indices)
    except (TypeError, ValueError):  # aux data whose hash or == raises: walked every time
        return


def _builtin_children(x: Any) -> list[tuple[str, Any]] | None:
    """(key text, child) of a plain list, tuple or dict, as JAX orders and names them."""
    kind = type(x)
    if kind is list or kind is tuple:
        return [(f"[{i}]", child) for i, child in enumerate(x)]
    if kind is dict:
        try:
            keys = sorted(x)
        except TypeError:  # JAX's own flatten says what is wrong with these keys
            return None
        return [(f"[{k!r}]", x[k]) for k in keys]
    return None


def _describe_leaf(x: Any) -> ValueRecord:
    return describe_concrete(x)


def _treedef_text(obj: Any) -> str:
    try:
        return str(tree_util.tree_structure(obj))
    except Exception as e:  # cyclic, too deep, or a flatten that raises
        return f"<unavailable: {type(e).__name__}>"


def _on_path(ids: list[int], nodes: list[dict], parent: int | None, oid: int) -> bool:
    while parent is not None:
        if ids[parent] == oid:
            return True
        parent = nodes[parent]["parent"]
    return False


def _static_fields(aux: Any, attrs: list, used: set[str],
                   node_type: Any = None) -> Iterable[tuple[str, str]]:
    values = list(aux) if isinstance(aux, (tuple, list)) else [aux]
    names = _static_field_names(node_type)
    if names and len(values) >= len(names):
        # A dataclass's static fields (eqx.field(static=True), flax struct's
        # pytree_node=False) are its aux data, last and in field order: named by field.
        lead = len(values) - len(names)
        for i, value in enumerate(values[:lead]):
            if type(value).__name__ != "_Missing":  # equinox's "no __wrapped__" marker
                yield (f"aux[{i}]", safe_text(value))
        used.update(names)
        yield from ((name, safe_text(v)) for name, v in zip(names, values[lead:]))
        return
    named = _self_named_aux(values)
    if named is not None:
        yield from ((name, safe_text(v)) for name, v in named if not name.startswith("_"))
        return
    for i, value in enumerate(values):
        name = _name_of(value, attrs, used) if attrs else None
        yield (name if name is not None else f"aux[{i}]", safe_text(value))


def _is_names(x: Any) -> bool:
    return isinstance(x, tuple) and all(isinstance(n, str) for n in x)


def _self_named_aux(values: list) -> list[tuple[str, Any]] | None:
    """Aux data that names its own values: (name, value) pairs (flax nnx's Variable), or
    (child names, static names, static values) (flax nnx's Module and Pytree)."""
    if values and all(isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str)
                      for v in values):
        return [(v[0], v[1]) for v in values]
    if len(values) == 3 and _is_names(values[0]) and _is_names(values[1]) \
            and isinstance(values[2], tuple) and len(values[2]) == len(values[1]):
        return list(zip(values[1], values[2]))
    return None


_static_names: dict[int, tuple[Any, tuple[str, ...]]] = {}


def _static_field_names(node_type: Any) -> tuple[str, ...]:
    """The fields of a dataclass node type marked static in their metadata, once per type."""
    hit = _static_names.get(id(node_type))
    if hit is not None and hit[0] is node_type:
        return hit[1]
    names: tuple[str, ...] = ()
    try:
        if isinstance(node_type, type) and dataclasses.is_dataclass(node_type):
            names = tuple(f.name for f in dataclasses.fields(node_type)
                          if f.metadata.get("static") is True
                          or f.metadata.get("pytree_node") is False)
    except Exception:  # odd metadata: name by attribute as for any node
        names = ()
    _static_names[id(node_type)] = (node_type, names)
    return names


def _fields(index, parent, depth, key, path, kind, type_name, note="") -> dict:
    return {"index": index, "parent": parent, "depth": depth, "key": key, "path": path,
            "kind": kind, "type_name": type_name, "children": [], "note": note}


def _freeze(fields: dict) -> TreeNode:
    fields["children"] = tuple(fields["children"])
    return TreeNode(**fields)


def _message(e: BaseException) -> str:
    try:
        text = str(e)
    except Exception:
        return "<message unavailable>"
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= _MAX_TEXT else line[:_MAX_TEXT - 1] + "…"


# --- trees from a PyTreeDef (structure only) ------------------------------------

def treedef_tree(treedef: Any, role: str, name: str, leaves: list[str] | None = None) -> TreeRecord:
    """A TreeRecord of a PyTreeDef; `leaves` gives each leaf's aval text, in order."""
    nodes: list[dict] = []
    leaf_avals = iter(leaves or ())
    stack: list[tuple[Any, int | None, int, str, str]] = [(treedef, None, 0, "", "")]
    note = ""
    while stack:
        td, parent, depth, key, path = stack.pop()
        index = len(nodes)
        if index >= MAX_NODES:
            note = f"truncated at {MAX_NODES} nodes"
            break
        if parent is not None:
            nodes[parent]["children"].append(index)
        try:
            data = td.node_data()
            children = td.children()
        except Exception as e:
            nodes.append(_fields(index, parent, depth, key, path, "error", "?",
                                 note=f"{type(e).__name__}: {_message(e)}"))
            continue
        if data is None:
            fields = _fields(index, parent, depth, key, path, "leaf", "*")
            fields["aval"] = next(leaf_avals, "")
            nodes.append(fields)
            continue
        node_type, aux = data
        if node_type is type(None):
            nodes.append(_fields(index, parent, depth, key, path, "none", "None"))
            continue
        fields = _fields(index, parent, depth, key, path, "node", qualified_name(node_type))
        if is_custom_node(node_type, aux):
            fields["aux"] = safe_text(aux)
            fields["static"] = tuple((f"aux[{i}]", safe_text(v)) for i, v in
                                     enumerate(aux if isinstance(aux, (tuple, list)) else [aux]))
        nodes.append(fields)
        keys = _child_keys(node_type, aux, len(children))
        stack.extend(reversed([(c, index, depth + 1, k, path + k) for k, c in zip(keys, children)]))
    return TreeRecord(role, name, tree_text(treedef), tuple(_freeze(n) for n in nodes), None, note)


def _child_keys(node_type: Any, aux: Any, n: int) -> list[str]:
    fields = getattr(node_type, "_fields", None)
    if isinstance(fields, tuple) and len(fields) == n:
        return [f".{f}" for f in fields]
    if node_type is dict or (isinstance(aux, (list, tuple)) and isinstance(node_type, type)
                             and issubclass(node_type, dict) and len(aux) == n):
        return [f"[{safe_text(k)}]" for k in aux]
    if node_type in (tuple, list):
        return [f"[{i}]" for i in range(n)]
    return [f"[<flat index {i}>]" for i in range(n)]


def tree_text(x: Any) -> str:
    """str(x) for a PyTreeDef, whose aux data's repr may raise."""
    try:
        return str(x)
    except Exception as e:
        return f"<unavailable: {type(e).__name__}>"


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


# --- libraries' calling conventions: the user's arguments behind a library's wrapper -----
# eqx.filter_jit hands jit (dynamic_donate, dynamic_nodonate, static): the user's
# arguments split into array leaves and the rest; nnx.jit hands it NodeStates (a
# graph definition and flat leaves). Trees are named by what the user passed.

class UserView(NamedTuple):
    """The user's function and arguments behind a library's wrapper."""
    library: str              # "equinox.filter_jit"
    fun: Any
    args: tuple
    kwargs: dict
    static_leaves: tuple[tuple[bool, ...], ...]  # per argument, per leaf: kept static
    outputs: Callable[[Any], Any]  # the user's outputs from the wrapper's


def _combine_flat(dynamic: Any, static: Any) -> tuple[Any, tuple[bool, ...]]:
    """equinox's hashable_combine: flat dynamic leaves + (flat static leaves, treedef)."""
    static_leaves, treedef = static
    leaves = [d if s is None else s for d, s in zip(dynamic, static_leaves)]
    return tree_util.tree_unflatten(treedef, leaves), tuple(s is not None for s in static_leaves)


def _combine_trees(*trees: Any) -> Any:
    """equinox's combine: the first non-None leaf of trees of one structure."""
    def first(*xs):
        return next((x for x in xs if x is not None), None)
    return tree_util.tree_map(first, *trees, is_leaf=lambda x: x is None)


def _equinox_filter_jit(fun: Any, args: tuple, kwargs: dict) -> UserView | None:
    code = getattr(fun, "__code__", None)
    if getattr(fun, "__module__", "") != "equinox._jit" or code is None \
            or code.co_name != "fun_wrapped" or len(args) != 3 or kwargs:
        return None
    dynamic_donate, dynamic_nodonate, static = args
    dynamic = {**dynamic_donate, **dynamic_nodonate}
    static_fun, static_first, static_rest = static
    user_fun, _ = _combine_flat(dynamic["fun"], static_fun)
    first, first_static = _combine_flat(dynamic["first"], static_first)
    (rest, user_kwargs), rest_static = _combine_flat(dynamic["rest"], static_rest)
    user_args = ((first,) + tuple(rest))[:-1]  # equinox adds a None last
    masks = [first_static] + _split_mask(rest_static, tuple(rest) + (user_kwargs,))

    def outputs(out: Any) -> Any:
        _, dynamic_out, static_out = out
        return _combine_trees(dynamic_out, static_out.value)

    return UserView("equinox.filter_jit", user_fun, user_args, dict(user_kwargs),
                    tuple(masks[:len(user_args)]), outputs)


def _split_mask(mask: tuple[bool, ...], parts: tuple) -> list[tuple[bool, ...]]:
    """A mask over the leaves of `parts` (flattened together), one piece per part."""
    out, start = [], 0
    for part in parts:
        n = len(tree_util.tree_leaves(part))
        out.append(mask[start:start + n])
        start += n
    return out


# One entry per library wrapper that repacks the user's arguments before jit sees them.
CALLING_CONVENTIONS: tuple[Callable[[Any, tuple, dict], UserView | None], ...] = (
    _equinox_filter_jit,
)


def user_view(fun: Any, args: tuple, kwargs: dict) -> UserView | None:
    """The user's side of a library's wrapper call, or None for a plain call."""
    for convention in CALLING_CONVENTIONS:
        view = convention(fun, args, kwargs)
        if view is not None:
            return view
    return None


def library_values(x: Any) -> Any:
    """`x` with a library's packed values shown as the user's objects: flax nnx's NodeStates
    (what nnx.jit and nnx.grad hand JAX) merged back into the user's module.

    NB: no JAX flatten with an `is_leaf` here: on a cyclic or very deep input that
    exhausts CPython's recursion counter for good. NodeStates sit in the arguments or
    in plain tuples, lists and dicts a few levels down: looked for there only.
    """
    nnx = sys.modules.get("flax.nnx")
    node_states = getattr(sys.modules.get("flax.nnx.extract"), "NodeStates", None)
    if nnx is None or not isinstance(node_states, type):
        return x  # flax is not loaded: nothing of it can be in x
    try:
        return _merged(x, node_states, nnx, 4)
    except Exception:  # a merge that fails: the trees show what JAX was given
        return x


def _merged(x: Any, node_states: Any, nnx: Any, depth: int) -> Any:
    if isinstance(x, node_states):
        return nnx.merge(x._graphdef, *x.states) if x._graphdef is not None else x
    if depth == 0:
        return x
    kind = type(x)
    if kind is tuple or kind is list:
        items = [_merged(v, node_states, nnx, depth - 1) for v in x]
        return x if all(a is b for a, b in zip(items, x)) else kind(items)
    if kind is dict:
        found = {k: _merged(v, node_states, nnx, depth - 1) for k, v in x.items()}
        return x if all(found[k] is v for k, v in x.items()) else found
    return x


def mark_static(tree: TreeRecord, mask: tuple[bool, ...]) -> TreeRecord:
    """The tree with the leaves a wrapper kept static (in flatten order) marked so."""
    leaves = [n.index for n in tree.nodes if n.kind == "leaf"]
    if not any(mask) or len(leaves) != len(mask):
        return tree
    nodes = list(tree.nodes)
    for i, is_static in zip(leaves, mask):
        if is_static:
            nodes[i] = nodes[i]._replace(static_leaf=True)
    return dataclasses.replace(tree, nodes=tuple(nodes))


# --- the trees of a call -----------------------------------------------------------

_signatures: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def signature_parameters(fun: Any) -> list[inspect.Parameter]:
    """inspect.signature(fun)'s parameters, once per function (every recorded call asks)."""
    try:
        return _signatures[fun]
    except (KeyError, TypeError):  # not seen yet, or not weakly referable / hashable
        pass
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):  # builtins, odd callables
        params = []
    try:
        _signatures[fun] = params
    except TypeError:
        return params
    return params


def parameter_names(fun: Any, args: tuple) -> list[str]:
    """A name for each positional argument: the parameter's, else `args[i]`."""
    names = [f"args[{i}]" for i in range(len(args))]
    params = signature_parameters(fun)
    for i, p in enumerate(params):
        if i >= len(args):
            break
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names[i] = p.name
        elif p.kind == p.VAR_POSITIONAL:
            break
    return names


def input_trees(transform: str, fun: Any, args: tuple, kwargs: dict,
                builder: TreeBuilder) -> list[TreeRecord]:
    if transform == "jvp" and len(args) == 2:
        names = ["primals", "tangents"]
        roles = ["input", "tangent"]
    elif transform == "vjp_backward":
        names, roles = ["cotangent"], ["cotangent"]
    elif transform == "linearize_jvp":  # one tangent per primal, named as the primal
        names, roles = parameter_names(fun, args), ["tangent"] * len(args)
    else:
        names = parameter_names(fun, args)
        roles = ["input"] * len(args)
    trees = [builder.build(a, role, name, i) for i, (a, name, role) in
             enumerate(zip(args, names, roles))]
    for k, v in kwargs.items():
        if transform == "jvp" and k == "has_aux":
            continue
        trees.append(builder.build(v, "input", str(k)))
    return trees


def _option(options: tuple, name: str, default: Any) -> Any:
    for key, text in options:
        if key == name:
            try:
                return literal(text)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                return default
    return default


_IMMUTABLE = (int, float, complex, bool, str, bytes, type(None))


@functools.lru_cache(maxsize=1024)
def _parsed(text: str) -> Any:
    return ast.literal_eval(text)


def literal(text: str) -> Any:
    """`ast.literal_eval(text)`, parsed once per text.

    NB: literal_eval's nested recursive functions are a reference cycle on
    every call: garbage our recording would leave behind on each call (JAX's
    tests check that a transformation leaves none). A mutable result is copied.
    """
    value = _parsed(text)
    if isinstance(value, _IMMUTABLE) or (
            isinstance(value, tuple) and all(isinstance(v, _IMMUTABLE) for v in value)):
        return value
    return copy.deepcopy(value)


def _gradient_part(transform: str, out: Any, has_aux: bool) -> tuple[bool, Any]:
    """The gradient tree inside a call's output, per transformation."""
    try:
        if transform == "value_and_grad":
            return True, out[1]
        if has_aux:
            return True, out[0]
        return True, out
    except Exception:  # an output of an unexpected shape: no gradient tree
        return False, None


# transform -> (role of its derivative output, pair kind)
_DERIVATIVE_ROLES = {
    "grad": ("gradient", "gradient"),
    "value_and_grad": ("gradient", "gradient"),
}

# transform -> (role of its output, how many times the inputs nest in it)
JACOBIAN_NESTING = {
    "jacfwd": ("jacobian", 1),
    "jacrev": ("jacobian", 1),
    "hessian": ("hessian", 2),
}


def output_trees(transform: str, options: tuple, inputs: list[TreeRecord], out: Any,
                 builder: TreeBuilder, function_out: TreeRecord | None = None
                 ) -> tuple[list[TreeRecord], list[TreePair]]:
    """The output tree, the derivative trees and their pairings with the inputs.

    `function_out` is the differentiated function's own output tree, which
    the outer structure of a Jacobian follows.
    """
    trees = [builder.build(out, "output", "out")]
    pairs: list[TreePair] = []
    if transform in JACOBIAN_NESTING:
        _jacobian_trees(transform, options, inputs, out, builder, function_out, trees, pairs)
        return trees, pairs
    if transform == "jvp":
        try:
            primal_out, tangent_out = out[0], out[1]
        except Exception:
            return trees, pairs
        p = builder.build(primal_out, "primal_out", "primal_out")
        t = builder.build(tangent_out, "tangent_out", "tangent_out")
        trees += [p, t]
        pairs.append(pair_trees("tangent", "primal output vs tangent output", p, t))
        args = [x for x in inputs if x.argnum in (0, 1)]
        if len(args) == 2:
            pairs.insert(0, pair_trees("tangent", "primals vs tangents", args[0], args[1]))
        return trees, pairs
    if transform in ("vjp", "linearize"):
        try:
            primal_out = out[0]
        except Exception:  # an output of an unexpected shape: the output tree only
            return trees, pairs
        trees.append(builder.build(primal_out, "primal_out", "primal_out"))
        return trees, pairs
    roles = _DERIVATIVE_ROLES.get(transform)
    if roles is None:
        return trees, pairs
    role, kind = roles
    ok, grads = _gradient_part(transform, out, bool(_option(options, "has_aux", False)))
    if not ok:
        return trees, pairs
    argnums = _option(options, "argnums", 0)
    positional = {t.argnum: t for t in inputs if t.argnum is not None}
    if isinstance(argnums, int):
        argnums, grads = (argnums,), (grads,)
    elif not isinstance(argnums, (tuple, list)) or not isinstance(grads, (tuple, list)):
        return trees, pairs
    for argnum, g in zip(argnums, grads):
        source = positional.get(argnum)
        name = source.name if source is not None else f"args[{argnum}]"
        tree = builder.build(g, role, name, argnum)
        trees.append(tree)
        if source is not None:
            pairs.append(pair_trees(kind, f"{name} vs its {role}", source, tree,
                                    f"the input {name}", f"its {role}"))
    return trees, pairs



def backward_trees(forward: tuple[TreeRecord, ...], cotangent: TreeRecord | None, out: Any,
                   builder: TreeBuilder) -> tuple[list[TreeRecord], list[TreePair]]:
    """A vjp pullback's trees: one cotangent per primal input, paired with that input.

    `forward` holds the forward call's trees: its primal inputs (by argnum) and
    primal output, which the cotangent given to the pullback is paired with.
    """
    trees = [builder.build(out, "output", "out")]
    pairs: list[TreePair] = []
    primal_out = next((t for t in forward if t.role == "primal_out"), None)
    if primal_out is not None and cotangent is not None:
        pairs.append(pair_trees("cotangent", "primal output vs its cotangent", primal_out,
                                cotangent, "the primal output", "the cotangent"))
    if not isinstance(out, tuple):
        return trees, pairs
    primals = {t.argnum: t for t in forward if t.role == "input" and t.argnum is not None}
    for argnum, ct in enumerate(out):
        primal = primals.get(argnum)
        name = primal.name if primal is not None else f"args[{argnum}]"
        tree = builder.build(ct, "cotangent", name, argnum)
        trees.append(tree)
        if primal is not None:
            pairs.append(pair_trees("cotangent", f"{name} vs its cotangent", primal, tree,
                                    f"the input {name}", "its cotangent"))
    return trees, pairs


# --- Jacobians and Hessians: the inputs nested in the output ----------------------------

def _jacobian_trees(transform: str, options: tuple, inputs: list[TreeRecord], out: Any,
                    builder: TreeBuilder, function_out: TreeRecord | None,
                    trees: list[TreeRecord], pairs: list[TreePair]) -> None:
    """jacfwd/jacrev/hessian: the result, paired with the inputs nested as JAX nests them.

    jacfwd(f)(x) has f's output structure with x's structure at each of its
    leaves (leaf shapes: output shape + input shape); a hessian nests x once
    more. The expected tree is built that way from the records, so the pair
    shows each block beside the input path it belongs to.
    """
    role, times = JACOBIAN_NESTING[transform]
    ok, result = _gradient_part(transform, out, bool(_option(options, "has_aux", False)))
    argnums = _option(options, "argnums", 0)
    positional = {t.argnum: t for t in inputs if t.argnum is not None}
    if not ok:
        return
    if isinstance(argnums, int):
        x = positional.get(argnums)
    elif isinstance(argnums, (tuple, list)) and all(a in positional for a in argnums):
        x = tuple_tree([positional[a] for a in argnums])
    else:
        x = None
    name = x.name if x is not None else "args"
    tree = builder.build(result, role, name, argnums if isinstance(argnums, int) else None)
    trees.append(tree)
    if x is None or function_out is None or not function_out.nodes:
        return
    expected = function_out
    for _ in range(times):
        expected = nest_trees(expected, x)
    scalar_out = len(function_out.nodes) == 1 and function_out.nodes[0].aval.endswith("[]")
    label = " ⊗ ".join(([] if scalar_out else ["out"]) + [name] * times)
    expected = TreeRecord("expected", label, "", expected.nodes, None, expected.note)
    pairs.append(pair_trees(role, f"{name} vs its {role}", expected, tree, label,
                            f"its {role}"))


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


def pushforward_trees(forward: tuple[TreeRecord, ...], tangents: list[TreeRecord], out: Any,
                      builder: TreeBuilder) -> tuple[list[TreeRecord], list[TreePair]]:
    """A linearize pushforward's trees: each tangent paired with its primal, and the
    tangent output with the primal output."""
    tangent_out = builder.build(out, "tangent_out", "tangent_out")
    trees = [builder.build(out, "output", "out"), tangent_out]
    pairs: list[TreePair] = []
    primals = {t.argnum: t for t in forward if t.role == "input" and t.argnum is not None}
    for tangent in tangents:
        primal = primals.get(tangent.argnum) if tangent.argnum is not None else None
        if primal is not None:
            pairs.append(pair_trees("tangent", f"{primal.name} vs its tangent", primal, tangent,
                                    f"the input {primal.name}", "its tangent"))
    primal_out = next((t for t in forward if t.role == "primal_out"), None)
    if primal_out is not None:
        pairs.append(pair_trees("tangent", "primal output vs tangent output", primal_out,
                                tangent_out, "the primal output", "the tangent output"))
    return trees, pairs
