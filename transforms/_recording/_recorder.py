"""The recorder: a session's calls, and each call while it runs (CallBuilder).

Builders here are mutable while a call runs; `CallBuilder.finish` freezes
everything into `model.Call`. Only what the model module defines survives.
The recording state they work in (open blocks, the current call) is _state.py's;
levels and their steps are _levels.py's.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import weakref
from functools import cache, partial
from typing import Any, Iterator

import jax

from .. import _jax as _i, _stages
from .._capture import (
    ERROR,
    KIND,
    LEVEL,
    NONE,
    OUTPUTS,
    RUNNING,
    STRIDE,
    Describer,
    Options,
    TransformSpec,
    active_session as active_session,
    built_steps,
    chain_of,
    describe_concrete,
    enter_block,
    entering_frame,
    function_name,
    jaxpr_record,
    jit_pairs_key,
    leave_block,
    open_levels,
    recording_off as recording_off,
    reset_block_key,
    step_core_class,
    steps_from,
    summarize_params,
    traceback_location,
    user_location,
)
from .._common import BoundedCache, ByObject, message as error_message
from .._devices import sharding_hook
from .._jax import is_inline_jit_params
from .._stages import TapePair, failed_capture
from .._trees import CallTrees, tree_text
from ..model import TRACES_BY_CLASS, Call, ErrorRecord, Growth, Lazy, Level, Session, Step, kind_of
from ._levels import LevelState, RuleSpec

__all__ = ["CallBuilder", "SessionRecorder", "active_session", "level_kind", "note_jit_arguments",
           "record", "recording_off"]


def level_kind(trace: Any) -> str:
    """A level on JAX's `trace`, named as the transformation a user would call."""
    trace_type = type(trace).__name__
    found = TRACES_BY_CLASS.get(trace_type)
    return found.level if found is not None else trace_type


_EVERY = object()  # resolve every waiting capture

# Level records by their fields: a loop's calls have the same levels, one record each.
_shared_levels: BoundedCache = BoundedCache(10_000)


def shared_level(*fields: Any) -> Level:
    """The Level with these fields, made once (records are frozen: sharing one is safe)."""
    level = _shared_levels.get(fields)
    if level is None:
        level = _shared_levels.put(fields, Level(*fields))
    return level

# The most jaxprs a session keeps alive for its records' sake (then it starts again).
SHARED_JAXPRS = 512


class SessionRecorder:
    """Collects finished calls into a Session."""

    def __init__(self, inline_jnp: bool = False, stages: bool = True, detail: str = "default",
                 max_steps: int | None = None):
        if detail not in ("default", "full"):
            raise ValueError(f"record(detail=...) must be 'default' or 'full', got {detail!r}")
        if max_steps is not None and (isinstance(max_steps, bool) or
                                      not isinstance(max_steps, int) or max_steps < 1):
            raise ValueError(f"record(max_steps=...) must be a positive int or None, "
                             f"got {max_steps!r}")
        self.detail = detail
        self.inline_jnp = inline_jnp
        self.capture_stages = stages
        self.session = Session(jax_version=jax.__version__, max_steps=max_steps)
        self._next_index = 0
        self._bound = StepBound(self.session, max_steps) if max_steps is not None else None
        self.stages = _SharedStages()
        # A vjp call's PendingStages, handed to the pullback it returns (_returned), by call index
        self._handed: dict[int, Any] = {}
        # Jaxpr records and jit step summaries by jaxpr object, while it lives (JAX
        # reuses the jaxprs of jnp functions, and the ones its rules make of them, across
        # calls and sessions; their constants are the user's arrays).
        self.summaries = shared_summaries(detail == "full")

    def begin_call(self, transform: str, fun: Any, options: Options, args: tuple,
                   kwargs: dict, parent: int | None = None) -> CallBuilder:
        index = self._next_index  # calls keep their index when earlier ones are dropped
        self._next_index += 1
        return CallBuilder(self, index, transform, fun, options, args, kwargs, parent)

    def add(self, call: Call) -> None:
        self.session.calls.append(call)
        if self._bound is not None:
            self._bound.added(call)

    def call_by_index(self, index: int) -> Call | None:
        """The recorded call with this index; None when it was dropped (max_steps)."""
        calls = self.session.calls
        position = _position_of(calls, index)
        return calls[position] if position is not None else None

    def hand_over(self, index: int, pending: Any) -> None:
        self._handed[index] = pending

    def take_handed(self, index: int) -> Any:
        """The PendingStages call `index` made for its pullback (None: none), no longer held here."""
        return self._handed.pop(index, None)

    def completed(self, old: tuple, new: tuple, key: Any) -> None:
        """A pullback's rules completed a signature's stages: every call holding them takes
        the new ones, and so do later calls sharing them."""
        self.stages.completions += 1
        if key is not None and self.stages.by_key.get(key) is old:
            self.stages.by_key[key] = new
        calls = self.session.calls
        for position, call in enumerate(calls):
            if call.stages is old:
                calls[position] = dataclasses.replace(call, stages=new)

    def add_growth(self, growth: Growth) -> bool:
        """Keep growth on the call recorded last; False when no call was recorded yet."""
        calls = self.session.calls
        if not calls:
            return False
        calls[-1] = dataclasses.replace(calls[-1], growth=calls[-1].growth + (growth,))
        return True

    def finish_stages(self, key: Any = _EVERY) -> None:
        """Capture what waited for JAX to finish a trace (top-level jit calls): all, or key's."""
        if not self.stages.later:  # nothing waits (always so with stages off)
            return
        with recording_off():
            self.stages.resolve(self.session.calls, key)

    def watch_deferred(self, fun: Any, key: Any) -> None:
        """Read key's waiting stages as soon as the program drops fun.

        They are read from JAX's caches, which hold the trace (and the
        constants it closed over) only while the function lives: read then,
        and what JAX frees at that moment is freed at that moment.
        """
        recorder = weakref.ref(self)

        def dropped(_ref: Any) -> None:
            alive = recorder()
            if alive is not None:
                alive.finish_stages(key)
        try:
            self.stages.watches[key] = weakref.ref(fun, dropped)
        except TypeError:  # not weakly referenceable: read when the block ends
            pass


class _SharedStages:
    """Stages by call signature: captured once, shared by every later call with it.

    A top-level jit's stages wait until its trace is over (`later`); calls
    sharing them get them when they are resolved. `captures` counts the
    captures made (tests and benchmarks read it).
    """

    def __init__(self) -> None:
        self.by_key: dict[Any, tuple] = {}
        self.later: dict[Any, tuple[Any, list]] = {}   # key -> (DeferredJit, [(index, fix)])
        self.captures = 0
        self.completions = 0  # stages completed after a pullback ran a rule they waited for
        self.watches: dict[Any, Any] = {}  # key -> weakref to the function it waits for

    def known(self, key: Any) -> bool:
        return key is not None and (key in self.by_key or key in self.later)

    def share(self, key: Any, index: int, fix: Any) -> tuple:
        if key in self.by_key:
            return self.by_key[key]
        self.later[key][1].append((index, fix))
        return ()

    # NB: keys hold the objects they name weakly (_plan.Identity): sharing
    # stages keeps nothing of the user's program alive.
    def keep(self, key: Any, stages: tuple) -> None:
        if key is not None:
            self.by_key[key] = stages

    def wait(self, key: Any, deferred: Any, index: int, fix: Any) -> Any:
        """Wait for the stages under key (its own when None); the key waited under."""
        key = key if key is not None else ("unshared", index)
        self.later[key] = (deferred, [(index, fix)])
        return key

    def resolve(self, calls: list, only: Any = _EVERY) -> None:
        """Capture the stages waiting (all, or only's) and hand them to their calls."""
        while self.later:
            key = next(iter(self.later)) if only is _EVERY else only
            if key not in self.later:
                return
            deferred, waiting = self.later.pop(key)
            self.watches.pop(key, None)
            stages = deferred.finish()
            if not (isinstance(key, tuple) and key[:1] == ("unshared",)):
                self.by_key[key] = stages
            for index, fix in waiting:
                # NB: by index: with calls dropped (max_steps) indices are not positions.
                position = _position_of(calls, index)
                if position is not None:
                    calls[position] = fix(calls[position], stages)
            if only is not _EVERY:
                return


def _position_of(calls: list, index: int) -> int | None:
    """Where the call with this index is in calls; None when it was dropped (max_steps)."""
    if index < len(calls) and calls[index].index == index:
        return index  # nothing dropped before it
    return next((p for p in range(len(calls) - 1, -1, -1) if calls[p].index == index), None)


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


class StepBound:
    """Keeps a recording to about max_steps steps: the first calls (up to half the budget,
    and always the first) and the latest ones; the calls between are dropped and counted on
    the Session (dropped_calls, dropped_steps). The call just finished is always kept."""

    def __init__(self, session: Session, max_steps: int):
        self.session = session
        self.max_steps = max_steps
        self.held = 0           # steps in session.calls
        self.head = 0           # the first calls, kept for good
        self.head_open = True

    def added(self, call: Call) -> None:
        calls = self.session.calls
        self.held += len(call.steps)
        if self.head_open:
            if self.held <= self.max_steps // 2 or len(calls) == 1:
                self.head = len(calls)
                return
            self.head_open = False
        while self.held > self.max_steps and len(calls) > self.head + 1:
            dropped = calls.pop(self.head)  # the oldest of the latest calls
            self.held -= len(dropped.steps)
            self.session.dropped_calls += 1
            self.session.dropped_steps += len(dropped.steps)


@contextlib.contextmanager
def record(*, inline_jnp: bool = False, stages: bool = True,
           detail: str = "default", max_steps: int | None = None) -> Iterator[Session]:
    """Record every transformation call made inside the block into a Session.

    Outside such a block the transforms behave exactly as `jax.*` and record
    nothing. With `inline_jnp=True`, jnp wrappers (`jit(inline=True)`) are
    evaluated under the recorder so steps read `sin`, `mul`, `dot_general`.
    Each call keeps its pipeline of jaxprs (stages), captured once per
    signature from what the call traced (the user's function is not run
    again); `stages=False` keeps none. A top-level jit's compiled stages are
    filled in when the block ends. At `detail="default"` the bodies of jnp
    wrappers are named in their step's params (`jaxpr={jaxpr: sin, cos}`) but
    not kept as sub-jaxprs; with `detail="full"` every sub-jaxpr is kept with
    its text.
    With `max_steps=N`, a long recording keeps about N steps: the first calls (up to N/2
    steps) and the latest; the calls between are dropped as they fall out and counted in
    `Session.dropped_calls` / `dropped_steps` (calls keep their index). None: keep all.
    """
    recorder = SessionRecorder(inline_jnp=inline_jnp, stages=stages, detail=detail,
                               max_steps=max_steps)
    entered = enter_block(recorder, entering_frame())
    try:
        with _i.jit_cache_key(entered.key):
            try:
                yield recorder.session
            finally:
                leave_block(entered)
                recorder.finish_stages()  # a top-level jit's stages, now that its traces are over
    finally:
        reset_block_key(entered)


class StepSummaries:
    """Steps' params as text pairs, and the records of their sub-jaxprs: what a step core
    asks when its own tables do not have them (`step_params`, `jit_step`). One for each
    detail, shared by every session (`shared_summaries`): what it keeps depends only on
    the jaxpr and params, and a new session meets the jaxprs the last one did.

    Kept by jaxpr object while it lives (JAX reuses the jaxprs of jnp functions; their
    constants are the user's arrays). Holds no call: a core holds its methods.
    """

    def __init__(self, full_detail: bool):
        self.full_detail = full_detail
        self.jaxpr_records: ByObject[Any] = ByObject(SHARED_JAXPRS)
        # (jaxpr, (name, donated_invars, inline_token)) -> (pairs, subjaxprs, inline)
        self.jit_summaries: ByObject[tuple] = ByObject(SHARED_JAXPRS)
        # jit_pairs_key(params) -> the pairs of a jnp wrapper's jit step (default detail)
        self._pairs_by_text: BoundedCache = BoundedCache(10_000)

    def jaxpr(self, name: str, jaxpr: Any):
        # JAX caches the jaxprs of jnp wrappers: print each object once.
        rec = self.jaxpr_records.get(jaxpr)
        if rec is None:
            rec = jaxpr_record(name, jaxpr)
            self.jaxpr_records.put(jaxpr, None, rec)
        return rec if rec.name == name else dataclasses.replace(rec, name=name)

    def step_params(self, name: str, params: dict) -> tuple:
        """(pairs, subjaxprs) of a step that is not a jit."""
        pairs, jaxprs = summarize_params(name, params)
        return pairs, tuple([self.jaxpr(key, j) for key, j in jaxprs]) if jaxprs else ()

    def _inline_pairs(self, params: dict) -> tuple:
        key = jit_pairs_key(params)
        try:
            pairs = self._pairs_by_text.get(key) if key is not None else None
        except TypeError:  # flags of a kind that cannot be hashed
            key = pairs = None
        if pairs is None:
            pairs = summarize_params("jit", params)[0]
            if key is not None:
                self._pairs_by_text.put(key, pairs)
        return pairs

    def jit_step(self, params: dict) -> tuple:
        """(pairs, subjaxprs, inline) of a jit step, once per jaxpr object.

        Every jnp function is a jit step, and JAX reuses their jaxprs (eight
        layers call one tanh jaxpr), so this is the hottest rule.
        """
        jaxpr = params.get("jaxpr")
        key: tuple | None = (params.get("name"), params.get("donated_invars"), _i.inline_token(params))
        try:
            hit = self.jit_summaries.get(jaxpr, key)
        except TypeError:  # params of a shape we do not know: no caching
            hit, key = None, None
        if hit is not None:
            return hit
        inline = is_inline_jit_params(params)
        if self.full_detail or not inline:
            pairs, jaxprs = summarize_params("jit", params)
            subjaxprs = tuple([self.jaxpr(k, j) for k, j in jaxprs])
        else:
            # At the default detail a jnp wrapper's body is named in its params
            # (`jaxpr={jaxpr: sin, cos}`), not kept: the pairs of a jaxpr met for the
            # first time (JAX's rules make one for each wrapper under vmap and grad)
            # by what they print.
            pairs = self._inline_pairs(params)
            subjaxprs = ()
        summary = (pairs, subjaxprs, inline)
        if key is not None:
            self.jit_summaries.put(jaxpr, key, summary)
        return summary


@cache
def shared_summaries(full_detail: bool) -> StepSummaries:
    """The step summaries of every session recorded at this detail."""
    return StepSummaries(full_detail)


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
        self.levels: list[Level] = []
        self.level_states: list[LevelState] = []
        self.errors: list[ErrorRecord] = []
        self.level_of_trace: dict[int, int] = {}
        self.describer = Describer(self.level_of_trace)
        self.describer.enclosing = _i.enclosing_traces(_i.current_trace())
        # The steps while recording: rows of numbers, made by the step core that each
        # level's RecordingTrace calls (_step_core). The summaries are the session's: a
        # training loop's steps print each jaxpr once.
        summaries = recorder.summaries
        self.core = step_core_class()(self.describer, summaries.step_params, summaries.jit_step,
                                      summaries.jit_summaries.entries)
        self._errors_seen: set[int] = set()
        # Trees and the pre-trace check of custom pytree nodes, once per call.
        self.trees = CallTrees(transform, fun, options, args, kwargs, self.describer.describe)
        try:
            leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
        except Exception as e:  # a flatten that raises, a cyclic or too deep input:
            # JAX raises it itself once tracing starts; the call still gets a record.
            leaves, treedef = [], f"<unavailable: {type(e).__name__}: {error_message(e)}>"
        self.in_tree = tree_text(treedef)  # aux data whose repr raises: a note, not a crash
        self.inputs = tuple(self.describer.describe(x) for x in leaves)
        self.out_tree = ""
        self.outputs: tuple = ()
        self._spec: TransformSpec | None = None  # for stage capture
        self._args = (args, kwargs) if recorder.capture_stages else None
        self.stage_key: Any = None
        self.stage_plan: Any = None      # _plan.StagePlan: this call captures its stages
        self.shared_stages: tuple | None = None  # another call's, with the same signature
        # A vjp call's stages waiting for its pullback's rules (_stages.PendingStages), for the
        # pullback; and in a pullback's call, the forward call's, completed when it finishes.
        self.pending: Any = None
        self.late: Any = None
        self.cotangent: tuple | None = None  # a pullback's arguments' types, for `late`
        self.shardings = sharding_hook.inputs(self, leaves, args, kwargs)

    # -- stages ------------------------------------------------------------------
    @property
    def spec(self) -> TransformSpec | None:
        return self._spec

    @spec.setter
    def spec(self, spec: TransformSpec | None) -> None:
        """Set by the wrapper that opened the call: plan its stages (or find them shared)."""
        self._spec = spec
        args = self._args
        self._args = None  # keep no arrays past this point
        if args is None or spec is None:
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
                self.shared_stages = self.recorder.stages.share(
                    key, self.index, self._stages_fixer())
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

    def watch_rule_level(self, level: LevelState) -> None:
        """A custom rule's body binding on the call's outermost trace: part of what it ran."""
        plan = self.stage_plan
        tape = plan.main.outer_tape if plan is not None else None
        if tape is None or tape.finished:
            return
        if level.jax_trace is not self.level_states[0].jax_trace:
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

    def late_rule(self, kind: str, fun: Any, function: str, args: tuple) -> tuple[Any, Any]:
        """A rule of the forward call runs in this pullback call: (its level, its tape), or
        (None, None) when no stage waits for it."""
        late = self.late
        if late is None or kind not in late.waits_for:
            return None, None
        levels = open_levels()
        parent = levels[-1] if levels else None
        level = self.new_level(kind, _i.current_trace(), parent, function)
        level.set_phase("rule")
        level.tape = tape = late.start_rule(kind, fun, args)
        return level, tape

    def nested_transform(self, spec: Any, args: tuple, kwargs: dict) -> None:
        """A transformation called inside this call gets stages of its own."""
        if self.stage_plan is not None:
            self.stage_plan.nested_call(spec, args, kwargs)

    def nested_returned(self, spec: Any, args: tuple, kwargs: dict, out: Any) -> None:
        """A transformation called inside this call returned: its gradient trees.

        Not for the wrappers of the call's own chain (vmap(grad(f))'s grad): the
        call's trees already describe them.
        """
        if self._spec is not None and any(spec.transformed is s.transformed
                                          for s in chain_of(self._spec)):
            return
        self.trees.note_nested(spec.kind, spec.fun, spec.options, args, kwargs, out)

    def _stages_fixer(self) -> Any:
        """How a finished call takes stages resolved later: its shardings follow them."""
        # NB: the fixer holds no part of this builder: it waits until the block
        # ends, and the builder holds the user's function and arguments.
        shardings_of = sharding_hook.stage_shardings(self)

        def fix(call: Call, stages: tuple) -> Call:
            shardings = call.shardings or shardings_of(stages)
            return dataclasses.replace(call, stages=stages, shardings=shardings)
        return fix

    # -- levels ---------------------------------------------------------------
    def new_level(self, kind: str, jax_trace: Any, parent: LevelState | None,
                  function: str = "", options: Options | None = None) -> LevelState:
        if isinstance(jax_trace, _i.RecordingTrace):
            # NB: a level entered while a recorder is current replaces it, so
            # each step is recorded once, at the innermost level that sees it.
            jax_trace = jax_trace.parent
        trace_type = type(jax_trace).__name__
        if kind == "outer":
            kind = level_kind(jax_trace)
            depth, label = 0, f"{kind}#0"
        else:
            depth = parent.depth + 1 if parent is not None else 1
            prefix = parent.label + "/" if parent is not None and parent.depth > 0 else ""
            label = f"{prefix}{kind}#{depth}"
        index = len(self.levels)
        self.levels.append(shared_level(index, kind, label, depth,
                                        parent.index if parent is not None else None,
                                        trace_type, function, options.pairs if options else ()))
        self.level_of_trace[id(jax_trace)] = index
        self.describer.level_added(jax_trace)
        self.core.add_level()
        state = LevelState(self, index, label, depth, jax_trace, self.recorder.inline_jnp)
        # Kept until the call finishes: a custom_vjp bwd runs after its level ends.
        self.level_states.append(state)
        return state

    def rule_spec(self, kind: str, parent: LevelState, fun: Any) -> RuleSpec:
        return RuleSpec(self, kind, parent, function_name(_i.wrapped_python_function(fun)), fun)

    # -- steps ----------------------------------------------------------------
    def record_error(self, error: BaseException, level: LevelState | None) -> None:
        if id(error) in self._errors_seen:
            return
        self._errors_seen.add(id(error))
        step = self.failed_step(error)
        level_index = level.index if level is not None else None
        if step is None and level is not None:
            step = self.last_step_at(level.index)
        # An error JAX raises before any user code runs (a bad argument) is at the call site.
        source = traceback_location(error.__traceback__) or self.source
        if level is not None:
            self.core.event(level.index, type(error).__name__, self.describer.describe_all(()),
                            self.core.source_number(source), error_message(error), step)
        facts = self.trees.error_fields(error, self.levels, self.built_steps(), level_index,
                                        step, source, self.describer.leaked)
        self.errors.append(ErrorRecord(_qualified_name(type(error)), error_message(error),
                                       level_index, step, source, **facts))

    def failed_step(self, error: BaseException) -> int | None:
        """The latest finished step that raised (not an error event)."""
        return self._latest_step(lambda row: row[ERROR] != NONE)

    def last_step_at(self, level: int) -> int | None:
        return self._latest_step(lambda row: row[LEVEL] == level)

    def _latest_step(self, wanted: Any) -> int | None:
        cells, count, texts = self.core.parts()[:3]
        for i in range(count - 1, -1, -1):
            row = cells[i * STRIDE:(i + 1) * STRIDE]
            if row[OUTPUTS] != RUNNING and texts[row[KIND]] != "error" and wanted(row):
                return i
        return None

    def built_steps(self) -> list[Step | None]:
        """The steps as records (rows made into Steps), None for those still running."""
        return built_steps(self.core)

    def finish(self, outputs: Any = None, failed: bool = False) -> Call:
        if not failed:
            leaves, treedef = jax.tree_util.tree_flatten(outputs)
            self.out_tree = tree_text(treedef)
            self.outputs = tuple(describe_concrete(x) if not isinstance(x, _i.Tracer)
                                 else self.describer.describe(x) for x in leaves)
            self.trees.finish(outputs)
            self.shardings += sharding_hook.outputs(self, outputs)
        parts = self.core.parts()
        if self.describer.leaked:
            self.trees.note_leaks(list(steps_from(*parts)), self.describer.leaked)
        # NB: Steps are made when first read, not here: a big call would otherwise make
        # (and the cyclic GC then walk) a record per step before anyone looks at them.
        cells, count = parts[:2]
        finished = sum(1 for i in range(count) if cells[i * STRIDE + OUTPUTS] != RUNNING)
        steps: Any = Lazy(finished, partial(steps_from, *parts))
        stages = self._stages(failed)
        call = Call(self.index, self.transform, self.function, self.source, self.options.pairs,
                    tuple(self.levels), steps, tuple(self.errors), self.in_tree,
                    self.out_tree, self.inputs, self.outputs, self.parent, stages,
                    trees=self.trees.trees, pairs=tuple(self.trees.pairs),
                    diagnostics=tuple(self.trees.diagnostics),
                    shardings=sharding_hook.call_shardings(self, stages))
        self.level_states.clear()  # drops the JAX traces they hold
        self.recorder.add(call)
        if self.pending is not None and not failed:
            self.recorder.hand_over(self.index, self.pending)
        self.pending = None
        return call


    def _stages(self, failed: bool) -> tuple:
        late, self.late = self.late, None
        if late is not None:  # a pullback: the forward call's stages, completed by its rules
            old = late.stages
            new = late.settle(failed, self.cotangent)
            if new is not None:
                self.recorder.completed(old, new, late.key)
                return new
        if self.shared_stages is not None:
            return self.shared_stages
        plan, self.stage_plan = self.stage_plan, None
        if plan is None:
            return ()
        error = self.errors[-1].message if failed and self.errors else ""
        try:
            with recording_off():  # stages record nothing
                captured = _stages.capture(plan, f"{self.errors[-1].type_name}: {error}"
                                           if error else "")
        finally:
            plan.release()
        shared = self.recorder.stages
        shared.captures += 1
        if captured.later is not None:
            later = captured.later.with_inner(captured.stages, captured.nested)
            key = shared.wait(None if failed else self.stage_key, later, self.index,
                              self._stages_fixer())
            if self._spec is not None:
                self.recorder.watch_deferred(self._spec.fun, key)
            return ()
        stages = captured.all_stages()
        if not failed:
            shared.keep(self.stage_key, stages)
            if kind_of(self.transform).returns_pullback and _stages.PendingStages.needed(plan):
                self.pending = _stages.PendingStages(plan, stages, self.stage_key)
        return stages


def _qualified_name(cls: type) -> str:
    public = _i.public_error_name(cls)
    if public is not None:
        return public
    module = cls.__module__
    if module == "builtins":
        return cls.__name__
    return f"{module}.{cls.__qualname__}"
