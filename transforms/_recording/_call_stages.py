"""A call's stage capture while it runs (CallStages): planned when the wrapper opens the
call (`plan`), fed while it runs (each level's tape: `watch_*`), captured when it finishes
(`capture`); or shared with an earlier call of the same signature; or, for a top-level jit,
left waiting in the session until JAX's trace is over.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import weakref
from typing import Any

from .. import _stages
from .._capture import NoteLost, TransformSpec, lost_diagnostic, recording_off
from .._devices import CallShardings
from .._stages import TapePair, failed_capture
from ..model import Call, Diagnostic, ErrorRecord, kind_of
from ._levels import LevelState
from ._recorder import SessionRecorder

__all__ = ["CallStages", "note_jit_arguments"]

# (weakref to fun, argument placements, mesh context) noted where jit binds its signature
_jit_bound: contextvars.ContextVar[tuple | None] = contextvars.ContextVar(
    "transforms_jit_bound", default=None)


def note_jit_arguments(fun: Any, args: tuple, kwargs: dict) -> None:
    """What jit bound (the concrete arguments) before tracing `fun`: their shardings."""
    # NB: here, before JAX traces, the mesh context can be read (inside jit it cannot)
    # NB: fun held weakly: with stages off nothing takes this, and a jitted call keeps nothing alive
    _jit_bound.set((weakref.ref(fun), _stages.concrete_shardings(args, kwargs),
                    _stages.mesh_context()))


def _take_jit_arguments(fun: Any) -> tuple:
    """(argument placements or None, mesh context or None) noted for this function."""
    bound = _jit_bound.get()
    _jit_bound.set(None)
    return bound[1:] if bound is not None and bound[0]() is fun else (None, None)


class CallStages:
    """One call's stage capture, from the plan to the stages its record holds."""

    def __init__(self, recorder: SessionRecorder, index: int, transform: str,
                 parent: int | None, args: tuple, kwargs: dict, shardings: CallShardings,
                 note_lost: NoteLost):
        self.recorder = recorder
        self.index = index
        self.transform = transform
        self.parent = parent
        self.shardings = shardings  # a finished call's shardings follow stages resolved later
        self.note_lost = note_lost  # what capturing them failed at, kept on the call
        self.spec: TransformSpec | None = None
        self._args = (args, kwargs) if recorder.capture_stages else None
        self.stage_key: Any = None
        self.stage_plan: Any = None      # _plan.StagePlan: this call captures its stages
        self.shared_stages: tuple | None = None  # another call's, with the same signature
        # A vjp call's stages waiting for its pullback's rules (_stages.PendingStages), for the
        # pullback; and in a pullback's call, the forward call's, completed when it finishes.
        self.pending: Any = None
        self.late: Any = None
        self.cotangent: tuple | None = None  # a pullback's arguments' types, for `late`
        self.replay: Any = None  # a top-level jit's JitReplay: its results, once traced
        # record(find_nans=True): keep the live jaxprs of this capture (a NaN in the outputs),
        # by stage name; a call sharing stages records tapes all the same, for this.
        self.keep_jaxprs = False
        self.kept: dict[str, Any] = {}
        # (stages' function, spec, inputs as the jit's variables) of the transformations
        # called inside a top-level jit, with the kept jaxprs (_plan.nested_inputs)
        self.nested_inputs: list[tuple[str, Any, tuple]] = []

    def plan(self, spec: TransformSpec, late: Any = None) -> None:
        """Called by the wrapper that opened the call: plan its stages (or find them shared).

        `late`: in a pullback's call, the forward call's stages waiting for the rules it runs.
        """
        self.spec = spec
        self.late = late
        args = self._args
        self._args = None  # keep no arrays past this point
        if args is None:
            return
        try:
            if self.parent is not None and kind_of(self.transform).shares_forward_stages:
                # a pullback or pushforward: the forward call's stages, at the primal's types
                forward = self.recorder.call_by_index(self.parent)
                self.shared_stages = forward.stages if forward is not None else ()
                if self.late is not None:  # the cotangent's types: its rules run at them
                    self.cotangent = _stages.abstract_point(*args)[0]
                return
            self.stage_key = key = _stages.signature(spec, *args)
            if self.recorder.stages.known(key):
                self.shared_stages = self.recorder.stages.share(key, self.index, self._fixer())
                if self.recorder.replays and not spec.entry.compiles:
                    self.stage_plan = _stages.StagePlan(spec, *args)  # its jaxprs, on a NaN
                return
            self.stage_plan = _stages.StagePlan(spec, *args)
            if spec.entry.compiles:
                placements, mesh = _take_jit_arguments(spec.fun)
                main = self.stage_plan.main
                main.point = _stages.sharded_point(main.point, placements)
                main.mesh = mesh
        except Exception as e:  # a fault of ours: this call keeps a record of it, not stages
            self.stage_plan = None
            self.shared_stages = (failed_capture(spec.kind, e),)

    # -- while the call runs: what each level binds -------------------------------
    def watch_level(self, level: LevelState, fun: Any, args: tuple, kwargs: dict) -> Any:
        """A wrapper's function is about to run at `level`: its tape, when stages need one."""
        plan = self.stage_plan
        if plan is None:
            return None
        tape = plan.enter(fun, args, kwargs)
        level.tape = tape
        return tape

    def watch_outer(self, level: LevelState, args: tuple, kwargs: dict) -> Any:
        """The call's outermost level: what it executes is the transformed program."""
        plan = self.stage_plan
        if plan is None:
            return None
        tape = plan.enter_outer(level.jax_trace, args, kwargs)
        level.tape = tape
        return tape

    def watch_rule_level(self, level: LevelState, outer_trace: Any) -> None:
        """A custom rule's body binding on the call's outermost trace: part of what it ran."""
        plan = self.stage_plan
        tape = plan.main.outer_tape if plan is not None else None
        if tape is None or tape.finished:
            return
        if level.jax_trace is not outer_trace:
            return
        if tape.busy:  # the rule runs inside an outer step (vmap of a custom_jvp): not a tape
            tape.problem = tape.problem or "a custom rule ran inside one of the call's steps"
            return
        level.tape = tape

    def watch_rule(self, level: LevelState, kind: str, fun: Any, args: tuple) -> Any:
        """A custom rule's body runs: its own tape, on its first run at these types."""
        plan = self.stage_plan
        if plan is None:
            return None
        tape = plan.rules.start(kind, fun, args)
        if tape is not None:
            level.tape = tape if level.tape is None else TapePair(level.tape, tape)
        return tape

    def nested_call(self, spec: Any, args: tuple, kwargs: dict) -> None:
        """A transformation called inside this call gets stages of its own."""
        if self.stage_plan is not None:
            self.stage_plan.nested_call(spec, args, kwargs)

    # -- when the call finishes -------------------------------------------------
    def capture(self, failed: bool, error: ErrorRecord | None) -> tuple:
        """The call's stages: captured now, shared, completed for a pullback, or () while
        they wait for JAX's trace to end (the session hands them to the call then)."""
        late, self.late = self.late, None
        if late is not None:  # a pullback: the forward call's stages, completed by its rules
            old = late.stages
            new = late.settle(failed, self.cotangent, self.note_lost)
            if new is not None:
                self.recorder.completed(old, new, late.key)
                return new
        plan, self.stage_plan = self.stage_plan, None
        if self.shared_stages is not None:
            if plan is not None:  # made for find_nans: captured only for its jaxprs
                self._keep_jaxprs_of(plan)
            return self.shared_stages
        if plan is None:
            return ()
        try:
            with recording_off(), self._keeping() as kept:  # stages record nothing
                captured = _stages.capture(plan, f"{error.type_name}: {error.message}"
                                           if error is not None and error.message else "")
            self.kept = kept
            if self.keep_jaxprs:
                self.nested_inputs = plan.nested_inputs()
        finally:
            plan.release()
        shared = self.recorder.stages
        shared.captures += 1
        if captured.later is not None:
            later = captured.later.with_inner(captured.stages, captured.nested)
            if self.replay is not None and not failed:
                later = dataclasses.replace(later, on_trace=self.replay)
            key = shared.wait(None if failed else self.stage_key, later, self.index,
                              self._fixer())
            if self.spec is not None:
                self.recorder.watch_deferred(self.spec.fun, key)
            return ()
        stages = captured.all_stages()
        if not failed:
            shared.keep(self.stage_key, stages)
            if kind_of(self.transform).returns_pullback and _stages.PendingStages.needed(plan):
                self.pending = _stages.PendingStages(plan, stages, self.stage_key)
        return stages

    def _keeping(self) -> Any:
        return _stages.keeping_jaxprs() if self.keep_jaxprs else contextlib.nullcontext({})

    def _keep_jaxprs_of(self, plan: Any) -> None:
        """A call sharing its stages whose outputs hold a NaN: its own live jaxprs."""
        try:
            if self.keep_jaxprs:
                with recording_off(), _stages.keeping_jaxprs() as kept:
                    _stages.capture(plan)
                self.kept = kept
        except Exception as e:  # a fault of ours: noted, the call keeps its shared stages
            self.note_lost("capturing the stages to replay", e)
        finally:
            plan.release()

    def hand_over(self, failed: bool) -> None:
        """A finished vjp call's stages waiting for its pullback's rules: the session keeps
        them for the pullback (_returned takes them)."""
        if self.pending is not None and not failed:
            self.recorder.hand_over(self.index, self.pending)
        self.pending = None

    def _fixer(self) -> Any:
        """How a finished call takes stages resolved later: its shardings follow them."""
        # NB: the fixer holds no part of this call: it waits until the block
        # ends, and the call holds the user's function and arguments.
        shardings_of = self.shardings.of_stages()
        replay = self.replay

        def fix(call: Call, stages: tuple) -> Call:
            call = fixed(call, stages)
            # its results' values, replayed with the stages
            return replay.apply(call) if replay is not None else call

        def fixed(call: Call, stages: tuple) -> Call:
            lost: list[Diagnostic] = []
            shardings = call.shardings or shardings_of(
                stages, lambda what, e: lost.append(lost_diagnostic(what, e)))
            if lost:  # what the recorder failed at, on the call as if noted while it ran
                return dataclasses.replace(call, stages=stages, shardings=shardings,
                                           diagnostics=call.diagnostics + tuple(lost))
            return dataclasses.replace(call, stages=stages, shardings=shardings)
        return fix if replay is not None else fixed
