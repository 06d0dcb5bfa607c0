"""The exporter's names for a stage's inputs and outputs, from the call's pytree records
(`params['w']` rather than `a`): where a stage's variables are the call's own."""
from __future__ import annotations

from transforms.model import Call, Stage, TreeRecord, kind_of, stage_function

from ._call_views import collect_pytree as collect_pytree, collect_tower as collect_tower
from ._graph import (
    Cluster as Cluster,
    CollectError as CollectError,
    Edge as Edge,
    Graph as Graph,
    GraphOptions as GraphOptions,
    Node as Node,
    count as count,
    dot_escape as dot_escape,
    dot_string as dot_string,
    origin_of as origin_of,
    to_dot as to_dot,
)


def input_names(stage: Stage, call: Call | None) -> tuple[tuple[str, ...] | None, str]:
    """Names for a stage's inputs from the call's input trees (`container.array`, `W`, `b`).

    Returns (names or None, a note saying why the plain variable names are used).
    """
    n = len(stage.in_vars)
    if call is None or not n:
        return None, ""
    if not _of_the_call(stage):
        return _nested_input_names(stage, call), ""
    leaves = _leaf_paths(call, "input")
    if not leaves:
        return None, _no_trees_note(call)
    if stage.role == "jvp" and n == 2 * len(leaves):
        return tuple(leaves) + tuple(f"{p}_dot" for p in leaves), ""
    if stage.role == "linear" and n == len(leaves):
        return tuple(f"{p}_dot" for p in leaves), ""
    if stage.role == "transposed":
        if n == 1:
            return ("cotangent of the output",), ""
        return None, ""
    if n == len(leaves):
        return tuple(leaves), ""
    return None, (f"inputs keep their variable names: the stage has {n} inputs, the call's "
                  f"input trees {len(leaves)} leaves")


def output_names(stage: Stage, call: Call | None) -> tuple[tuple[str, ...] | None, str]:
    n = len(stage.out_vars)
    if call is None or not n:
        return None, ""
    if not _of_the_call(stage):
        return _nested_output_names(stage, call), ""
    outermost = kind_of(stage.name.partition("(")[0])  # the stage's outermost transformation
    if stage.role == "transposed" or (stage.role == "transformed" and outermost.output_is_gradient
                                      and outermost.name == stage.transform):
        # jacrev's transposed stage has the inputs' leaves too (its trees: "jacobian")
        leaves = _leaf_paths(call, "gradient") or _leaf_paths(call, "jacobian")
        if n == len(leaves):
            return tuple(f"grad {p}" for p in leaves), ""
    if stage.role in ("f", "transformed") or outermost.keeps_output_leaves:
        leaves = _leaf_paths(call, "output")
        if n == len(leaves):
            return tuple(leaves), ""
        grads = _leaf_paths(call, "gradient")
        if n == len(grads):
            return tuple(f"grad {p}" for p in grads), ""
    return None, ""


def _of_the_call(stage: Stage) -> bool:
    """A stage of the call's own chain (named from f), whose trees are the call's; not one of
    a transformation called inside it (`value_and_grad(loss)` in a jitted step)."""
    return stage_function(stage.name) == "f"


# A grad or value_and_grad called inside the call keeps its trees on the call, each named
# after its function: "loss: params" (transforms/_trees/_call_trees.py, note_nested).
NESTED_SEPARATOR = ": "


def _is_nested(tree: TreeRecord) -> bool:
    return NESTED_SEPARATOR in tree.name


def _nested_leaf_paths(call: Call, stage: Stage, role: str) -> list[str]:
    """The leaves of the trees kept for the transformation called inside the call whose
    stages these are, named without its function (`params['w']`, the title names it)."""
    prefix = stage_function(stage.name) + NESTED_SEPARATOR
    trees = [t for t in call.trees if t.role == role and t.name.startswith(prefix)]
    trees.sort(key=lambda t: (t.argnum if t.argnum is not None else 0))
    return [t.full_path(node)[len(prefix):] for t in trees for node in t.nodes
            if node.kind == "leaf"]


def _nested_input_names(stage: Stage, call: Call) -> tuple[str, ...] | None:
    """The differentiated arguments come first (argnums 0, 1, ...): named from the kept input
    trees; the arguments after them keep their variable names."""
    if stage.role not in ("f", "transformed"):
        return None
    prefix = stage_function(stage.name) + NESTED_SEPARATOR
    argnums = sorted(t.argnum for t in call.trees if t.role == "input"
                     and t.name.startswith(prefix) and t.argnum is not None)
    leaves = _nested_leaf_paths(call, stage, "input")
    if not leaves or argnums != list(range(len(argnums))) or len(leaves) > len(stage.in_vars):
        return None
    return tuple(leaves) + tuple(stage.in_vars[len(leaves):])


def _nested_output_names(stage: Stage, call: Call) -> tuple[str, ...] | None:
    """grad's outputs are the gradient's leaves; value_and_grad's end with them."""
    n = len(stage.out_vars)
    outermost = kind_of(stage.name.partition("(")[0])
    grads = [f"grad {p}" for p in _nested_leaf_paths(call, stage, "gradient")]
    if not grads:
        return None
    if stage.role == "transposed" and n == len(grads):
        return tuple(grads)
    derivative = outermost.derivative
    if stage.role != "transformed" or derivative is None or derivative.role != "gradient":
        return None
    if derivative.at is None and n == len(grads):
        return tuple(grads)
    if derivative.at is not None and n > len(grads):
        return tuple(f"out[{i}]" for i in range(n - len(grads))) + tuple(grads)
    return None


def _leaf_paths(call: Call, role: str) -> list[str]:
    """The leaves of the call's own trees (not those kept for a transformation inside it)."""
    trees = [t for t in call.trees if t.role == role and not _is_nested(t)]
    trees.sort(key=lambda t: (t.argnum if t.argnum is not None else 0))
    return [t.full_path(node) for t in trees for node in t.nodes if node.kind == "leaf"]


def _no_trees_note(call: Call) -> str:
    if hasattr(call, "trees"):
        return "inputs keep their variable names: this call has no pytree records"
    return ("inputs keep their variable names: this dump has no pytree records "
            "(Call.trees); the treedef was " + (call.in_tree or "not recorded"))
