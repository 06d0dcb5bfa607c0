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
from .._common import bracket
from ..model import kind_of
from ._call import CallBuilder, begin_call, state
from ._call_steps import level_kind
from ._find_nans import stop_if_nonfinite
from ._levels import LevelRun

__all__ = ["build", "invoke", "level_entry", "open_call_level", "open_invoke", "open_level"]

# The options of a level JAX's own jax.<transform> made inside a recorded call.
_JAX_ORIGIN = Options({"origin": "jax"})


def level_entry(fun: Callable, kind: str, options: Options) -> Callable:
    """The function JAX traces while recording: records one level, then runs `fun` under a
    recorder. A Bracket: no frame of ours between JAX's and `fun`'s."""

    def open_level(args: tuple, kwargs: dict | None) -> tuple | None:
        call = state.call
        if call is None:
            return None
        return _OpenLevel(call, fun, kind, options, args, kwargs or {}).bracket_run(fun)

    entry = bracket(open_level, fun)
    functools.update_wrapper(entry, fun)
    return entry


def open_level(call: CallBuilder, fun: Callable, kind: str, options: Options,
               args: tuple, kwargs: dict) -> tuple:
    """A new level of `call` for `fun` opened, as a Bracket's run (see level_entry)."""
    return _OpenLevel(call, fun, kind, options, args, kwargs).bracket_run(fun)


def open_call_level(call: CallBuilder, fun: Callable, kind: str, options: Options,
                    args: tuple, kwargs: dict) -> tuple:
    """The one level of a call that is nothing more (a jit traced outside any recorded call),
    opened as a Bracket's run: the call is the current one until the level ends, then
    finished with it."""
    state.call = call
    try:
        opened = _OpenLevel(call, fun, kind, options, args, kwargs)
    except BaseException:
        state.call = None
        call.finish(failed=True)
        raise

    def returned(out: Any) -> Any:
        try:
            out = opened.returned(out)
        except BaseException:
            call.finish(failed=True)
            raise
        finally:
            state.call = None
        call.finish(out)
        return out

    def raised(error: BaseException) -> None:
        try:
            opened.raised(error)
        finally:
            try:
                call.finish(failed=True)
            finally:
                state.call = None
    return fun, args, kwargs, returned, raised


class _OpenLevel:
    """A level of `call` opened for `fun`, until `returned` or `raised` ends it."""
    __slots__ = ("call", "kind", "level", "parent", "tape", "run", "entry", "args", "kwargs")

    def __init__(self, call: CallBuilder, fun: Callable, kind: str, options: Options,
                 args: tuple, kwargs: dict):
        self.call, self.kind, self.args, self.kwargs = call, kind, args, kwargs
        self.parent = parent = state.levels[-1] if state.levels else None
        self.level = call.new_level(kind, _i.current_trace(), parent, function_name(fun), options)
        self.tape = call.stages.watch_level(self.level, fun, args, kwargs)  # stages: what fun binds
        self.entry = kind_of(kind)
        try:
            self.run = LevelRun(self.level)
        except BaseException as e:
            self._after(e)
            raise

    def bracket_run(self, fun: Callable) -> tuple:
        return fun, self.args, self.kwargs, self.returned, self.raised

    def returned(self, out: Any) -> Any:
        try:
            self.run.returned(out)
            call = self.call
            if self.entry.jacobian and call.trees.transform == self.kind and \
                    self.level.depth == call.trees.depth:
                call.trees.note_function_output(out)  # the Jacobian's outer structure
            if self.tape is not None:
                self.tape.finish(out)
        except BaseException as e:
            self._after(e)
            raise
        self._after(None)
        return out

    def raised(self, error: BaseException) -> None:
        try:
            self.run.raised(error)
        finally:
            self._after(error)

    def _after(self, error: BaseException | None) -> None:
        try:
            if error is not None and self.tape is not None:
                self.tape.abandon(error)
        finally:
            if self.parent is not None and self.entry.backward_at_enclosing:
                self.parent.set_phase("backward")


def invoke(kind: str, fun: Any, options: Options, transformed: Callable,
           args: tuple, kwargs: dict, forward: int | None = None, late: Any = None,
           forward_values: Any = None) -> Any:
    """Call a JAX-transformed function, opening a recorded Call when none is open (what
    `open_invoke`'s Bracket does, as a Python call)."""
    run = open_invoke(kind, fun, options, transformed, args, kwargs, forward, late,
                      forward_values=forward_values)
    if run is None:
        return transformed(*args, **kwargs)
    target, args, kwargs, returned, raised = run
    try:
        out = target(*args, **kwargs)
    except BaseException as e:
        raised(e)
        raise
    return returned(out)


def open_invoke(kind: str, fun: Any, options: Options, transformed: Callable,
                args: tuple, kwargs: dict | None, forward: int | None = None, late: Any = None,
                wrap: Callable[[Any, int], Any] | None = None,
                forward_values: Any = None) -> tuple | None:
    """A recorded call of `transformed` opened, as a Bracket's run: None when no record()
    block is open, else `(transformed, args, kwargs, returned, raised)`. A Call is opened
    when none is open; inside one, the call is nested in it. JAX's traceback filtering is
    done as JAX would (FilteredRun).

    `forward` is the index of the call a backward call belongs to (a vjp's); `late`, that
    call's stages waiting for the rules this one runs (_stages.PendingStages); `wrap(out,
    index)`, what the caller gets of the result (vjp's pullback wrapped, say), given the
    index of the call that returned it (the call's own: threads record calls at once);
    `forward_values`, what the forward call kept for evaluating this one's stages
    (record(values=True)).
    """
    session = state.session
    if session is None:
        return None
    kwargs = kwargs or {}
    filtered = _i.FilteredRun()
    try:
        call = state.call
        if call is not None:
            opened: _OpenNested | _OpenTop = _OpenNested(call, kind, fun, options, transformed,
                                                          args, kwargs)
        else:
            opened = _OpenTop(session, kind, fun, options, transformed, args, kwargs, forward,
                              late, forward_values)
    except BaseException as e:
        filtered.raised(e)
        raise
    opened.filtered, opened.wrap = filtered, wrap
    return transformed, args, kwargs, opened.returned, opened.raised


class _OpenCall:
    """A call of a JAX-transformed function while it runs, until `returned` or `raised`."""
    __slots__ = ("call", "run", "filtered", "wrap")

    def __init__(self, call: CallBuilder):
        self.call = call
        self.run: LevelRun | None = None
        self.filtered: Any = None
        self.wrap: Callable[[Any, int], Any] | None = None

    def returned(self, out: Any) -> Any:
        try:
            out = self._returned(out)
            if self.wrap is not None:
                out = self.wrap(out, self.call.index)
        except BaseException as e:
            self.filtered.raised(e)
            raise
        return self.filtered.returned(out)

    def raised(self, error: BaseException) -> None:
        try:
            self._raised(error)
        finally:
            self.filtered.raised(error)

    def _returned(self, out: Any) -> Any:
        raise NotImplementedError

    def _raised(self, error: BaseException) -> None:
        raise NotImplementedError


class _OpenTop(_OpenCall):
    """The outermost call: a new Call of the session, its outer level JAX's current trace."""
    __slots__ = ("session", "tape")

    def __init__(self, session: Any, kind: str, fun: Any, options: Options,
                 transformed: Callable, args: tuple, kwargs: dict, forward: int | None,
                 late: Any, forward_values: Any = None):
        call = begin_call(session, kind, fun, options, args, kwargs, parent=forward)
        call.forward = forward_values
        super().__init__(call)
        self.session = session
        call.stages.plan(TransformSpec(kind, fun, transformed, options), late)
        forward_call = session.call_by_index(forward) if forward is not None else None
        if forward_call is not None:  # None: dropped by record(max_steps=...)
            call.trees.forward = forward_call.trees
        state.call = call
        try:
            outer = call.new_level("outer", _i.current_trace(), None)
            if kind_of(kind).backward_call:
                outer.set_phase("backward")
            self.tape = call.stages.watch_outer(outer, args, kwargs)  # what the call executed
            self.run = LevelRun(outer)
        except BaseException:
            state.call = None
            call.finish(failed=True)
            raise

    def _returned(self, out: Any) -> Any:
        call = self.call
        try:
            assert self.run is not None
            self.run.returned(out)
            if self.tape is not None:
                self.tape.finish(out)
        except BaseException:
            call.finish(failed=True)
            raise
        finally:
            state.call = None
        stop_if_nonfinite(self.session, call.finish(out))  # record(stop_at_nan=True)
        return out

    def _raised(self, error: BaseException) -> None:
        try:
            assert self.run is not None
            self.run.raised(error)
        finally:
            try:
                self.call.finish(failed=True)
            finally:
                state.call = None


class _OpenNested(_OpenCall):
    """A transformation called inside a recorded call: its own stages and gradient trees, and,
    where a jax.* transformation sits between it and the enclosing recorder, a level."""
    __slots__ = ("spec", "args", "kwargs", "parent")

    def __init__(self, call: CallBuilder, kind: str, fun: Any, options: Options,
                 transformed: Callable, args: tuple, kwargs: dict):
        super().__init__(call)
        self.spec = TransformSpec(kind, fun, transformed, options)
        self.args, self.kwargs = args, kwargs
        call.stages.nested_call(self.spec, args, kwargs)  # its own stages
        self.parent = state.levels[-1] if state.levels else None
        current = _i.current_trace()
        if not isinstance(current, _i.RecordingTrace):
            # A jax.* transformation sits between us and the enclosing recorder:
            # record its level too, so what it emits is seen.
            purpose, traced = _i.traced_for(current)  # ("while_body", "body")
            level = call.new_level(level_kind(current), current, self.parent, traced,
                                   options=_JAX_ORIGIN, segment=purpose.replace(" ", "_"))
            self.run = LevelRun(level)

    def _returned(self, out: Any) -> Any:
        try:
            if self.run is not None:
                self.run.returned(out)
        finally:
            self._forward()
        self.call.nested_returned(self.spec, self.args, self.kwargs, out)  # gradient trees
        return out

    def _raised(self, error: BaseException) -> None:
        try:
            if self.run is not None:
                self.run.raised(error)
        finally:
            self._forward()

    def _forward(self) -> None:
        if self.parent is not None:
            self.parent.set_phase("forward")


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
