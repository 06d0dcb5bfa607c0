"""The live side of each recorded level: what its RecordingTrace reports to.

A LevelState is a level's handle on its call's step core (`_step_core`), which turns each
primitive JAX binds at the level into a step row; RuleSpec runs a custom_jvp /
custom_vjp rule body as a sub-level; run_level runs a function with a level's
recorder as JAX's current trace. What a level asks of its call is LevelCall (the call
itself, _call.py's CallBuilder, sits above this module).
"""
from __future__ import annotations

import weakref
from typing import Any, Protocol, cast

from .. import _jax as _i
from .._capture import RecordingState, function_name, state as _state
from .._common import bracket, message, raised_as_is, returned_as_is

__all__ = ["LevelCall", "LevelRun", "LevelState", "RuleSpec", "run_level"]


class LevelCall(Protocol):
    """What a level asks of the call it belongs to: a custom rule's level, and the record of
    an error raised at it."""

    def rule_level(self, kind: str, parent: LevelState, function: str, fun: Any,
                   args: tuple) -> tuple[LevelState, Any]: ...

    def late_rule(self, kind: str, fun: Any, function: str,
                  args: tuple) -> tuple[LevelState | None, Any]: ...

    def record_error(self, error: BaseException, level: LevelState | None,
                     rule: Any = None) -> None: ...


# NB: the recording state (_capture's) holds this layer's objects; read here as what they are.
state = cast("RecordingState[Any, LevelCall, LevelState]", _state)


class LevelState:
    """The live side of one Level: what its RecordingTrace reports to.

    Its steps go to the call's step core (`core`), which also keeps the level's phase;
    RecordingTrace calls the core directly unless the level has a tape (stages), and
    the other kinds of step come through begin_step / end_step / fail_step.
    """
    __slots__ = ("call", "core", "index", "label", "depth", "jax_trace", "inline_jnp", "tape",
                 "__weakref__")

    def __init__(self, call: LevelCall, core: Any, index: int, label: str, depth: int,
                 jax_trace: Any, inline_jnp: bool):
        self.call = call
        self.core = core
        self.index = index
        self.label = label
        self.depth = depth
        self.jax_trace = jax_trace
        self.inline_jnp = inline_jnp
        self.tape: Any = None  # _tape.Tape: what the user's function binds here, for stages

    @property
    def phase(self) -> str:
        return self.core.phase(self.index)

    def set_phase(self, phase: str) -> None:
        self.core.set_phase(self.index, phase)

    def begin_step(self, primitive: Any, tracers: Any, params: dict, kind: str,
                   rules: tuple = ()) -> int:
        """A step starts: its row (in the call's step core); returns its index."""
        index = self.core.begin(self.index, primitive, tracers, kind)
        if self.tape is not None:
            source = self.core.source_at(index)
            self.tape.begin(index, primitive, tracers, params, kind, rules, _source_text(source))
        return index

    def end_step(self, index: int, primitive: Any, params: dict, out: Any, multiple: bool) -> None:
        self.core.end(index, primitive, params, out, multiple)
        if self.tape is not None:
            self.tape.end(index, out, multiple)

    def fail_step(self, index: int, primitive: Any, params: dict, error: BaseException) -> None:
        self.core.fail(index, primitive, params, message(error))
        if self.tape is not None:
            self.tape.fail(index)

    def rule_spec(self, kind: str, fun: Any, primal: Any = None) -> RuleSpec:
        """The spec of a custom rule `fun` of this level (`primal`: the custom function's
        body, for a jvp rule)."""
        return RuleSpec(self.call, kind, self, rule_name(fun, primal), fun)


def rule_name(fun: Any, primal: Any = None) -> str:
    """A custom rule's level's name: its function's, but the rule `defjvps` writes around
    the tangent functions (a closure of JAX's) is named for the function it differentiates:
    `relu's defjvps`."""
    if primal is not None and _i.is_defjvps_rule(fun):
        return f"{function_name(_i.wrapped_python_function(primal))}'s defjvps"
    return function_name(_i.wrapped_python_function(fun))


class RuleSpec:
    """Runs a custom_jvp/custom_vjp rule body in a recorded sub-level.

    Hashed by identity: linear_util uses transformation params in cache keys.
    JAX's caches may keep it after the call, so it holds the call weakly:
    a finished call's traces must not stay alive through it.
    """

    def __init__(self, call: LevelCall, kind: str, parent: LevelState, function: str,
                 fun: Any = None):
        self._call = weakref.ref(call)
        self._parent = weakref.ref(parent)
        self.kind = kind
        self.function = function
        self.fun = fun  # the rule as JAX holds it (a WrappedFun): stages replay its tape

    @property
    def body(self) -> Any:
        """What JAX runs for the rule's body, `body(f, *args)`: f under a recorder for the
        rule's level (a Bracket: no frame of ours between JAX's and the rule's)."""
        return bracket(self._open_body)

    def _open_body(self, args: tuple, kwargs: dict | None) -> tuple:
        return self.open(args[0], args[1:], kwargs or {})

    def open(self, f: Any, args: tuple, kwargs: dict) -> tuple:
        """The rule's level opened for `f`, as a Bracket's run."""
        call, parent = self._call(), self._parent()
        current = state.call
        if call is None or parent is None or current is not call:
            # The rule runs after its call finished (a bwd in vjp's pullback): a level of
            # the call running it when that call's stages wait for it, else unrecorded.
            later, tape = (current.late_rule(self.kind, self.fun, self.function, args)
                           if current is not None else (None, None))
            if later is None:
                return f, args, kwargs, returned_as_is, raised_as_is
            level = later
        else:
            level, tape = call.rule_level(self.kind, parent, self.function, self.fun, args)
        return f, args, kwargs, *_RuleRun(level, _i.wrapped_python_function(self.fun), tape).ends()


class _RuleRun:
    """A rule's level while its body runs, and the tape of what it binds (stages)."""
    __slots__ = ("run", "tape")

    def __init__(self, level: LevelState, rule: Any, tape: Any):
        self.run, self.tape = LevelRun(level, rule), tape

    def ends(self) -> tuple:
        return self.returned, self.raised

    def returned(self, out: Any) -> Any:
        self.run.returned(out)
        if self.tape is not None:
            self.tape.finish(out)
        return out

    def raised(self, error: BaseException) -> None:
        try:
            self.run.raised(error)
        finally:
            if self.tape is not None:
                self.tape.abandon(error)


class LevelRun:
    """A level's recorder as JAX's current trace while its function runs: opened here, ended
    by `returned` or `raised` (so a Bracket can run the function with no frame of ours)."""
    __slots__ = ("level", "rule", "barrier", "trace_context")

    def __init__(self, level: LevelState, rule: Any = None):
        # User code runs here (a custom rule inside a step, say): its steps keep
        # the step that called it as their cause but find their own source line.
        self.level, self.rule = level, rule
        self.barrier = level.core.push_barrier()
        state.levels.append(level)
        self.trace_context = _i.set_current_trace(_i.RecordingTrace(level.jax_trace, level))
        try:
            self.trace_context.__enter__()
        except BaseException:
            self._close()
            raise

    def returned(self, out: Any) -> Any:
        try:
            self.trace_context.__exit__(None, None, None)
        finally:
            self._close()
        return out

    def raised(self, error: BaseException) -> None:
        try:
            self.trace_context.__exit__(None, None, None)
            self.level.call.record_error(error, self.level, self.rule)
        finally:
            self._close()

    def _close(self) -> None:
        state.levels.pop()
        if self.barrier:
            self.level.core.pop_barrier()


def run_level(level: LevelState, f: Any, args: tuple, kwargs: dict, rule: Any = None) -> Any:
    """Run `f` with a recorder for `level` as the current trace (`rule`: the user's custom
    rule `f` runs, whose return an error may be about)."""
    run = LevelRun(level, rule)
    try:
        out = f(*args, **kwargs)
    except BaseException as e:
        run.raised(e)
        raise
    return run.returned(out)


def _source_text(source: Any) -> str:
    return f"{source.file}:{source.line}" if source is not None else ""

