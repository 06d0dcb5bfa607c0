"""A top-level jit's concrete arguments, summarised where jit binds them (before its trace,
where the call only sees tracers), and given to the call's input trees' traced leaves; its
results, replayed once JAX's trace is over (JitReplay): JAX's own compiled program run
again on host copies of the arguments, with the same executable, so the same bits.

Only summaries and host copies are kept (no array of the user's outlives the hook), the
copies only up to REPLAY_MAX_SIZE elements and until the replay.
"""
from __future__ import annotations

import contextvars
import dataclasses
import weakref
from typing import Any

import jax
import numpy as np

from .. import _jax as _i
from .._capture import lost_diagnostic, summarize_array
from .._stages import Untraced
from ..model import (
    Call,
    NonFiniteRecord,
    StageValues,
    TreeRecord,
    ValueSummary,
    stage_function,
)
from ._find_nans import search_nonfinite, with_levels
from ._stage_values import call_values, stage_values

__all__ = ["JIT_NOT_COPIED", "REPLAY_MAX_SIZE", "JitReplay", "note_jit_values", "take_jit_values",
           "with_argument_values"]

# A jit's arguments are copied to the host for the replay of its results when they have at
# most this many elements in all (a copy and a second run of the program cost that much).
REPLAY_MAX_SIZE = 100_000
# ... and with record(find_nans=True), which needs them to check the results.
FIND_NANS_MAX_SIZE = 50_000_000
JIT_NOT_COPIED = (f"the jit's arguments were not copied (more than {REPLAY_MAX_SIZE:,} "
                  f"elements in all)")
_JIT_STAGE = "jit(f)"  # the stage a jit's finding names until the call's stages are known

# (weakref to fun, per positional argument its leaves' summaries, per keyword the same)
_jit_values: contextvars.ContextVar[tuple | None] = contextvars.ContextVar(
    "transforms_jit_values", default=None)


def note_jit_values(fun: Any, args: tuple, kwargs: dict, replays: bool = False) -> None:
    """The concrete arguments jit bound before tracing `fun`: summarised, and copied to the
    host when small enough to replay the call."""
    try:
        positional = tuple(_leaf_summaries(a) for a in args)
        named = {k: _leaf_summaries(v) for k, v in kwargs.items()}
        bound = FIND_NANS_MAX_SIZE if replays else REPLAY_MAX_SIZE
        _jit_values.set((weakref.ref(fun), positional, named,
                         _host_copies(args, kwargs, bound)))
    except Exception:  # an argument JAX itself will refuse: no values, JAX raises
        _jit_values.set(None)


def take_jit_values(fun: Any) -> tuple | None:
    """(positional, named, host copies or None) noted for this function, no longer kept;
    None if none."""
    noted = _jit_values.get()
    _jit_values.set(None)
    return noted[1:] if noted is not None and noted[0]() is fun else None


def _host_copies(args: tuple, kwargs: dict, bound: int) -> tuple | None:
    leaves = jax.tree_util.tree_leaves((args, kwargs))
    if sum(getattr(x, "size", 1) for x in leaves) > bound:
        return None
    copy = jax.tree_util.tree_map(
        lambda x: np.array(x) if isinstance(x, (jax.Array, np.ndarray)) else x, (args, kwargs))
    return copy


def _leaf_summaries(tree: Any) -> tuple[ValueSummary | None, ...]:
    leaves = jax.tree_util.tree_leaves(tree)
    return tuple(summarize_array(x) if isinstance(x, jax.Array) else None for x in leaves)


def with_argument_values(trees: list[TreeRecord], values: tuple) -> list[TreeRecord]:
    """Input trees whose traced leaves carry the summaries of the concrete arguments (a tree
    whose leaves do not match the arguments' one by one keeps none)."""
    positional, named = values[:2]
    out = []
    for tree in trees:
        if tree.argnum is not None and tree.argnum < len(positional):
            summaries: tuple | None = positional[tree.argnum]
        else:
            summaries = named.get(tree.name)
        out.append(_filled(tree, summaries) if summaries else tree)
    return out


def _jits_own_stage(call: Call) -> str:
    """The stage of the jit's own trace: the last jaxpr stage of the function it compiles
    (jit(f): f; jit(grad(f)): grad(f)), not one of a transformation called inside it."""
    compiled = next((s.name for s in call.stages if s.role == "stablehlo"), "jit(f)")
    own = [s.name for s in call.stages if s.jaxpr is not None
           and stage_function(s.name) == stage_function(compiled)]
    return own[-1] if own else _JIT_STAGE


def _valued(inputs: tuple, values: dict) -> tuple | None:
    """A nested transformation's (args, kwargs) with each variable's value; None when one is
    missing (not a top-level equation's output) or a leaf was another trace's."""
    leaves, tree = jax.tree_util.tree_flatten(inputs)
    out = []
    for x in leaves:
        if _i.is_variable(x):
            x = values.get(x)
            if x is None:
                return None
        elif isinstance(x, Untraced):
            return None
        out.append(x)
    return jax.tree_util.tree_unflatten(tree, out)


def _replayed(x: Any) -> ValueSummary | None:
    """A value the replay computed, summarised (None: none, or no numbers to show)."""
    try:
        return summarize_array(x, origin="replayed") if x is not None else None
    except (TypeError, ValueError):  # a token or key: no values to show
        return None


def _filled(tree: TreeRecord, summaries: tuple) -> TreeRecord:
    leaves = [n for n in tree.nodes if n.is_leaf]
    if len(leaves) != len(summaries):
        return tree
    by_index = {n.index: s for n, s in zip(leaves, summaries) if s is not None}
    if not by_index:
        return tree
    nodes = tuple(n._replace(summary=by_index[n.index]) if n.index in by_index else n
                  for n in tree.nodes)
    return dataclasses.replace(tree, nodes=nodes)


class JitReplay:
    """A top-level jit's results, replayed once its trace is over (DeferredJit's on_trace):
    the compiled program run on host copies of the call's dynamic arguments. Programs that
    call back into Python (a print, a callback) are not run again."""

    def __init__(self, copies: tuple, args: tuple, kwargs: dict, recorder: Any):
        copied_args, copied_kwargs = copies
        self.recorder = weakref.ref(recorder)  # find_nans: the first call with a NaN
        # The dynamic arguments are the ones the trace saw as tracers; static ones are not
        # passed to the compiled program.
        self._args: tuple | None = (
            tuple(c for c, a in zip(copied_args, args) if _is_traced(a)),
            {k: v for k, v in copied_kwargs.items() if _is_traced(kwargs.get(k))})
        self.results: tuple[ValueSummary | None, ...] | None = None
        self.reason = ""
        self.fault: BaseException | None = None
        self.nonfinite: tuple = ()
        self.values: Any = None  # record(values=True): its jaxpr's equations' values
        self._stages: tuple | None = None  # ... and the call's other stages (evaluate_later)
        self._nested: list = []  # ... and those of the transformations inside it
        self._copies: tuple | None = copies
        self.stage_values: tuple = ()
        # trees made of the output's leaves (a gradient): their leaves' places in it
        self.leaf_links: dict[tuple[str, str], tuple[int, ...]] = {}
        # a grad's trees inside the jit: their leaves' variables in JAX's trace of it, and
        # once its jaxpr is evaluated (record(values=True)), their leaves' summaries
        self.leaf_vars: dict[tuple[str, str], tuple[Any, ...]] = {}
        self.nested: dict[tuple[str, str], tuple[ValueSummary | None, ...]] = {}
        # The jaxpr of the trace that was recorded, when it is not JAX's own (a trace JAX
        # had cached before the block, traced again to record it): its variables are the
        # ones the recording saw, so its equations are the ones evaluated for values.
        self.recorded_jaxpr: Any = None

    def evaluate_later(self, kept: dict, spec: Any, nested: list | None = None) -> None:
        """record(values=True): the call's stages, evaluated on the copies once its stages
        are known (apply); the live jaxprs are held until then, as the copies are. The
        stages of the transformations called inside it (`nested`: function, spec, inputs
        as the jit's variables) take those variables' values from its jaxpr's evaluation."""
        self._stages = (kept, spec)
        self._nested = list(nested or ())

    def __call__(self, traced: Any, compiled: Any) -> None:
        """The replay, handed JAX's trace of the call and the executable the stages compiled
        (jit's cache hit: the call's own; nothing lowers or compiles it again)."""
        held, self._args = self._args, None  # the copies go, replayed or not
        if held is None:
            return
        try:
            if _i.calls_back(traced.jaxpr):
                self.reason = "not replayed: the program calls back into Python"
                return
            args, kwargs = held
            if jax.tree_util.tree_structure((args, kwargs)) != compiled.in_tree:
                self.reason = "not replayed: the arguments do not match the program's"
                return
            try:
                outs = jax.tree_util.tree_leaves(compiled(*args, **kwargs))
            except Exception as e:  # the program's own failure (as the call's): said
                self.reason = f"not replayed: {type(e).__name__}"
                return
            self.results = tuple(summarize_array(x, origin="replayed") for x in outs)
            leaves = jax.tree_util.tree_leaves((args, kwargs))
            self._find_nans(traced, leaves)
            recorder = self.recorder()
            if recorder is not None and recorder.values:
                wanted = {v: None for found in self.leaf_vars.values() for v in found
                          if v is not None}
                wanted.update((v, None) for _, _, inputs in self._nested
                              for v in jax.tree_util.tree_leaves(inputs) if _i.is_variable(v))
                program = traced.jaxpr if self.recorded_jaxpr is None else self.recorded_jaxpr
                self.recorded_jaxpr = None
                self.values = stage_values(_JIT_STAGE, program, leaves, wanted=wanted)
                self.nested = {key: tuple(_replayed(wanted.get(v)) for v in found)
                               for key, found in self.leaf_vars.items()}
                self.leaf_vars = {}
                self._nested = [(expr, spec, _valued(inputs, wanted))
                                for expr, spec, inputs in self._nested]
        except Exception as e:  # a fault of ours: noted on the call (apply)
            self.fault = e

    def _evaluated(self, call: Call, later: tuple, copies: Any) -> tuple:
        """The call's stages evaluated on the copies, and the stages of each transformation
        inside it on its inputs' values in the jit's evaluation (where all were found)."""
        kept, spec = later
        nested, self._nested = self._nested, []
        by_function = {expr: (inner, live) for expr, inner, live in nested}
        found = {v.stage: v for v in call_values(kept, call.stages, copies, spec)}
        for expr, (inner, live) in by_function.items():
            if live is None:
                continue
            own = tuple(s for s in call.stages if stage_function(s.name) == expr)
            found.update((v.stage, v) for v in call_values(kept, own, live, inner, function=expr))
        return tuple(found.values())

    def _all_values(self, call: Call, stage: str) -> tuple:
        """The stages' values, in the call's order of stages; the jit's own jaxpr's (JAX's
        trace, whose equations may differ from the stage made of the tape) only for a stage
        not evaluated by itself."""
        assert self.values is not None
        by_stage = {v.stage: v for v in self.stage_values}
        if not getattr(by_stage.get(stage), "outputs", ()):
            by_stage[stage] = dataclasses.replace(self.values, stage=stage)
        ordered = [by_stage.pop(s.name) for s in call.stages if s.name in by_stage]
        return tuple(ordered + list(by_stage.values()))

    def _find_nans(self, traced: Any, leaves: list) -> None:
        recorder = self.recorder()
        if recorder is None or not recorder.find_nans or recorder.nan_found:
            return
        if all(r is None or r.finite for r in self.results or ()):
            return
        recorder.nan_found = True
        self.nonfinite = search_nonfinite(_JIT_STAGE, traced.jaxpr, leaves) or (
            NonFiniteRecord("first", _JIT_STAGE, note="the replay made no NaN or Inf"),)

    def apply(self, call: Call) -> Call:
        """The call with its output trees' traced leaves given the replayed results."""
        stage = _jits_own_stage(call)
        later, self._stages = self._stages, None
        copies, self._copies = self._copies, None
        if self.values is not None:
            if later is not None:
                self.stage_values = self._evaluated(call, later, copies)
            call = dataclasses.replace(call, values=self._all_values(call, stage))
        elif later is not None:  # values wanted, none made: why, per stage
            why = self.reason or "the jit's results were not replayed"
            call = dataclasses.replace(call, values=tuple(
                StageValues(s.name, note=f"not evaluated: {why}") for s in call.stages
                if s.jaxpr is not None and s.available))
        if self.nonfinite:
            found = tuple(dataclasses.replace(r, stage=stage) for r in self.nonfinite)
            call = with_levels(dataclasses.replace(call, nonfinite=found))
        results = self.results
        if self.fault is not None:
            lost = lost_diagnostic("replaying the jit's results", self.fault)
            return dataclasses.replace(call, diagnostics=call.diagnostics + (lost,))
        outputs = [t for t in call.trees if t.role == "output"]
        if not results:  # why the results have no values, on the output tree
            if self.reason and len(outputs) == 1 and not outputs[0].note:
                noted = dataclasses.replace(outputs[0], note=self.reason)
                return dataclasses.replace(call, trees=tuple(
                    noted if t is outputs[0] else t for t in call.trees))
            return call
        if len(outputs) != 1 or len(outputs[0].leaves) != len(results):
            return call
        filled = {id(outputs[0]): _filled(outputs[0], results)}
        for tree in call.trees:
            links = self.leaf_links.get((tree.role, tree.name))
            nested = self.nested.get((tree.role, tree.name))
            if links is not None and tree is not outputs[0]:
                filled[id(tree)] = _filled(tree, tuple(results[i] for i in links))
            elif nested is not None:
                filled[id(tree)] = _filled(tree, nested)
        trees = tuple(filled.get(id(t), t) for t in call.trees)
        pairs = tuple(dataclasses.replace(p, left=filled.get(id(p.left), p.left),
                                          right=filled.get(id(p.right), p.right))
                      for p in call.pairs)
        return dataclasses.replace(call, trees=trees, pairs=pairs)


def _is_traced(x: Any) -> bool:
    leaves = jax.tree_util.tree_leaves(x)
    return any(isinstance(leaf, _i.Tracer) for leaf in leaves)
