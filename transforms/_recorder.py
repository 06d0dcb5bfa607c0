"""Recording state: the active session, the call being recorded, its levels.

Builders here are mutable while a call runs; `CallBuilder.finish` freezes
everything into `model.Call`. Only what the model module defines survives.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import itertools
import sys
import weakref
from functools import partial
from types import FrameType
from typing import Any, Iterator

import jax

from . import _interpreters as _i
from . import _sharding
from ._interpreters import is_inline_jit_params
from ._rules import summarize_params
from ._snapshot import Describer, describe_concrete, jaxpr_record, traceback_location, user_location
from .model import Call, ErrorRecord, Growth, Lazy, Level, Session, SourceLocation, Step

# JAX's trace classes, named as the transformation a user would call.
TRACE_KINDS = {
    "EvalTrace": "eval",
    "BatchTrace": "vmap",
    "JVPTrace": "jvp",
    "LinearizeTrace": "grad",
    "DynamicJaxprTrace": "jaxpr",
    "JaxprTrace": "partial_eval",
}


class _Block:
    """One open `record()` block: its recorder and the frame that entered it."""
    __slots__ = ("recorder", "frame")

    def __init__(self, recorder: SessionRecorder, frame: FrameType | None):
        self.recorder, self.frame = recorder, frame


# Recording state is context-local (contextvars), so asyncio tasks and threads each
# record into their own session. NB: a tuple of the open blocks, not one value with
# its previous one saved: a block that exits out of order (generators interleaved)
# removes only itself, and never restores a session that has already closed.
_blocks: contextvars.ContextVar[tuple[_Block, ...]] = contextvars.ContextVar(
    "transforms_record_blocks", default=())
_off: contextvars.ContextVar[bool] = contextvars.ContextVar("transforms_recording_off",
                                                            default=False)
_call: contextvars.ContextVar[CallBuilder | None] = contextvars.ContextVar(
    "transforms_call", default=None)
_levels: contextvars.ContextVar[list[LevelState] | None] = contextvars.ContextVar(
    "transforms_levels", default=None)


class _State:
    """The recording state as attributes (read by _api.py), kept in context variables.

    `session` is the recorder of the innermost open block whose frame is running (a
    generator resumed inside its own `with record()` records there), else of the
    block entered last (a pytest fixture that yields inside one)."""

    @property
    def session(self) -> SessionRecorder | None:
        if _off.get():
            return None
        blocks = _blocks.get()
        if not blocks:
            return None
        if len(blocks) == 1:
            return blocks[0].recorder
        frames = {id(b.frame) for b in blocks}
        frame: FrameType | None = sys._getframe(1)
        while frame is not None:
            if id(frame) in frames:
                return [b for b in blocks if b.frame is frame][-1].recorder
            frame = frame.f_back
        return blocks[-1].recorder

    @property
    def call(self) -> CallBuilder | None:
        return _call.get()

    @call.setter
    def call(self, value: CallBuilder | None) -> None:
        _call.set(value)

    @property
    def levels(self) -> list[LevelState]:
        levels = _levels.get()
        if levels is None:
            levels = []
            _levels.set(levels)
        return levels


_state = _State()


def _entering_frame() -> FrameType | None:
    """The frame whose `with` statement entered record(): the first outside contextlib."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename == contextlib.__file__:
        frame = frame.f_back
    return frame


def active_session() -> SessionRecorder | None:
    return _state.session


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
        # Jaxpr records and jit step summaries by jaxpr object, kept with the object
        # (so its id is not reused); JAX reuses the jaxprs of jnp functions.
        self.jaxpr_records: dict[int, tuple[Any, Any]] = {}
        self.jit_summaries: dict[tuple, tuple] = {}

    def begin_call(self, transform: str, fun: Any, options: tuple, args: tuple,
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

    def add_growth(self, growth: Growth) -> bool:
        """Keep growth on the call recorded last; False when no call was recorded yet."""
        calls = self.session.calls
        if not calls:
            return False
        calls[-1] = dataclasses.replace(calls[-1], growth=calls[-1].growth + (growth,))
        return True

    def finish_stages(self) -> None:
        """Capture what waited for JAX to finish a trace (top-level jit calls)."""
        with recording_off():
            self.stages.resolve(self.session.calls)


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
        self._keep: list[Any] = []  # functions in the keys stay alive: ids stay unique

    def known(self, key: Any) -> bool:
        return key is not None and (key in self.by_key or key in self.later)

    def share(self, key: Any, index: int, fix: Any) -> tuple:
        if key in self.by_key:
            return self.by_key[key]
        self.later[key][1].append((index, fix))
        return ()

    def keep(self, key: Any, stages: tuple, owner: Any) -> None:
        if key is not None:
            self.by_key[key] = stages
            self._keep.append(owner)

    def wait(self, key: Any, deferred: Any, index: int, fix: Any, owner: Any) -> None:
        key = key if key is not None else ("unshared", index)
        self.later[key] = (deferred, [(index, fix)])
        self._keep.append(owner)

    def resolve(self, calls: list) -> None:
        while self.later:
            key, (deferred, waiting) = next(iter(self.later.items()))
            del self.later[key]
            stages = deferred.finish()
            if not (isinstance(key, tuple) and key[:1] == ("unshared",)):
                self.by_key[key] = stages
            for index, fix in waiting:
                # NB: by index: with calls dropped (max_steps) indices are not positions.
                position = _position_of(calls, index)
                if position is not None:
                    calls[position] = fix(calls[position], stages)


def _position_of(calls: list, index: int) -> int | None:
    """Where the call with this index is in calls; None when it was dropped (max_steps)."""
    if index < len(calls) and calls[index].index == index:
        return index  # nothing dropped before it
    return next((p for p in range(len(calls) - 1, -1, -1) if calls[p].index == index), None)

# Stage capture's own state, in context variables as the recording state is.
_refuse_retrace: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "transforms_refuse_retrace", default=False)
# (weakref to fun, argument placements, mesh context) noted where jit binds its signature
_jit_bound: contextvars.ContextVar[tuple | None] = contextvars.ContextVar(
    "transforms_jit_bound", default=None)


# JAX's jit caches are keyed on the open block (a number, nothing of ours): a
# function traced outside, or in an earlier block, is traced again, and recorded,
# the first time a block calls it; inside one block JAX caches as it always does.
# NB: a new number only after a block under the last one traced a jit entry of ours:
# a new number makes JAX trace and compile everything again (its jnp functions too),
# which a block that recorded no jit does not need.
_block_serials = itertools.count(1)
_block_key: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "transforms_block_key", default=None)
_last_key = [next(_block_serials)]
_keys_with_jit_traces: set[int] = set()


def _new_block_key() -> int:
    key = _last_key[0]
    if key in _keys_with_jit_traces:
        key = _last_key[0] = next(_block_serials)
    return key


def note_jit_traced() -> None:
    """A jit entry of ours is traced under the open block's key: the next block takes a new one."""
    key = _block_key.get()
    if key is not None:
        _keys_with_jit_traces.add(key)


class RetraceRefused(RuntimeError):
    """Stage capture met a JAX cache miss that would run the user's function again."""


@contextlib.contextmanager
def refusing_retrace() -> Iterator[None]:
    """While capturing from JAX's caches: a trace of a recorded function raises instead."""
    token = _refuse_retrace.set(True)
    try:
        with _i.jit_cache_key(_block_key.get()):  # the traces the block recorded
            yield
    finally:
        _refuse_retrace.reset(token)


def check_retrace(fun: Any) -> None:
    """Called by the jit entry: refuse to run the user's function for stage capture."""
    if _refuse_retrace.get():
        raise RetraceRefused(
            f"JAX's tracing cache had no entry for {function_name(fun)} at these arguments, and "
            f"stages never run the user's function again")


def retrace_refused() -> bool:
    """True while stage capture reads JAX's cache (the jit entry then checks every trace)."""
    return _refuse_retrace.get()


def note_jit_arguments(fun: Any, args: tuple, kwargs: dict) -> None:
    """What jit bound (the concrete arguments) before tracing `fun`: their shardings."""
    from ._stages import concrete_shardings, mesh_context
    # NB: here, before JAX traces, the mesh context can be read (inside jit it cannot)
    # NB: fun held weakly: with stages off nothing takes this, and a jitted call keeps nothing alive
    _jit_bound.set((weakref.ref(fun), concrete_shardings(args, kwargs), mesh_context()))


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
def recording_off() -> Iterator[None]:
    """Nothing done inside is recorded: for the traces stages and growth make themselves.

    JAX's caches are keyed as outside any block: what is traced here is a plain trace.
    """
    off, call, levels = _off.set(True), _call.set(None), _levels.set([])
    try:
        with _i.jit_cache_key(None):
            yield
    finally:
        _levels.reset(levels)
        _call.reset(call)
        _off.reset(off)


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
    block = _Block(recorder, _entering_frame())
    prev = (_call.get(), _levels.get())
    _blocks.set((*_blocks.get(), block))
    _call.set(None)
    _levels.set([])
    key = _new_block_key()
    key_token = _block_key.set(key)
    try:
        with _i.jit_cache_key(key):
            try:
                yield recorder.session
            finally:
                blocks = _blocks.get()
                innermost = bool(blocks) and blocks[-1] is block
                _blocks.set(tuple(b for b in blocks if b is not block))
                if innermost:  # in order: the state of the block around it comes back
                    _call.set(prev[0])
                    _levels.set(prev[1])
                block.frame = None
                recorder.finish_stages()  # a top-level jit's stages, now that its traces are over
    finally:
        _block_key.reset(key_token)


def function_name(fun: Any) -> str:
    name = getattr(fun, "__qualname__", None) or getattr(fun, "__name__", None)
    return name if isinstance(name, str) else type(fun).__name__


class CallBuilder:
    """One outermost transformed invocation while it runs."""

    def __init__(self, recorder: SessionRecorder, index: int, transform: str, fun: Any,
                 options: tuple, args: tuple, kwargs: dict, parent: int | None):
        self.recorder = recorder
        self.index = index
        self.transform = transform
        self.function = function_name(fun)
        self.options = options
        self.parent = parent
        self.source = user_location(2)
        self.levels: list[Level] = []
        self.level_states: list[LevelState] = []
        # Step rows while recording (see LevelState.end_step), Step records for error events,
        # None for a step still running.
        self.steps: list[Any] = []
        self._sources: list[SourceLocation | None] = []
        self._source_numbers: dict[int, int] = {}
        self.errors: list[ErrorRecord] = []
        self.level_of_trace: dict[int, int] = {}
        self.describer = Describer(self.level_of_trace)
        self.describer.enclosing = _i.enclosing_traces(_i.current_trace())
        self.full_detail = recorder.detail == "full"
        # (step index, phase, source) of each step being processed, innermost last
        self.active_steps: list[tuple[int, str, SourceLocation | None]] = []
        # Shared by the session's calls: a training loop's steps print each jaxpr once.
        self._jaxprs = recorder.jaxpr_records
        self._jit_summaries = recorder.jit_summaries
        self._errors_seen: set[int] = set()
        from ._call_trees import CallTrees
        from ._trees import tree_text
        # Trees and the pre-trace check of custom pytree nodes, once per call.
        self.trees = CallTrees(transform, fun, options, args, kwargs, self.describer.describe)
        try:
            leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
        except Exception as e:  # a flatten that raises, a cyclic or too deep input:
            # JAX raises it itself once tracing starts; the call still gets a record.
            leaves, treedef = [], f"<unavailable: {type(e).__name__}: {_message(e)}>"
        self.in_tree = tree_text(treedef)  # aux data whose repr raises: a note, not a crash
        self.inputs = tuple(self.describer.describe(x) for x in leaves)
        self.out_tree = ""
        self.outputs: tuple = ()
        self._spec: Any = None  # _api.TransformSpec, for stage capture
        self._args = (args, kwargs) if recorder.capture_stages else None
        self.stage_key: Any = None
        self.stage_plan: Any = None      # _stages.StagePlan: this call captures its stages
        self.shared_stages: tuple | None = None  # another call's, with the same signature
        self.shardings = _sharding_hook.inputs(self, leaves, args, kwargs)

    # -- stages ------------------------------------------------------------------
    @property
    def spec(self) -> Any:
        return self._spec

    @spec.setter
    def spec(self, spec: Any) -> None:
        """Set by the wrapper that opened the call: plan its stages (or find them shared)."""
        self._spec = spec
        args = self._args
        self._args = None  # keep no arrays past this point
        if args is None or spec is None:
            return
        from . import _stages
        try:
            if self.parent is not None and self.transform in _stages.BACKWARD_CALLS:
                # a pullback or pushforward: the forward call's stages, at the primal's types
                forward = self.recorder.call_by_index(self.parent)
                self.shared_stages = forward.stages if forward is not None else ()
                return
            self.stage_key = key = _stages.signature(spec, *args)
            if self.recorder.stages.known(key):
                self.shared_stages = self.recorder.stages.share(
                    key, self.index, self._stages_fixer())
                return
            self.stage_plan = _stages.StagePlan(spec, *args)
            if spec.kind == "jit":
                placements, mesh = _take_jit_arguments(spec.fun)
                main = self.stage_plan.main
                main.point = _stages.sharded_point(main.point, placements)
                main.mesh = mesh
        except Exception as e:  # a fault of ours: this call keeps a record of it, not stages
            self.stage_plan = None
            self.shared_stages = (_stages.failed_capture(spec, e),)

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
            from ._tape import TapePair
            level.tape = tape if level.tape is None else TapePair(level.tape, tape)
        return tape

    def nested_transform(self, spec: Any, args: tuple, kwargs: dict) -> None:
        """A transformation called inside this call gets stages of its own."""
        if self.stage_plan is not None:
            self.stage_plan.nested_call(spec, args, kwargs)

    def nested_returned(self, spec: Any, args: tuple, kwargs: dict, out: Any) -> None:
        """A transformation called inside this call returned: its gradient trees.

        Not for the wrappers of the call's own chain (vmap(grad(f))'s grad): the
        call's trees already describe them.
        """
        from ._stages import chain_of
        if self._spec is not None and any(spec.transformed is s.transformed
                                          for s in chain_of(self._spec)):
            return
        self.trees.note_nested(spec.kind, spec.fun, spec.options, args, kwargs, out)

    def _stages_fixer(self) -> Any:
        """How a finished call takes stages resolved later: its shardings follow them."""
        def fix(call: Call, stages: tuple) -> Call:
            shardings = call.shardings or _sharding_hook.call_shardings(self, stages)
            return dataclasses.replace(call, stages=stages, shardings=shardings)
        return fix

    # -- levels ---------------------------------------------------------------
    def new_level(self, kind: str, jax_trace: Any, parent: LevelState | None,
                  function: str = "", options: tuple = ()) -> LevelState:
        if isinstance(jax_trace, _i.RecordingTrace):
            # NB: a level entered while a recorder is current replaces it, so
            # each step is recorded once, at the innermost level that sees it.
            jax_trace = jax_trace.parent
        trace_type = type(jax_trace).__name__
        if kind == "outer":
            kind = TRACE_KINDS.get(trace_type, trace_type)
            depth, label = 0, f"{kind}#0"
        else:
            depth = parent.depth + 1 if parent is not None else 1
            prefix = parent.label + "/" if parent is not None and parent.depth > 0 else ""
            label = f"{prefix}{kind}#{depth}"
        index = len(self.levels)
        self.levels.append(Level(index, kind, label, depth,
                                 parent.index if parent is not None else None,
                                 trace_type, function, options))
        self.level_of_trace[id(jax_trace)] = index
        state = LevelState(self, index, label, depth, jax_trace, self.recorder.inline_jnp)
        # Kept until the call finishes: a custom_vjp bwd runs after its level ends.
        self.level_states.append(state)
        return state

    def rule_spec(self, kind: str, parent: LevelState, fun: Any) -> RuleSpec:
        return RuleSpec(self, kind, parent, function_name(_i.wrapped_python_function(fun)), fun)

    # -- steps ----------------------------------------------------------------
    def jaxpr(self, name: str, jaxpr: Any):
        # JAX caches the jaxprs of jnp wrappers: print each object once. The
        # object is kept alive until the call ends so its id is not reused.
        hit = self._jaxprs.get(id(jaxpr))
        if hit is None or hit[0] is not jaxpr:
            hit = (jaxpr, jaxpr_record(name, jaxpr))
            self._jaxprs[id(jaxpr)] = hit
        rec = hit[1]
        return rec if rec.name == name else dataclasses.replace(rec, name=name)

    def jit_summary(self, params: dict) -> tuple:
        """Params and sub-jaxprs of a jit step, once per jaxpr object in this call.

        Every jnp function is a jit step, and JAX reuses their jaxprs (eight
        layers call one tanh jaxpr), so this is the hottest rule.
        """
        jaxpr = params.get("jaxpr")
        key: tuple | None = (id(jaxpr), params.get("name"), params.get("donated_invars"))
        try:
            hit = self._jit_summaries.get(key)  # type: ignore[arg-type]  # not None yet
        except TypeError:  # params of a shape we do not know: no caching
            hit, key = None, None
        if hit is not None and hit[0] is jaxpr:
            return hit[1]
        pairs, jaxprs = summarize_params("jit", params)
        if jaxprs and (self.full_detail or not is_inline_jit_params(params)):
            subjaxprs = tuple([self.jaxpr(k, j) for k, j in jaxprs])
        else:
            # At the default detail a jnp wrapper's body is named in its params
            # (`jaxpr={jaxpr: sin, cos}`), not kept.
            subjaxprs = ()
        if key is not None:
            self._jit_summaries[key] = (jaxpr, (pairs, subjaxprs))  # jaxpr kept: no id reuse
        return pairs, subjaxprs

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
            event = Step(len(self.steps), level.index, type(error).__name__, kind="error",
                         phase=level.phase, source=source, error=_message(error),
                         cause=step)
            self.steps.append(event)
        facts = self.trees.error_fields(error, self.levels, self.built_steps(), level_index,
                                        step, source, self.describer.leaked)
        self.errors.append(ErrorRecord(_qualified_name(type(error)), _message(error),
                                       level_index, step, source, **facts))

    def failed_step(self, error: BaseException) -> int | None:
        for i in range(len(self.steps) - 1, -1, -1):
            row = self.steps[i]  # rows and Steps share the field order
            if row is not None and row[_KIND] != "error" and row[_ERROR] is not None:
                return i
        return None

    def last_step_at(self, level: int) -> int | None:
        for i in range(len(self.steps) - 1, -1, -1):
            row = self.steps[i]
            if row is not None and row[_LEVEL] == level and row[_KIND] != "error":
                return i
        return None

    def source_number(self, source: SourceLocation | None) -> int:
        number = self._source_numbers.get(id(source))
        if number is None:  # SourceLocations are interned (and kept alive by _sources)
            number = self._source_numbers[id(source)] = len(self._sources)
            self._sources.append(source)
        return number

    def built_steps(self) -> list[Step | None]:
        """The steps as records (rows made into Steps), None for those still running."""
        return [None if row is None else self._build(row) for row in self.steps]

    def _build(self, row: Any) -> Step:
        return _step_of(row, self.describer.tuples, self._sources)

    def finish(self, outputs: Any = None, failed: bool = False) -> Call:
        if not failed:
            from ._trees import tree_text
            leaves, treedef = jax.tree_util.tree_flatten(outputs)
            self.out_tree = tree_text(treedef)
            self.outputs = tuple(describe_concrete(x) if not isinstance(x, _i.Tracer)
                                 else self.describer.describe(x) for x in leaves)
            self.trees.finish(outputs)
            self.shardings += _sharding_hook.outputs(self, outputs)
        rows = [s for s in self.steps if s is not None]
        if self.describer.leaked:
            self.trees.note_leaks([self._build(row) for row in rows], self.describer.leaked)
        # NB: Steps are made when first read, not here: a big call would otherwise make
        # (and the cyclic GC then walk) a record per step before anyone looks at them.
        steps: Any = Lazy(len(rows), partial(_steps_of, rows, self.describer.tuples,
                                             self._sources))
        stages = self._stages(failed)
        call = Call(self.index, self.transform, self.function, self.source, self.options,
                    tuple(self.levels), steps, tuple(self.errors), self.in_tree,
                    self.out_tree, self.inputs, self.outputs, self.parent, stages,
                    trees=self.trees.trees, pairs=tuple(self.trees.pairs),
                    diagnostics=tuple(self.trees.diagnostics),
                    shardings=_sharding_hook.call_shardings(self, stages))
        if len(self._jaxprs) > SHARED_JAXPRS or len(self._jit_summaries) > SHARED_JAXPRS:
            self._jaxprs.clear()  # they keep their jaxprs alive: a bounded number
            self._jit_summaries.clear()
        self.level_states.clear()  # drops the JAX traces they hold
        self.recorder.add(call)
        return call


    def _stages(self, failed: bool) -> tuple:
        if self.shared_stages is not None:
            return self.shared_stages
        plan, self.stage_plan = self.stage_plan, None
        if plan is None:
            return ()
        from . import _stages
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
            shared.wait(None if failed else self.stage_key, captured.later.with_inner(captured),
                        self.index, self._stages_fixer(), self.spec)
            return ()
        stages = captured.all_stages()
        if not failed:
            shared.keep(self.stage_key, stages, self.spec)
        return stages


class _ShardingHook:
    """What a CallBuilder records about devices: layouts of multi-device arrays.

    Guarded like CallTrees: a fault of ours records nothing, never fails a call.
    Single-device calls pay one `device_set` check per concrete leaf.
    """

    @staticmethod
    def inputs(call: CallBuilder, leaves: list, args: tuple, kwargs: dict) -> tuple:
        try:
            if not any(map(_sharding.is_multi_device, leaves)):
                return ()
            names = [t.name for t in call.trees.inputs if t.argnum is not None]
            return tuple(_sharding.call_input_shardings(args, kwargs, names))
        except Exception:
            return ()

    @staticmethod
    def outputs(call: CallBuilder, outputs: Any) -> tuple:
        try:
            if not _sharding.any_multi_device(outputs):
                return ()
            found = _sharding.call_output_shardings(outputs, _gradient_prefix(call))
            return _gradients_named(call, found)
        except Exception:
            return ()

    @staticmethod
    def call_shardings(call: CallBuilder, stages: tuple) -> tuple:
        """Concrete arrays' layouts; for a jit (traced arguments) its executable's."""
        if call.shardings:
            return call.shardings
        try:
            compiled = [s for s in stages if s.role == "hlo" and s.shardings]
            if not compiled:
                return ()
            names = {t.argnum: t.name for t in call.trees.inputs if t.argnum is not None}
            found = _sharding.named_for_call(compiled[-1].shardings, names,
                                             _gradient_prefix(call))
            return _gradients_named(call, found)
        except Exception:
            return ()


_sharding_hook = _ShardingHook()


def _derivative(call: CallBuilder) -> tuple[str, tuple]:
    """The transform whose outputs hold gradients: the call's, or for a jit of grad, grad's."""
    from ._api import spec_of
    transform, options = call.transform, call.options
    inner = spec_of(call.spec.fun) if call.spec is not None and transform == "jit" else None
    if inner is not None:
        transform, options = inner.kind, inner.options
    return transform, options


def _gradient_prefix(call: CallBuilder) -> str | None:
    """Where the gradients sit in the call's outputs."""
    from ._trees import _option
    transform, options = _derivative(call)
    return _sharding.gradient_prefix(transform, bool(_option(options, "has_aux", False)))


def _gradients_named(call: CallBuilder, records: Any) -> tuple:
    from ._trees import _option
    _, options = _derivative(call)
    names = {t.argnum: t.name for t in call.trees.inputs if t.argnum is not None}
    return _sharding.gradient_names(records, _gradient_prefix(call),
                                    _option(options, "argnums", 0), names)


# NB: tuple.__new__ makes a NamedTuple without its Python-level __new__.
_new_step = tuple.__new__


def _step_of(row: Any, values: list, sources: list) -> Step:
    """A Step from a step row (see LevelState._step); error events are Steps already."""
    if type(row) is Step:
        return row
    return _new_step(Step, (*row[:_INPUTS], values[row[_INPUTS]], values[row[_OUTPUTS]],
                            sources[row[_SOURCE]], *row[_SOURCE + 1:]))


def _steps_of(rows: list, values: list, sources: list) -> tuple[Step, ...]:
    return tuple([_step_of(row, values, sources) for row in rows])
# Positions in a Step (and in a step row, which has the same fields in the same order).
_LEVEL, _KIND, _INPUTS, _OUTPUTS, _SOURCE, _ERROR = 1, 3, 6, 7, 8, 11


class LevelState:
    """The live side of one Level: what its RecordingTrace reports to."""
    __slots__ = ("call", "index", "label", "depth", "jax_trace", "inline_jnp", "phase",
                 "backward_source", "tape", "__weakref__")

    def __init__(self, call: CallBuilder, index: int, label: str, depth: int,
                 jax_trace: Any, inline_jnp: bool):
        self.call = call
        self.index = index
        self.label = label
        self.depth = depth
        self.jax_trace = jax_trace
        self.inline_jnp = inline_jnp
        self.phase = "forward"
        self.backward_source: SourceLocation | None = None
        self.tape: Any = None  # _tape.Tape: what the user's function binds here, for stages

    def set_phase(self, phase: str) -> None:
        self.phase = phase
        self.backward_source = None

    def begin_step(self, primitive: Any, tracers: Any, params: dict, kind: str,
                   rules: tuple = ()) -> tuple:
        call = self.call
        index = len(call.steps)
        call.steps.append(None)  # reserved: steps this one causes come after it
        inputs = call.describer.describe_all(tracers)
        phase = self.phase
        if call.active_steps:
            # A step bound while processing another comes from the same user
            # line, unless user code (a custom rule body) runs in between.
            cause, cause_phase, source = call.active_steps[-1]
            if cause_phase == "backward":  # what a backward step emits is backward too
                phase = cause_phase
            if source is None:
                source = user_location(3)
        elif phase == "backward":
            # The backward pass runs deep inside JAX, called from one user line:
            # find it once per pass (a stack walk there costs tens of us).
            cause, source = None, self.backward_source
            if source is None:
                source = self.backward_source = user_location(3)
        else:
            cause, source = None, user_location(3)
        call.active_steps.append((index, phase, source))
        if self.tape is not None:
            self.tape.begin(index, primitive, tracers, params, kind, rules, _source_text(source))
        return (index, primitive, inputs, params, kind, cause, phase, call.source_number(source),
                _i.name_stack())

    def end_step(self, pending: tuple, out: Any, multiple: bool) -> None:
        call = self.call
        call.active_steps.pop()
        describer = call.describer
        outputs = describer.describe_all(out) if multiple else describer.describe_all((out,))
        call.steps[pending[0]] = self._step(pending, outputs, None)
        if self.tape is not None:
            self.tape.end(pending[0], out, multiple)

    def fail_step(self, pending: tuple, error: BaseException) -> None:
        call = self.call
        if call.active_steps and call.active_steps[-1][0] == pending[0]:
            call.active_steps.pop()
        call.steps[pending[0]] = self._step(pending, call.describer.describe_all(()),
                                            _message(error))
        if self.tape is not None:
            self.tape.fail(pending[0])

    def _step(self, pending: tuple, outputs: int, error: str | None) -> tuple:
        """A step row: a Step's fields with its inputs, outputs and source as numbers (into
        the describer's tuples and the call's sources). NB: a tuple of numbers and strings
        is untracked by the cyclic GC after its first pass: a big call costs its passes
        nothing (Steps are made when the call finishes)."""
        index, primitive, inputs, params, kind, cause, phase, source, names = pending
        name = primitive.name
        inline = False
        if name == "jit" or name == "pjit":
            pairs, subjaxprs = self.call.jit_summary(params)
            inline = is_inline_jit_params(params)
        else:
            pairs, jaxprs = summarize_params(name, params)
            subjaxprs = tuple([self.call.jaxpr(key, j) for key, j in jaxprs]) if jaxprs else ()
        return (index, self.index, name, kind, phase, pairs, inputs, outputs, source, names,
                subjaxprs, error, cause, inline)

    def rule_spec(self, kind: str, fun: Any) -> RuleSpec:
        return self.call.rule_spec(kind, self, fun)


class RuleSpec:
    """Runs a custom_jvp/custom_vjp rule body in a recorded sub-level.

    Hashed by identity: linear_util uses transformation params in cache keys.
    JAX's caches may keep it after the call, so it holds the call weakly:
    a finished call's traces must not stay alive through it.
    """

    def __init__(self, call: CallBuilder, kind: str, parent: LevelState, function: str,
                 fun: Any = None):
        self._call = weakref.ref(call)
        self._parent = weakref.ref(parent)
        self.kind = kind
        self.function = function
        self.fun = fun  # the rule as JAX holds it (a WrappedFun): stages replay its tape

    def run(self, f: Any, args: tuple, kwargs: dict) -> Any:
        call, parent = self._call(), self._parent()
        if call is None or parent is None or _state.call is not call:
            return f(*args, **kwargs)  # the rule ran after its call finished (e.g. a later bwd)
        jax_trace = _i.current_trace()
        level = call.new_level(self.kind, jax_trace, parent, self.function)
        level.set_phase("rule")
        call.watch_rule_level(level)
        tape = call.watch_rule(level, self.kind, self.fun, args)
        if tape is None:
            return run_level(level, f, args, kwargs)
        try:
            out = run_level(level, f, args, kwargs)
        except BaseException as e:
            tape.abandon(e)
            raise
        tape.finish(out)
        return out


def run_level(level: LevelState, f: Any, args: tuple, kwargs: dict) -> Any:
    """Run `f` with a recorder for `level` as the current trace."""
    active = level.call.active_steps
    # User code runs here (a custom rule inside a step, say): its steps keep
    # the step that called it as their cause but find their own source line.
    barrier = (active[-1][0], active[-1][1], None) if active else None
    if barrier is not None:
        active.append(barrier)
    _state.levels.append(level)
    try:
        with _i.set_current_trace(_i.RecordingTrace(level.jax_trace, level)):
            return f(*args, **kwargs)
    except BaseException as e:
        level.call.record_error(e, level)
        raise
    finally:
        _state.levels.pop()
        if barrier is not None:
            active.pop()


def _source_text(source: SourceLocation | None) -> str:
    return f"{source.file}:{source.line}" if source is not None else ""


def _message(error: BaseException) -> str:
    try:
        return str(error)
    except Exception as e:
        return f"<message unavailable: {type(e).__name__}>"


def _qualified_name(cls: type) -> str:
    public = _i.public_error_name(cls)
    if public is not None:
        return public
    module = cls.__module__
    if module == "builtins":
        return cls.__name__
    return f"{module}.{cls.__qualname__}"
