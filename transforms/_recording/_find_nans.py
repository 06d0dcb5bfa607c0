"""record(find_nans=True): where a call's NaN or Inf came from. After the call, one of its
recorded stages (the outermost transformed program, or a jit's own jaxpr) is evaluated again
equation by equation on host copies of the call's inputs; the first equation that made a
NaN or Inf from finite inputs is named (and the first that made a NaN, which is what
jax_debug_nans names), with its stage, primitive, name stack, the user's line, the values of
its inputs, and a hint from _trees' table of known causes. Call-like equations (an inner jit,
a custom_jvp's body) are descended into to name the equation inside.

Nothing here runs inside the user's trace: it runs after the call returned, with recording
off, and keeps no array past the search.
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Iterator

import jax
import numpy as np

from .. import _jax as _i
from .._capture import recording_off, summarize_array
from .._trees import INPUTS_RULE, NonFiniteFacts, explain_nonfinite
from ..model import Call, NonFiniteFound, NonFiniteRecord, SourceLocation, TreeRecord

__all__ = ["has_nonfinite", "input_finding", "nan_search_wanted", "search_call",
           "replay_arguments", "search_nonfinite", "stop_if_nonfinite", "with_levels"]

_MAX_DEPTH = 16  # call-like equations descended into, at most


def has_nonfinite(trees: tuple[TreeRecord, ...] | list[TreeRecord]) -> bool:
    """Whether a leaf of these trees holds a NaN or Inf (by its summary)."""
    return any(n.summary is not None and not n.summary.finite
               for t in trees for n in t.leaves)


def input_finding(trees: list[TreeRecord]) -> NonFiniteRecord:
    where = next((f"{t.full_path(n)}" for t in trees for n in t.leaves
                  if n.summary is not None and not n.summary.finite), "")
    return NonFiniteRecord("inputs", note=f"{where} already held a NaN or Inf",
                           rule=INPUTS_RULE.name, hint=INPUTS_RULE.hint)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Recording off, and JAX's own NaN checks off: the replay looks for them itself."""
    with recording_off(), jax.debug_nans(False), jax.debug_infs(False):
        yield


def search_nonfinite(stage: str, closed: Any, args: list) -> tuple[NonFiniteRecord, ...]:
    """The first equations of `closed` (stage `stage`) making a NaN or Inf at args."""
    has_where = _selects(closed)
    finder = _Finder(stage, has_where, ())
    with _quiet():
        try:
            _i.eval_equations(closed, [np.asarray(a) for a in args], finder.visit)
        except _Stop:
            pass
    return finder.records


class _Stop(Exception):
    """Both equations found: the rest of the program is not evaluated."""


def _finite(x: Any) -> tuple[bool, bool]:
    """(no NaN and no Inf, no NaN) of a value."""
    a = np.asarray(x)
    if a.dtype.kind not in "fc":
        return True, True
    if np.isfinite(a).all():
        return True, True
    return False, not np.isnan(a).any()


class _Finder:
    def __init__(self, stage: str, has_where: bool, path: tuple[str, ...], outer_stack: str = "",
                 outer_scope: str = ""):
        self.stage, self.has_where, self.path = stage, has_where, path
        # The call-like equation's descended into: its name stack stands for an inner
        # equation's with none; its scope path is above every inner one (JAX records an
        # inner jaxpr's name stacks from where that jaxpr starts).
        self.outer_stack, self.outer_scope = outer_stack, outer_scope
        self.records: tuple[NonFiniteRecord, ...] = ()
        self.first: Any = None
        self.first_nan: Any = None
        self.index = -1

    def visit(self, index: int, eqn: Any, inputs: list, outputs: list) -> None:
        outs = [_finite(o) for o in outputs]
        if all(ok for ok, _ in outs):
            return
        ins = [_finite(x) for x in inputs]
        if self.first is None and all(ok for ok, _ in ins):
            self.first = self._record("first", index, eqn, inputs, outputs)
        if (self.first_nan is None and not all(no_nan for _, no_nan in outs)
                and all(no_nan for _, no_nan in ins)):
            self.first_nan = self._record("first_nan", index, eqn, inputs, outputs)
        self.records = tuple(r for r in (self.first, self.first_nan) if r is not None)
        if self.first is not None and self.first_nan is not None:
            raise _Stop

    def _record(self, kind: str, index: int, eqn: Any, inputs: list,
                outputs: list) -> NonFiniteRecord:
        inner = _i.inner_call(eqn) if len(self.path) < _MAX_DEPTH else None
        if inner is not None:
            found = self._descend(kind, inner, eqn, inputs)
            if found is not None:
                return dataclasses.replace(found, eqn=index)
        primitive, stack, scope = _i.eqn_facts(eqn)
        stack = stack or self.outer_stack
        frame = _i.source_frame(eqn.source_info)
        ins = tuple(_summary(x) for x in inputs)
        outs = tuple(_summary(x) for x in outputs)
        phase = "backward" if "transpose" in stack else "forward"
        rule, hint = explain_nonfinite(NonFiniteFacts(primitive, phase, stack, ins, outs,
                                                      self.has_where))
        return NonFiniteRecord(kind, self.stage, index, self.path, primitive, phase, stack,
                               source=SourceLocation(*frame) if frame is not None else None,
                               inputs=ins, outputs=outs, rule=rule, hint=hint,
                               scope=_i.joined_scope(self.outer_scope, scope))

    def _descend(self, kind: str, inner: tuple[str, Any], eqn: Any,
                 inputs: list) -> NonFiniteRecord | None:
        label, closed = inner
        _, stack, scope = _i.eqn_facts(eqn)
        finder = _Finder(self.stage, self.has_where, self.path + (label,),
                         stack or self.outer_stack, _i.joined_scope(self.outer_scope, scope))
        try:
            _i.eval_equations(closed, inputs, finder.visit)
        except _Stop:
            pass
        return finder.first if kind == "first" else finder.first_nan


def _summary(x: Any) -> Any:
    try:
        return summarize_array(np.asarray(x))
    except (TypeError, ValueError):  # a token or key: no values to show
        return None


def _selects(closed: Any) -> bool:
    """Whether the program selects with jnp.where (select_n), at any depth."""
    stack = [getattr(closed, "jaxpr", closed)]
    while stack:
        for eqn in stack.pop().eqns:
            if _i.eqn_facts(eqn)[0] == "select_n":
                return True
            stack.extend(_i.inner_jaxprs(eqn.params))
    return False


def nan_search_wanted(recorder: Any, trees: Any, failed: bool) -> bool:
    """Whether this finished call is the first whose outputs hold a NaN or Inf."""
    if not recorder.find_nans or recorder.nan_found or failed:
        return False
    return has_nonfinite(trees.outputs)


def search_call(recorder: Any, trees: Any, kept: dict, stages: tuple,
                live: tuple | None) -> tuple[NonFiniteRecord, ...]:
    """The call's findings: its inputs already non-finite, or the first equations of its
    outermost replayable stage making a NaN or Inf. Never raises (a fault is a note)."""
    recorder.nan_found = True
    if has_nonfinite(trees.inputs):
        return (input_finding(trees.inputs),)
    if live is None:
        return (NonFiniteRecord("first", note="not replayed: the inputs were not kept"),)
    for stage in reversed(stages):
        closed = kept.get(stage.name)
        args = replay_arguments(stage, closed, live) if closed is not None else None
        if args is None:
            continue
        try:
            found = search_nonfinite(stage.name, closed, args)
        except Exception as e:  # a fault of ours: said in the record
            return (NonFiniteRecord("first", stage.name,
                                    note=f"replay failed: {type(e).__name__}: {e}"),)
        return found or (NonFiniteRecord("first", stage.name,
                                          note="the replay made no NaN or Inf"),)
    return (NonFiniteRecord("first", note="not replayed: no stage of this call takes its "
                            "inputs as they were passed"),)


def replay_arguments(stage: Any, closed: Any, live: Any) -> list | None:
    """The call's inputs as `closed` (stage's live jaxpr) takes them, or None: only the
    user's function (`f`) and a transformed program take the call's own inputs (the others
    take residuals, tangents or cotangents)."""
    if stage.role not in ("transformed", "f"):
        return None
    leaves = jax.tree_util.tree_leaves(live)
    n = len(getattr(closed, "jaxpr", closed).invars)
    if len(leaves) == n:
        return leaves
    arrays = [x for x in leaves if isinstance(x, (jax.Array, np.ndarray))]
    return arrays if len(arrays) == n else None


def stop_if_nonfinite(recorder: Any, call: Call) -> None:
    """record(stop_at_nan=True): raise NonFiniteFound where the call that had one returned."""
    if recorder.stop_at_nan and call.nonfinite:
        raise NonFiniteFound(call.index, call.function, call.nonfinite)


def with_levels(call: Call) -> Call:
    """The call with each finding's transformation level: the level of the step its
    equation was staged from, followed to the innermost step that caused it."""
    if not call.nonfinite:
        return call
    labels = {level.index: level.label for level in call.levels}
    found = []
    for record in call.nonfinite:
        stage = next((s for s in call.stages if s.name == record.stage), None)
        label = ""
        if stage is not None and 0 <= record.eqn < len(stage.eqn_steps):
            label = _level_of(call, stage.eqn_steps[record.eqn], labels)
        found.append(dataclasses.replace(record, level=label) if label else record)
    return dataclasses.replace(call, nonfinite=tuple(found))


def _level_of(call: Call, index: int, labels: dict[int, str]) -> str:
    steps = call.steps
    if not 0 <= index < len(steps):
        return ""
    step, hops = steps[index], 0
    while step.cause is not None and 0 <= step.cause < len(steps) and hops < 64:
        step, hops = steps[step.cause], hops + 1
    return labels.get(step.level, "")
