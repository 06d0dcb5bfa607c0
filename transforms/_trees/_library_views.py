"""Libraries' calling conventions: the user's function and arguments behind a wrapper.

eqx.filter_jit hands jit (dynamic_donate, dynamic_nodonate, static): the user's
arguments split into array leaves and the rest; nnx.jit hands it NodeStates (a
graph definition and flat leaves). A call's trees are named by what the user passed.
"""
from __future__ import annotations

import dataclasses
import sys
from typing import Any, Callable, NamedTuple

from jax import tree_util

from ..model import TreeRecord

__all__ = ["CALLING_CONVENTIONS", "UserView", "library_values", "mark_static", "user_view"]


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
