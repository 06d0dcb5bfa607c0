"""A call's trees as its kind lays them out: inputs, outputs, derivatives, and their pairs.

Which trees a call has is its kind's entry (`kinds.KINDS`): `inputs` names its
arguments' trees, `outputs` picks the rule below that reads its output (a gradient
paired with its input, a jvp's primal and tangent, a pullback's cotangents), and
`derivative` says where the derivative sits in the output. Options are the live
values the wrapper was given (`_spec.Options`).
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

from .._capture import Options
from ..model import Derivative, TransformKind, TreePair, TreeRecord, kind_of
from ._pytrees import TreeBuilder
from ._tree_pairs import nest_trees, pair_trees, tuple_tree

__all__ = ["OUTPUT_TREES", "input_trees", "output_trees"]


def input_trees(transform: str, names: list[str], args: tuple, kwargs: dict,
                builder: TreeBuilder) -> list[TreeRecord]:
    """A tree per argument, named and given a role as the kind says (by default `names`, the
    function's name for each argument); keyword arguments too, unless they configure the
    transformation."""
    entry = kind_of(transform)
    if entry.inputs is not None:
        names = [name for name, _ in entry.inputs]
        roles = [role for _, role in entry.inputs]
    else:
        roles = [entry.input_role] * len(args)
    trees = [builder.build(a, role, name, i) for i, (a, name, role) in
             enumerate(zip(args, names, roles))]
    if not entry.config_kwargs:
        trees += [builder.build(v, "input", str(k)) for k, v in kwargs.items()]
    return trees


class _Outputs(NamedTuple):
    """What an output rule reads; it appends to `trees` and `pairs`."""
    entry: TransformKind
    options: Options
    inputs: list[TreeRecord]
    forward: tuple[TreeRecord, ...]  # a returned function's forward call's trees
    out: Any
    builder: TreeBuilder
    function_out: TreeRecord | None  # the differentiated function's own output tree
    trees: list[TreeRecord]
    pairs: list[TreePair]


def output_trees(transform: str, options: Options, inputs: list[TreeRecord], out: Any,
                 builder: TreeBuilder, function_out: TreeRecord | None = None,
                 forward: tuple[TreeRecord, ...] = ()
                 ) -> tuple[list[TreeRecord], list[TreePair]]:
    """The output tree, the derivative trees and their pairings with the inputs.

    `function_out` is the differentiated function's own output tree, which
    the outer structure of a Jacobian follows; `forward` the forward call's
    trees, for the functions a vjp or linearize returned.
    """
    entry = kind_of(transform)
    trees = [builder.build(out, "output", "out")]
    pairs: list[TreePair] = []
    rule = OUTPUT_TREES.get(entry.outputs)
    if rule is not None:
        rule(_Outputs(entry, options, inputs, forward, out, builder, function_out, trees, pairs))
    return trees, pairs


def _derivative_part(derivative: Derivative, out: Any, has_aux: bool) -> tuple[bool, Any]:
    """The derivative inside a call's output, where its kind puts it."""
    try:
        for i in derivative.path(has_aux):
            out = out[i]
        return True, out
    # NB: indexing JAX's output tuples: an output of an unexpected shape (too short, not a
    # sequence) raises these; anything else is a fault CallTrees notes on the call.
    except (LookupError, TypeError):  # an output of an unexpected shape: no derivative tree
        return False, None


def _derivative_trees(o: _Outputs) -> None:
    """grad and value_and_grad: a gradient per differentiated argument, paired with it."""
    derivative = o.entry.derivative
    assert derivative is not None
    if derivative.nesting:
        _jacobian_trees(o, derivative)
        return
    role = derivative.role
    ok, grads = _derivative_part(derivative, o.out, o.options.has_aux)
    if not ok:
        return
    argnums = o.options.argnums
    positional = {t.argnum: t for t in o.inputs if t.argnum is not None}
    if isinstance(argnums, int):
        argnums, grads = (argnums,), (grads,)
    elif not isinstance(argnums, (tuple, list)) or not isinstance(grads, (tuple, list)):
        return
    for argnum, g in zip(argnums, grads):
        source = positional.get(argnum)
        name = source.name if source is not None else f"args[{argnum}]"
        tree = o.builder.build(g, role, name, argnum)
        o.trees.append(tree)
        if source is not None:
            o.pairs.append(pair_trees(role, f"{name} vs its {role}", source, tree,
                                      f"the input {name}", f"its {role}"))


def _primal_tangent_trees(o: _Outputs) -> None:
    """jvp: (primal_out, tangent_out), paired; and its primals with its tangents."""
    try:
        primal_out, tangent_out = o.out[0], o.out[1]
    except (LookupError, TypeError):  # an output of an unexpected shape: no output trees
        return
    p = o.builder.build(primal_out, "primal_out", "primal_out")
    t = o.builder.build(tangent_out, "tangent_out", "tangent_out")
    o.trees.extend((p, t))
    o.pairs.append(pair_trees("tangent", "primal output vs tangent output", p, t))
    args = [x for x in o.inputs if x.argnum in (0, 1)]
    if len(args) == 2:
        o.pairs.insert(0, pair_trees("tangent", "primals vs tangents", args[0], args[1]))


def _primal_first_trees(o: _Outputs) -> None:
    """vjp and linearize: (primal_out, the function they return)."""
    try:
        primal_out = o.out[0]
    except (LookupError, TypeError):  # an output of an unexpected shape: the output tree only
        return
    o.trees.append(o.builder.build(primal_out, "primal_out", "primal_out"))


# --- the functions vjp and linearize return ---------------------------------------

def _cotangent_trees(o: _Outputs) -> None:
    """A vjp pullback's trees: one cotangent per primal input, paired with that input.

    `o.forward` holds the forward call's trees: its primal inputs (by argnum) and
    primal output, which the cotangent given to the pullback is paired with.
    """
    cotangent = o.inputs[0] if o.inputs else None
    primal_out = next((t for t in o.forward if t.role == "primal_out"), None)
    if primal_out is not None and cotangent is not None:
        o.pairs.append(pair_trees("cotangent", "primal output vs its cotangent", primal_out,
                                  cotangent, "the primal output", "the cotangent"))
    if not isinstance(o.out, tuple):
        return
    primals = {t.argnum: t for t in o.forward if t.role == "input" and t.argnum is not None}
    for argnum, ct in enumerate(o.out):
        primal = primals.get(argnum)
        name = primal.name if primal is not None else f"args[{argnum}]"
        tree = o.builder.build(ct, "cotangent", name, argnum)
        o.trees.append(tree)
        if primal is not None:
            o.pairs.append(pair_trees("cotangent", f"{name} vs its cotangent", primal, tree,
                                      f"the input {name}", "its cotangent"))


def _pushforward_trees(o: _Outputs) -> None:
    """A linearize pushforward's trees: each tangent paired with its primal, and the
    tangent output with the primal output."""
    tangent_out = o.builder.build(o.out, "tangent_out", "tangent_out")
    o.trees.append(tangent_out)
    primals = {t.argnum: t for t in o.forward if t.role == "input" and t.argnum is not None}
    for tangent in o.inputs:
        primal = primals.get(tangent.argnum) if tangent.argnum is not None else None
        if primal is not None:
            o.pairs.append(pair_trees("tangent", f"{primal.name} vs its tangent", primal,
                                      tangent, f"the input {primal.name}", "its tangent"))
    primal_out = next((t for t in o.forward if t.role == "primal_out"), None)
    if primal_out is not None:
        o.pairs.append(pair_trees("tangent", "primal output vs tangent output", primal_out,
                                  tangent_out, "the primal output", "the tangent output"))


# --- Jacobians and Hessians: the inputs nested in the output ----------------------------

def _jacobian_trees(o: _Outputs, derivative: Derivative) -> None:
    """jacfwd/jacrev/hessian: the result, paired with the inputs nested as JAX nests them.

    jacfwd(f)(x) has f's output structure with x's structure at each of its
    leaves (leaf shapes: output shape + input shape); a hessian nests x once
    more. The expected tree is built that way from the records, so the pair
    shows each block beside the input path it belongs to.
    """
    role, times = derivative.role, derivative.nesting
    builder, function_out = o.builder, o.function_out
    ok, result = _derivative_part(derivative, o.out, o.options.has_aux)
    argnums = o.options.argnums
    positional = {t.argnum: t for t in o.inputs if t.argnum is not None}
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
    o.trees.append(tree)
    if x is None or function_out is None or not function_out.nodes:
        return
    expected = function_out
    for _ in range(times):
        expected = nest_trees(expected, x)
    scalar_out = len(function_out.nodes) == 1 and function_out.nodes[0].aval.endswith("[]")
    label = " ⊗ ".join(([] if scalar_out else ["out"]) + [name] * times)
    expected = TreeRecord("expected", label, "", expected.nodes, None, expected.note)
    o.pairs.append(pair_trees(role, f"{name} vs its {role}", expected, tree, label,
                              f"its {role}"))


# One rule per output layout a kind names (`TransformKind.outputs`).
OUTPUT_TREES: dict[str, Callable[[_Outputs], None]] = {
    "derivative": _derivative_trees,
    "primal_tangent": _primal_tangent_trees,
    "primal_first": _primal_first_trees,
    "cotangents": _cotangent_trees,
    "pushforward": _pushforward_trees,
}
