"""One call while it runs (CallBuilder): its levels and steps (CallSteps), trees
(CallTrees), shardings (CallShardings) and stages (CallStages), frozen into a `model.Call`
by `finish`. Builders are mutable while a call runs; only what the model defines survives.
"""
from __future__ import annotations

import threading
from functools import partial
from typing import Any, cast

import jax

from .. import _jax as _i
from .._capture import (
    OUTPUTS,
    RUNNING,
    STRIDE,
    Options,
    RecordingState,
    chain_of,
    describe_concrete,
    function_name,
    open_levels,
    state as _state,
    steps_from,
    user_location,
)
from .._common import message as error_message
from .._devices import CallShardings
from .._trees import CallTrees, tree_text
from ..model import Call, Lazy, StageValues, kind_of
from ._call_stages import CallStages
from ._call_steps import CallSteps
from ._find_nans import nan_search_wanted, search_call, with_levels
from ._jit_values import JIT_NOT_COPIED
from ._levels import LevelState
from ._recorder import SessionRecorder
from ._stage_values import Forward, call_values, forward_of, returned_call_values

__all__ = ["CallBuilder", "begin_call", "state"]


def begin_call(session: SessionRecorder, transform: str, fun: Any, options: Options,
               args: tuple, kwargs: dict, parent: int | None = None) -> CallBuilder:
    """A new call of `session`; the wrapper that opened it plans its stages (`stages.plan`)."""
    return CallBuilder(session, session.new_index(), transform, fun, options, args, kwargs,
                       parent)


class CallBuilder:
    """One outermost transformed invocation while it runs."""

    def __init__(self, recorder: SessionRecorder, index: int, transform: str, fun: Any,
                 options: Options, args: tuple, kwargs: dict, parent: int | None):
        self.recorder = recorder
        self.index = index
        self.transform = transform
        self.function = function_name(fun)
        self.options = options
        self.parent = parent
        self.source = user_location(2)
        self.thread = threading.current_thread().name
        self.thread_id = threading.get_ident()  # the progress frames read its stack
        if recorder.journal is not None:
            where = f" at {self.source}" if self.source else ""
            recorder.began(index, f"{transform}({self.function}){where}", self.thread, transform,
                           self.function, self.source)
        self.steps = CallSteps(recorder.summaries, recorder.inline_jnp)
        describer = self.steps.describer
        # Trees and the pre-trace check of custom pytree nodes, once per call.
        self.trees = CallTrees(transform, fun, options, args, kwargs, describer.describe)
        try:
            leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
        except Exception as e:  # a flatten that raises, a cyclic or too deep input:
            # JAX raises it itself once tracing starts; the call still gets a record.
            leaves, treedef = [], f"<unavailable: {type(e).__name__}: {error_message(e)}>"
        self.in_tree = tree_text(treedef)  # aux data whose repr raises: a note, not a crash
        self.inputs = tuple(describer.describe(x) for x in leaves)
        self.out_tree = ""
        self.outputs: tuple = ()
        self.shardings = CallShardings(self.trees, leaves, args, kwargs)
        self.stages = CallStages(recorder, index, transform, parent, args, kwargs, self.shardings,
                                 self.trees.note_lost)
        self.live = (args, kwargs) if recorder.replays else None  # while it runs: replays
        # A returned function's call: what its forward call kept for it (values=True)
        self.forward: Forward | None = None
        recorder.running_call(index, self)

    # -- levels (LevelCall: what its levels ask of it) -------------------------------
    def new_level(self, kind: str, jax_trace: Any, parent: LevelState | None,
                  function: str = "", options: Options | None = None,
                  segment: str = "") -> LevelState:
        return self.steps.new_level(self, kind, jax_trace, parent, function, options, segment)

    def rule_level(self, kind: str, parent: LevelState, function: str, fun: Any,
                   args: tuple) -> tuple[LevelState, Any]:
        """A custom rule's body runs in this call: its level, and its tape (None: no stages)."""
        enclosing = state.levels[-1] if state.levels else None
        level = self.new_level(kind, _i.current_trace(), parent, function)
        if enclosing is not None and self._same_run(enclosing, kind, function):
            self.steps.ran_as(enclosing, level)
        level.set_phase("rule")
        self.stages.watch_rule_level(level, self.steps.level_states[0].jax_trace)
        return level, self.stages.watch_rule(level, kind, fun, args)

    def _same_run(self, enclosing: LevelState, kind: str, function: str) -> bool:
        """The innermost open level is this rule's, opened for this same run and empty: a
        custom call one trace forwarded to the trace below wraps the rule at each, and the
        rule runs once, inside both wrappers (its steps go to the level opened last)."""
        outer = self.steps.levels[enclosing.index]
        return (outer.kind == kind and outer.function == function
                and self.steps.empty_since_opened(enclosing))

    def late_rule(self, kind: str, fun: Any, function: str, args: tuple) -> tuple[Any, Any]:
        """A rule of the forward call runs in this pullback call: (its level, its tape), or
        (None, None) when no stage waits for it."""
        late = self.stages.late
        if late is None or kind not in late.waits_for:
            return None, None
        levels = open_levels()
        parent = levels[-1] if levels else None
        level = self.new_level(kind, _i.current_trace(), parent, function)
        level.set_phase("rule")
        level.tape = tape = late.start_rule(kind, fun, args)
        return level, tape

    def record_error(self, error: BaseException, level: LevelState | None,
                     rule: Any = None) -> None:
        self.steps.record_error(error, level, self.source, self.trees, rule)

    # -- transformations called inside it -------------------------------------------
    def nested_returned(self, spec: Any, args: tuple, kwargs: dict, out: Any) -> None:
        """A transformation called inside this call returned: its gradient trees.

        Not for the wrappers of the call's own chain (vmap(grad(f))'s grad): the
        call's trees already describe them.
        """
        own = self.stages.spec
        if own is not None and any(spec.transformed is s.transformed for s in chain_of(own)):
            return
        self.trees.note_nested(spec.kind, spec.fun, spec.options, args, kwargs, out)

    # -- the record ---------------------------------------------------------------
    def finish(self, outputs: Any = None, failed: bool = False) -> Call:
        steps = self.steps
        describer = steps.describer
        if not failed:
            leaves, treedef = jax.tree_util.tree_flatten(outputs)
            self.out_tree = tree_text(treedef)
            self.outputs = tuple(describe_concrete(x) if not isinstance(x, _i.Tracer)
                                 else describer.describe(x) for x in leaves)
            self.trees.finish(outputs)
            if self.stages.replay is not None:  # a jit's gradient takes its replayed values
                self.stages.replay.leaf_links = self.trees.leaf_links
                self.stages.replay.leaf_vars = self.trees.leaf_vars
            self.shardings.note_outputs(outputs)
        parts = steps.core.parts()
        steps.whole_scopes(*parts[:2])
        if describer.leaked:
            self.trees.note_leaks(list(steps_from(*parts)), describer.leaked)
        # NB: Steps are made when first read, not here: a big call would otherwise make
        # (and the cyclic GC then walk) a record per step before anyone looks at them.
        cells, count = parts[:2]
        finished = sum(1 for i in range(count) if cells[i * STRIDE + OUTPUTS] != RUNNING)
        lazy_steps: Any = Lazy(finished, partial(steps_from, *parts))
        search = nan_search_wanted(self.recorder, self.trees, failed)
        evaluate = self.recorder.values and not failed
        self.stages.keep_jaxprs = search or evaluate
        stages = self.stages.capture(failed, steps.errors[-1] if failed and steps.errors else None)
        live, self.live = self.live, None
        kept, self.stages.kept = self.stages.kept, {}
        nonfinite = search_call(self.recorder, self.trees, kept, stages, live) if search else ()
        values = self._values(kept, stages, live) if evaluate else ()
        if evaluate and kind_of(self.transform).outputs == "primal_first" and live is not None:
            # a vjp's or linearize's: the function it returned evaluates its calls with these
            self.recorder.hand_over(self.index, forward_of(self.index, kept, stages, live,
                                                           self.stages.spec), "values")
        call = Call(self.index, self.transform, self.function, self.source, self.options.pairs,
                    steps.settled_levels(cells, count), lazy_steps, tuple(steps.errors),
                    self.in_tree, self.out_tree, self.inputs, self.outputs, self.parent, stages,
                    trees=self.trees.trees, pairs=tuple(self.trees.pairs),
                    diagnostics=tuple(self.trees.diagnostics),
                    shardings=self.shardings.of_call(stages), nonfinite=nonfinite,
                    values=values, thread=self.thread)
        call = with_levels(call)  # after the search: its equations' levels, from the steps
        steps.level_states.clear()  # drops the JAX traces they hold
        self.recorder.add(call)
        self.stages.hand_over(failed)
        return call


    def _values(self, kept: dict, stages: tuple, live: Any) -> tuple:
        """record(values=True): the stages evaluated now, or for a top-level jit (whose
        inputs here are JAX's tracers) once its replay has the arguments' host copies."""
        spec = self.stages.spec
        if self.parent is not None and self.forward is not None and live is not None:
            return returned_call_values(self.forward, self.transform, stages, live)
        if self.parent is not None:  # a pullback's: its forward call's stages
            why = (f"these are call {self.parent}'s stages (its forward pass, evaluated "
                   f"there); the residuals they would take here are not kept (the forward "
                   f"call was not recorded with values=True)")
            return tuple(StageValues(s.name, note=f"not evaluated: {why}")
                         for s in stages if s.jaxpr is not None and s.available)
        if self.transform != "jit":
            return call_values(kept, stages, live, spec)
        replay = self.stages.replay
        if replay is not None:
            replay.evaluate_later(kept, spec, self.stages.nested_inputs)
            return ()
        return tuple(StageValues(s.name, note=f"not evaluated: {JIT_NOT_COPIED}")
                     for s in stages if s.jaxpr is not None and s.available)


# NB: the recording state (_capture's) holds this layer's objects; read here as what they are.
state = cast("RecordingState[SessionRecorder, CallBuilder, LevelState]", _state)
