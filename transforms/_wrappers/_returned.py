"""The functions vjp and linearize return, recording their own calls.

They stay JAX's own objects, with JAX's pytree structure: a VJP whose `fun`
is a partial, and a tree_util.Partial around a _HashableCallableShim of a
partial. Only that inner functools.partial is swapped for a _RecordingPartial
with the same function and arguments; what its calls are recorded as (the
origin) is kept beside it in _ORIGINS, so nothing of ours (no weakref, no
user function) is in their aux data, their reprs or the jaxprs JAX prints.
Their calls are recorded as the kinds `vjp_backward` and `linearize_jvp`,
whose parent is the forward call.
"""
from __future__ import annotations

import functools
import types
import weakref
from typing import Any, Callable, NamedTuple

from .. import _jax as _i
from .._capture import Options, function_name
from .._recording import invoke, open_invoke, state

__all__ = ["open_keeping_origin", "recording_pullback", "recording_pushforward"]

_ORIGINS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _FunctionRef:
    """The user's function, held weakly where it can be: nothing of theirs kept alive by us."""
    __slots__ = ("_ref", "_name")

    def __init__(self, fun: Any):
        self._name = function_name(fun)
        try:
            self._ref: Callable[[], Any] = weakref.ref(fun)
        except TypeError:
            self._ref = lambda: None

    def get(self) -> Any:
        fun = self._ref()
        return fun if fun is not None else types.SimpleNamespace(__qualname__=self._name)


class _Origin(NamedTuple):
    """The forward call a returned function belongs to."""
    session: Callable[[], Any]  # a weak reference to the session recorder it was made in
    call_index: int             # the forward call's index there
    fun: _FunctionRef           # the user's function
    options: Options            # the forward call's options
    # Its stages waiting for a rule its pullback runs (_stages.PendingStages): held here only,
    # so they go when the pullback goes (emptied once it has run)
    pending: Any = None
    # Under record(values=True), its stages' jaxprs and host copies of its inputs, for the
    # returned function's calls to evaluate theirs (_recording.Forward); held here only
    values: Any = None


class _Recorded(NamedTuple):
    """What calls of one _RecordingPartial do and are recorded as."""
    run: Callable               # _call_vjp_fun or _call_recorded
    kind: str                   # the call kind recorded ("vjp_backward", "linearize_jvp")
    origin: _Origin
    num_consts: int             # leading arguments that are JAX's, not the user's
    always: bool = False        # also outside record(): it only swaps the partial it returns


def open_keeping_origin(kind: str, fun: Any, options: Options, run: Callable, primals: tuple,
                        kwargs: dict, wrap: Callable) -> tuple | None:
    """A vjp/linearize call opened (open_invoke); at top level, its returned function
    (out[1]) records its own calls."""
    session = state.session
    if session is None or state.call is not None:
        return open_invoke(kind, fun, options, run, primals, kwargs)

    def keeping_origin(out: Any, index: int) -> Any:
        # NB: by the call's own index: another thread's call may have finished since
        pending = session.take_handed(index)
        values = session.take_handed(index, "values")
        wrap(out[1], _Origin(weakref.ref(session), index, _FunctionRef(fun), options, pending,
                             values))
        return out
    return open_invoke(kind, fun, options, run, primals, kwargs, wrap=keeping_origin)


def _forward_index(origin: _Origin) -> int | None:
    """The forward call's index, when it was recorded in the session now recording."""
    return origin.call_index if origin.session() is state.session else None


class _RecordingPartial(functools.partial):
    """functools.partial(JAX's function, JAX's arguments) whose calls are recorded."""

    @property
    def __call__(self) -> Callable:
        found = _ORIGINS.get(self)
        if found is None or (state.session is None and not found.always):
            # NB: partial's own C call: no frame of ours outside record().
            return functools.partial.__call__.__get__(self, type(self))
        return functools.partial(found.run, self, found)

    def __repr__(self) -> str:
        return repr(functools.partial(self.func, *self.args, **self.keywords))

    def __reduce__(self):  # pickles as JAX's partial would
        return functools.partial(self.func, *self.args, **self.keywords).__reduce__()


def _recording(partial: Any, recorded: _Recorded) -> Any:
    """`partial`'s functools.partial replaced by a _RecordingPartial whose calls do `recorded`."""
    recording = _RecordingPartial(partial.func, *partial.args, **partial.keywords)
    _ORIGINS[recording] = recorded
    return recording


def recording_pullback(pullback: Any, origin: _Origin) -> None:
    """JAX's VJP object, its inner function swapped in place (_i.swap_vjp_function)."""
    _i.swap_vjp_function(pullback, lambda fun: _recording(
        fun, _Recorded(_call_vjp_fun, "vjp_backward", origin, 0, always=True)))


def recording_pushforward(f_jvp: Any, origin: _Origin) -> None:
    """jax.linearize's f_jvp, its inner function swapped in place (_i.swap_linear_function)."""
    _i.swap_linear_function(f_jvp, lambda inner, consts: _recording(
        inner, _Recorded(_call_recorded, "linearize_jvp", origin, consts)))


def _call_vjp_fun(partial: _RecordingPartial, found: _Recorded, *args, **kwargs) -> Any:
    """The VJP's function: its product, the backward Partial, records its own call."""
    backward = functools.partial.__call__(partial, *args, **kwargs)
    _i.swap_linear_function(backward, lambda inner, consts: _recording(
        inner, _Recorded(_call_recorded, found.kind, found.origin, consts)))
    return backward


def _call_recorded(partial: _RecordingPartial, found: _Recorded, *args, **kwargs) -> Any:
    """Run a pushforward or backward function as a Call whose parent is the forward call."""
    origin, num_consts = found.origin, found.num_consts
    run = functools.partial(functools.partial.__call__, partial, *args[:num_consts])
    forward = _forward_index(origin)
    pending = origin.pending if forward is not None else None
    return invoke(found.kind, origin.fun.get(), origin.options, run, args[num_consts:], kwargs,
                  forward=forward, late=pending if pending is not None and pending.open else None,
                  forward_values=origin.values if forward is not None else None)
