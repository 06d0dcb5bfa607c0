"""The live side of each recorded level: what its RecordingTrace reports to.

A LevelState turns each primitive JAX binds at its level into a step row (numbers in the
call's `_step_rows.StepRows`); RuleSpec runs a custom_jvp /
custom_vjp rule body as a sub-level; run_level runs a function with a level's
recorder as JAX's current trace.
"""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from . import _interpreters as _i
from ._interpreters import is_inline_jit_params, name_stack
from ._rules import summarize_params
from ._snapshot import user_location
from ._state import _state
from ._text import message
from .model import SourceLocation

if TYPE_CHECKING:
    from ._recorder import CallBuilder

__all__ = ["LevelState", "RuleSpec", "run_level"]


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
                   rules: tuple = ()) -> int:
        """A step starts: its row (in the call's StepRows); returns its index."""
        call = self.call
        inputs = call.describer.describe_all(tracers)
        active = call.active_steps
        if active:
            # A step bound while processing another comes from the same user
            # line, unless user code (a custom rule body) runs in between.
            cause, phase, source, number = active[-1]
            if phase != "backward":  # what a backward step emits is backward too
                phase = self.phase
            if source is None:
                source = user_location(3)
                number = call.source_number(source)
        else:
            cause, phase = None, self.phase
            if phase == "backward":
                # The backward pass runs deep inside JAX, called from one user line:
                # find it once per pass (a stack walk there costs tens of us).
                source = self.backward_source
                if source is None:
                    source = self.backward_source = user_location(3)
            else:
                source = user_location(3)
            number = call.source_number(source)
        index = call.rows.begin(self.index, primitive.name, kind, phase, inputs, cause, number,
                                name_stack())
        active.append((index, phase, source, number))
        if self.tape is not None:
            self.tape.begin(index, primitive, tracers, params, kind, rules, _source_text(source))
        return index

    def end_step(self, index: int, primitive: Any, params: dict, out: Any, multiple: bool) -> None:
        call = self.call
        call.active_steps.pop()
        describer = call.describer
        outputs = describer.describe_all(out) if multiple else describer.describe_one(out)
        self._finish(index, primitive, params, outputs, None)
        if self.tape is not None:
            self.tape.end(index, out, multiple)

    def fail_step(self, index: int, primitive: Any, params: dict, error: BaseException) -> None:
        call = self.call
        if call.active_steps and call.active_steps[-1][0] == index:
            call.active_steps.pop()
        self._finish(index, primitive, params, call.describer.describe_all(()),
                     message(error))
        if self.tape is not None:
            self.tape.fail(index)

    def _finish(self, index: int, primitive: Any, params: dict, outputs: int,
                error: str | None) -> None:
        """The rest of a step's row: outputs, params (as text pairs) and sub-jaxprs."""
        name = primitive.name
        call = self.call
        if name == "jit" or name == "pjit":
            pairs, subjaxprs = call.jit_summary(params)
            inline = is_inline_jit_params(params)
        else:
            pairs, jaxprs = summarize_params(name, params)
            subjaxprs = tuple([call.jaxpr(key, j) for key, j in jaxprs]) if jaxprs else ()
            inline = False
        call.rows.end(index, outputs, pairs, subjaxprs, inline, error)

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
        current = _state.call
        if call is None or parent is None or current is not call:
            # The rule runs after its call finished (a bwd in vjp's pullback): a level of
            # the call running it when that call's stages wait for it, else unrecorded.
            later, tape = (current.late_rule(self.kind, self.fun, self.function, args)
                           if current is not None else (None, None))
            if later is None:
                return f(*args, **kwargs)
            level = later
        else:
            level = call.new_level(self.kind, _i.current_trace(), parent, self.function)
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
    barrier = (active[-1][0], active[-1][1], None, -1) if active else None
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

