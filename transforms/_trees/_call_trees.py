"""The hook a CallBuilder holds: a call's trees, pairs and diagnostics while it runs
(inputs described before the trace, outputs and derivatives after it, failures diagnosed by
transforms/_trees/_diagnose.py). Every method is guarded: a fault here is recorded, never raised.

The one module of this package that takes the user's function: what the trees need of it
(the kind whose trees they are, through our wrappers' specs; its parameters' names; a
library's wrapper's view of its arguments) is read here, once, and handed down as data.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from .._capture import Options, argument_names, lost_diagnostic, parameter_names, spec_of
from .._common import message
from ..model import Diagnostic, Level, SourceLocation, TreePair, TreeRecord, kind_of
from ._derivatives import input_trees, output_trees
from ._diagnose import FailureContext, diagnose, leak_diagnostic
from ._library_views import UserView, library_values, mark_static, user_view
from ._precheck import check_inputs
from ._pytrees import MAX_DEPTH as MAX_TREE_DEPTH, TreeBuilder

__all__ = ["CallTrees"]


def _function_label(fun: Any) -> str:
    """The function's own name (`loss`, not `make_step.<locals>.loss`), as its stages say."""
    name = getattr(fun, "__name__", None) or getattr(fun, "__qualname__", None)
    return name if isinstance(name, str) else type(fun).__name__


def _trees_kind(transform: str, fun: Any, options: Options) -> tuple[str, Any, Options, int]:
    """The kind whose trees a call has, its function, options and level depth: a transparent
    kind's outputs are its function's (jit(value_and_grad(f)) has value_and_grad's trees, as
    the unjitted call has them)."""
    depth = 1
    inner = spec_of(fun) if kind_of(transform).transparent else None
    while inner is not None and depth < 64:
        transform, fun, options = inner.kind, inner.fun, inner.options
        depth += 1
        inner = spec_of(fun) if kind_of(transform).transparent else None
    return transform, fun, options, depth


class CallTrees:
    """A call's trees, pairs and diagnostics while it runs; built once per call.

    Every method is guarded: a fault here becomes an `internal` Diagnostic,
    never an exception in the user's call.
    """

    def __init__(self, transform: str, fun: Any, options: Options, args: tuple, kwargs: dict,
                 describe: Callable[[Any], Any]):
        # a top-level jit's: its trees' leaves linked to its output's (leaf_links)
        self.jitted = transform == "jit"
        self.leaf_links: dict[tuple[str, str], tuple[int, ...]] = {}
        # ... and a nested grad's trees' leaves, the variables of its trace they stand for
        # (their values once the jit's jaxpr is evaluated: record(values=True))
        self.leaf_vars: dict[tuple[str, str], tuple[Any, ...]] = {}
        transform, fun, options, self.depth = _trees_kind(transform, fun, options)
        self.transform = transform
        self.options = options
        self.builder = TreeBuilder(describe)
        self.inputs: list[TreeRecord] = []
        self.outputs: list[TreeRecord] = []
        self.pairs: list[TreePair] = []
        self.diagnostics: list[Diagnostic] = []
        self.parameters: tuple[str, ...] = ()
        self.forward: tuple[TreeRecord, ...] = ()  # a backward call's forward trees
        self.function_out: TreeRecord | None = None  # what a Jacobian's function returned
        self.view: UserView | None = None  # the user's arguments behind a library's wrapper
        self.nested_seen: set[str] = set()  # functions of transformations called inside
        try:
            self.parameters = tuple(parameter_names(fun))
            # A library's wrapper may have repacked the user's arguments: the trees are named
            # by what the user passed, the pre-trace check by what the wrapper was handed.
            entry = kind_of(transform)
            self.view = view = user_view(fun, args, kwargs) if entry.transparent else None
            user_fun, user_args, user_kwargs = _user_side(fun, args, kwargs, view)
            self.inputs = _static_marked(input_trees(
                transform, argument_names(user_fun, user_args), user_args, user_kwargs,
                self.builder), view)
            self.diagnostics.extend(_shape_diagnostics(self.inputs))
            names = [t.name for t in self.inputs if t.argnum is not None]
            if view is not None:
                self.parameters = tuple(parameter_names(view.fun))
                names = argument_names(fun, args)
            names += [f"args[{i}]" for i in range(len(names), len(args))]
            data_kwargs = {} if entry.config_kwargs else kwargs
            self.diagnostics.extend(check_inputs(args, data_kwargs, names))
        except Exception as e:
            self.note_lost("describing the inputs", e)

    def finish(self, outputs: Any) -> None:
        if self.view is not None:
            try:
                outputs = self.view.outputs(outputs)
            except Exception as e:
                self.note_lost(f"reading {self.view.library}'s outputs", e)
        else:
            outputs = library_values(outputs)
        self.builder.leaf_ids = [] if self.jitted else None
        try:
            trees, pairs = output_trees(self.transform, self.options, self.inputs, outputs,
                                        self.builder, self.function_out, self.forward)
            self.outputs.extend(trees)
            self.pairs.extend(pairs)
            self._link_leaves(self.builder.leaf_ids or [])
        except Exception as e:
            self.note_lost("describing the outputs", e)
        finally:
            self.builder.leaf_ids = None

    def _link_leaves(self, built: list[tuple[tuple[str, str], list[int]]]) -> None:
        """Per tree made of the output's own leaves (a jit's gradient), their positions
        among the output's: its leaves take the output's values once they are replayed."""
        if not built or built[0][0][0] != "output":
            return
        position = {leaf: i for i, leaf in enumerate(built[0][1])}
        for key, ids in built[1:]:
            found = [position.get(leaf) for leaf in ids]
            if ids and all(i is not None for i in found):
                self.leaf_links[key] = tuple(i for i in found if i is not None)

    def note_nested(self, transform: str, fun: Any, options: Options, args: tuple, kwargs: dict,
                    out: Any) -> None:
        """A grad/value_and_grad called inside this call (a jitted training step's): its
        gradient trees paired with the inputs they belong to, named after its function."""
        if not kind_of(transform).nested_trees or len(self.nested_seen) >= 8:
            return
        name = _function_label(fun)
        if name in self.nested_seen:
            return
        self.nested_seen.add(name)
        self.builder.leaf_vars = [] if self.jitted else None
        try:
            inputs = input_trees(transform, argument_names(fun, args), args, kwargs, self.builder)
            _, pairs = output_trees(transform, options, inputs, out, self.builder)
        except Exception as e:
            self.note_lost(f"describing the trees of {transform}({name})", e)
            return
        finally:
            made, self.builder.leaf_vars = dict(self.builder.leaf_vars or ()), None
        for pair in pairs:
            left = dataclasses.replace(pair.left, name=f"{name}: {pair.left.name}")
            right = dataclasses.replace(pair.right, name=f"{name}: {pair.right.name}")
            for tree, renamed in ((pair.left, left), (pair.right, right)):
                found = made.get((tree.role, tree.name))
                if found and any(v is not None for v in found):
                    self.leaf_vars[renamed.role, renamed.name] = tuple(found)
            self.outputs.extend((left, right))
            self.pairs.append(dataclasses.replace(pair, left=left, right=right,
                                                  title=f"{name}: {pair.title}"))

    def note_function_output(self, out: Any) -> None:
        """The differentiated function's output (traced), for a Jacobian's outer structure."""
        try:
            self.function_out = self.builder.build(out[0] if self.options.has_aux else out,
                                                   "function_out", "out")
        except Exception as e:
            self.note_lost("describing the function's output", e)

    def note_leaks(self, steps: list, leaked: list) -> None:
        """A leaked tracer met while tracing (JAX may raise only when it runs the result)."""
        try:
            found = leak_diagnostic(steps, leaked)
        except Exception as e:
            self.note_lost("looking for leaked tracers", e)
            return
        if found is not None:
            self.diagnostics.append(found)

    def error_fields(self, error: BaseException, levels: list[Level], steps: list,
                     level: int | None, step: int | None,
                     source: SourceLocation | None, leaked: list | tuple = ()) -> dict:
        ctx = FailureContext(error, message(error), levels, steps, level, step, source,
                             self.parameters, tuple(self.diagnostics), self.builder,
                             tuple(self.inputs) + self.forward, tuple(leaked))
        try:
            return diagnose(ctx)
        except Exception as e:
            self.note_lost("diagnosing the error", e)
            return {}

    @property
    def trees(self) -> tuple[TreeRecord, ...]:
        return tuple(self.inputs) + tuple(self.outputs)

    def note_lost(self, what: str, error: BaseException) -> None:
        """What the recorder failed at for this call (here or in a part that reads these
        trees, e.g. CallShardings): an `internal` Diagnostic, never raised to the user."""
        self.diagnostics.append(lost_diagnostic(what, error))


def _user_side(fun: Any, args: tuple, kwargs: dict, view: UserView | None) -> tuple[Any, tuple, dict]:
    """The function and arguments as the user wrote them: behind a library's wrapper, its view's."""
    if view is None:
        return fun, library_values(args), library_values(kwargs)
    return view.fun, view.args, view.kwargs


def _static_marked(trees: list[TreeRecord], view: UserView | None) -> list[TreeRecord]:
    """The trees with the leaves a library's wrapper kept static marked so."""
    if view is None:
        return trees
    masks = view.static_leaves
    return [mark_static(t, masks[t.argnum]) if t.argnum is not None and t.argnum < len(masks)
            else t for t in trees]


def _shape_diagnostics(trees: list[TreeRecord]) -> list[Diagnostic]:
    """Cyclic and too deep inputs, as the tree builder found them."""
    found = []
    for tree in trees:
        for node in tree.nodes:
            if node.kind == "cycle":
                found.append(Diagnostic(
                    "cycle", f"{tree.full_path(node)} is a cycle: the {node.type_name} "
                    "contains itself.", node.type_name, tree.full_path(node)))
                break
            if node.kind == "truncated" and node.depth >= MAX_TREE_DEPTH:
                found.append(Diagnostic(
                    "too_deep", f"{tree.name} is nested more than {MAX_TREE_DEPTH} levels "
                    "deep.", node.type_name, tree.name))
                break
    return found
