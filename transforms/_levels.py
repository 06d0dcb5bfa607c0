"""The live side of each recorded level: what its RecordingTrace reports to.

A LevelState turns each primitive JAX binds at its level into a step row (a Step's
fields, values as numbers into the call's tables); RuleSpec runs a custom_jvp /
custom_vjp rule body as a sub-level; run_level runs a function with a level's
recorder as JAX's current trace.
"""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from . import _interpreters as _i
from ._interpreters import is_inline_jit_params
from ._rules import summarize_params
from ._snapshot import user_location
from ._state import _state
from ._text import message
from .model import SourceLocation, Step

if TYPE_CHECKING:
    from ._recorder import CallBuilder

__all__ = ["ROW_ERROR", "ROW_KIND", "ROW_LEVEL", "LevelState", "RuleSpec", "run_level",
           "step_of", "steps_of"]


# NB: tuple.__new__ makes a NamedTuple without its Python-level __new__.
_new_step = tuple.__new__


def step_of(row: Any, values: list, sources: list) -> Step:
    """A Step from a step row (see LevelState._step); error events are Steps already."""
    if type(row) is Step:
        return row
    return _new_step(Step, (*row[:ROW_INPUTS], values[row[ROW_INPUTS]], values[row[ROW_OUTPUTS]],
                            sources[row[ROW_SOURCE]], *row[ROW_SOURCE + 1:]))


def steps_of(rows: list, values: list, sources: list) -> tuple[Step, ...]:
    return tuple([step_of(row, values, sources) for row in rows])


# Positions in a Step (and in a step row, which has the same fields in the same order).
ROW_LEVEL, ROW_KIND, ROW_INPUTS, ROW_OUTPUTS, ROW_SOURCE, ROW_ERROR = 1, 3, 6, 7, 8, 11


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
                                            message(error))
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

