"""Live pytrees -> TreeRecords (TreeBuilder), and a PyTreeDef's structure as one.

A tree is walked one level at a time with JAX's public flattening
(`tree_flatten_with_path` with an `is_leaf` that stops below the node), with
an explicit stack: no recursion, so a 10,000-level structure or a cycle gives
a record with a note, never a RecursionError. Every user function (a custom
node's flatten, an aux `repr`) is called inside a guard.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable

import jax
import numpy as np
from jax import tree_util

from .. import _jax as _i
from .._capture import describe_concrete, leaf_facts
from .._common import MAX_TEXT, BoundedCache, first_line, safe_repr as safe_text, safe_str
from .._jax import Tracer
from ..model import TreeNode, TreeRecord, ValueRecord

MAX_NODES = 2000    # per tree: larger trees end in a "truncated" node
MAX_DEPTH = 100     # deeper nodes end in a "truncated" node

# Containers JAX flattens natively: their aux data is structure, not user static data.
_BUILTIN_NODES = frozenset({tuple, list, dict, type(None)})


_qualified_names: BoundedCache = BoundedCache(10_000)  # id(cls) -> (cls, name)


def qualified_name(cls: Any) -> str:
    # Once per class (keyed by id, the class kept to rule out a reused id):
    # trees are built on every recorded call.
    hit = _qualified_names.get(id(cls))
    if hit is None or hit[0] is not cls:
        hit = _qualified_names.put(id(cls), (cls, _qualified_name(cls)))
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


_key_texts: BoundedCache = BoundedCache(10_000)


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
            _key_texts.put(key_path, text)
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
        # While not None: per tree built, ((role, name), its leaves' ids), so trees made of
        # the same objects (a jit's gradient inside its output) can be linked leaf by leaf.
        self.leaf_ids: list[tuple[tuple[str, str], list[int]]] | None = None
        # ... and per tree, the variable of a jit's trace each leaf stands for (or None)
        self.leaf_vars: list[tuple[tuple[str, str], list[Any]]] | None = None

    def build(self, obj: Any, role: str, name: str, argnum: int | None = None) -> TreeRecord:
        """The tree of `obj`; its structure is built once per PyTreeDef, then only leaves."""
        try:
            leaves, treedef = tree_util.tree_flatten(obj)
            if self.leaf_ids is not None:
                self.leaf_ids.append(((role, name), [id(x) for x in leaves]))
            if self.leaf_vars is not None:
                self.leaf_vars.append(((role, name), [_i.staged_var(x) for x in leaves]))
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
        value, summary = leaf_facts(x, rec)
        # NB: the same leaf node for the same facts: a loop's calls describe equal leaves
        # (a tracer's text is made once), and share the node.
        key = (id(node), type_name, rec, value, summary)
        hit = _leaf_nodes.get(key)
        if hit is not None and hit[0] is node:
            return hit[1]
        traced = rec.is_tracer
        filled = TreeNode(node.index, node.parent, node.depth, node.key, node.path, "leaf",
                          type_name, "", (), (), rec.aval, value, traced,
                          rec.describe() if traced else "", "", summary=summary)
        _leaf_nodes.put(key, (node, filled))
        return filled

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
                           note=f"flatten raised {type(e).__name__}: {first_line(e, MAX_TEXT)}")
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
        fields["value"], summary = leaf_facts(x, rec)
        if summary is not None:
            fields["summary"] = summary
        if rec.is_tracer:
            fields["traced"] = True
            fields["tracer"] = rec.describe()
        return fields


_LEAF_TYPES = (Tracer, jax.Array, np.ndarray, np.generic, bool, int, float, complex)

# (PyTreeDef, limits) -> (treedef text, nodes, indices of the leaf nodes in flatten order).
# Every recorded call builds its input and output trees, mostly of one structure
# again and again: the walk (and the user's flatten functions) run once per structure.
# key -> (treedef text, nodes, leaf indices)
_skeletons: BoundedCache = BoundedCache(512)

# (id(skeleton leaf node), type name, ValueRecord, value text) -> (skeleton node, filled node)
_leaf_nodes: BoundedCache = BoundedCache(10_000)


def _remember(key: tuple, record: TreeRecord, num_leaves: int) -> None:
    """Keep a walked tree's structure when it is complete and its leaves are JAX's."""
    if any(n.kind in ("error", "cycle", "truncated") for n in record.nodes):
        return
    leaf_indices = tuple(n.index for n in record.nodes if n.kind == "leaf")
    if len(leaf_indices) != num_leaves:
        return
    try:
        _skeletons.put(key, (record.treedef, record.nodes, leaf_indices))
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
        treedef = tree_util.tree_structure(obj)
    except Exception as e:  # cyclic, too deep, or a flatten that raises
        return f"<unavailable: {type(e).__name__}>"
    return safe_str(treedef, None)


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
                                 note=f"{type(e).__name__}: {first_line(e, MAX_TEXT)}"))
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
    return safe_str(x, None)
