"""Opening what is recorded: a Call when a transformation is called, a Level when JAX
calls the function it was handed.

Every wrapper (`_api.py`, `_jit.py`, `_returned.py`) goes through here. Arguments and
results pass through untouched, so results, pytree structures and exceptions are JAX's.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from .. import _jax as _i
from .._capture import Options, TransformSpec, function_name
from ..model import kind_of
from ._call import CallBuilder, begin_call, state
from ._call_steps import level_kind
from ._find_nans import stop_if_nonfinite
from ._levels import run_level

__all__ = ["build", "invoke", "level_entry", "run_recorded_level"]

# The options of a level JAX's own jax.<transform> made inside a recorded call.
_JAX_ORIGIN = Options({"origin": "jax"})


def level_entry(fun: Callable, kind: str, options: Options) -> Callable:
    """The function JAX traces while recording: records one level, then runs `fun` under a recorder."""

    @functools.wraps(fun)
    def traced(*args, **kwargs):
        call = state.call
        if call is None:
            return fun(*args, **kwargs)
        return run_recorded_level(call, fun, kind, options, args, kwargs)

    return traced


def run_recorded_level(call: CallBuilder, fun: Callable, kind: str, options: Options,
                       args: tuple, kwargs: dict) -> Any:
    parent = state.levels[-1] if state.levels else None
    level = call.new_level(kind, _i.current_trace(), parent, function_name(fun), options)
    tape = call.stages.watch_level(level, fun, args, kwargs)  # stages: what fun binds here
    entry = kind_of(kind)
    try:
        out = run_level(level, fun, args, kwargs)
        if entry.jacobian and call.trees.transform == kind and level.depth == call.trees.depth:
            call.trees.note_function_output(out)  # the Jacobian's outer structure
        if tape is not None:
            tape.finish(out)
        return out
    except BaseException as e:
        if tape is not None:
            tape.abandon(e)
        raise
    finally:
        if parent is not None and entry.backward_at_enclosing:
            parent.set_phase("backward")


def invoke(kind: str, fun: Any, options: Options, transformed: Callable,
           args: tuple, kwargs: dict, forward: int | None = None, late: Any = None) -> Any:
    """Call a JAX-transformed function, opening a recorded Call when none is open.

    `forward` is the index of the call a backward call belongs to (a vjp's); `late`, that
    call's stages waiting for the rules this one runs (_stages.PendingStages).
    """
    session = state.session
    if session is None:
        return transformed(*args, **kwargs)
    call = state.call
    if call is not None:
        spec = TransformSpec(kind, fun, transformed, options)
        call.stages.nested_call(spec, args, kwargs)  # its own stages
        out = _invoke_nested(call, transformed, args, kwargs)
        call.nested_returned(spec, args, kwargs, out)  # its gradient trees
        return out
    call = begin_call(session, kind, fun, options, args, kwargs, parent=forward)
    call.stages.plan(TransformSpec(kind, fun, transformed, options), late)
    forward_call = session.call_by_index(forward) if forward is not None else None
    if forward_call is not None:  # None: dropped by record(max_steps=...)
        call.trees.forward = forward_call.trees
    state.call = call
    try:
        outer = call.new_level("outer", _i.current_trace(), None)
        if kind_of(kind).backward_call:
            outer.set_phase("backward")
        tape = call.stages.watch_outer(outer, args, kwargs)  # stages: what the call executed
        out = run_level(outer, transformed, args, kwargs)
        if tape is not None:
            tape.finish(out)
    except BaseException:
        call.finish(failed=True)
        raise
    finally:
        state.call = None
    stop_if_nonfinite(session, call.finish(out))  # record(stop_at_nan=True)
    return out


def _invoke_nested(call: CallBuilder, transformed: Callable, args: tuple, kwargs: dict) -> Any:
    parent = state.levels[-1] if state.levels else None
    current = _i.current_trace()
    try:
        if isinstance(current, _i.RecordingTrace):
            return transformed(*args, **kwargs)
        # A jax.* transformation sits between us and the enclosing recorder:
        # record its level too, so what it emits is seen.
        level = call.new_level(level_kind(current), current, parent, options=_JAX_ORIGIN)
        return run_level(level, transformed, args, kwargs)
    finally:
        if parent is not None:
            parent.set_phase("forward")


def record_failed_call(kind: str, fun: Any, options: Options, args: tuple, kwargs: dict,
                       error: BaseException) -> None:
    """A call that failed before JAX ran anything of it: recorded with its error."""
    session = state.session
    assert session is not None
    call = begin_call(session, kind, fun, options, args, kwargs)
    call.record_error(error, None)
    call.finish(failed=True)


def build(kind: str, jax_transform: Callable, fun: Any, options: Options,
          *args: Any, **kwargs: Any) -> Callable:
    """`jax_transform(fun, ...)`, recording a creation error (JAX's, raised as JAX raised it)."""
    try:
        return jax_transform(fun, *args, **kwargs)
    except BaseException as e:
        if state.session is not None and state.call is None:
            record_failed_call(kind, fun, options, (), {}, e)
        raise
