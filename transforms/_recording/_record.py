"""record(): the block inside which every transformation call is recorded into a Session."""
from __future__ import annotations

import contextlib
import warnings
from types import FrameType
from typing import Iterator

from .._capture import enter_block, entering_frame, leave_block, reset_block_key
from .._jax import jax_own
from ..model import NOTHING_RECORDED, Journal, NothingRecordedWarning, Session
from ._compiles import listen
from ._recorder import SessionRecorder

__all__ = ["record"]

_warned_nothing = [False]


@contextlib.contextmanager
def record(*, inline_jnp: bool = False, stages: bool = True,
           detail: str = "default", max_steps: int | None = None,
           find_nans: bool = False, stop_at_nan: bool = False,
           values: bool = False, journal: Journal | None = None) -> Iterator[Session]:
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
    With `find_nans=True` every call's outputs are checked for NaN and Inf, and the first
    call that has one is replayed equation by equation after it returns (on host copies of
    its inputs, with its recorded stages): `Call.nonfinite` names the equation that first
    made one from finite inputs, its stage, primitive, level and line, with a hint.
    With `stop_at_nan=True` too, that call then raises `transforms.NonFiniteFound` into the
    program where it returned (as jax_debug_nans raises). A jit's results are checked when
    its stages are read (the block's end, or when the program drops its function), and
    only its traced call: a cached call of a jitted function runs nothing of ours.
    With `values=True` every call's stages that take its inputs (the function, the
    transformed program with its forward and backward equations, a jit's jaxpr) are
    evaluated again after it returns, and each equation's outputs summarised
    (`Call.values`).
    With `journal=Journal.open(path, metadata)` each call's start and record are appended
    to that journal as they happen, so that a process that dies (killed, a segfault,
    os._exit) leaves what finished before (`transforms.model.read_journal`, or `load` of
    the dump it stands beside); the caller closes or removes it.
    """
    listen()  # JAX's compile events, heard once per process
    recorder = SessionRecorder(inline_jnp=inline_jnp, stages=stages, detail=detail,
                               max_steps=max_steps, find_nans=find_nans,
                               stop_at_nan=stop_at_nan, values=values, journal=journal)
    frame = entering_frame()
    entered = enter_block(recorder, frame)
    try:
        try:
            yield recorder.session
        finally:
            leave_block(entered)
            recorder.stop_progress()
            recorder.finish_stages()  # a top-level jit's stages, now that its traces are over
            recorder.forget_jit_traces()
    finally:
        reset_block_key(entered)
    if not recorder.session.calls:
        _warn_nothing_recorded(frame)


def _warn_nothing_recorded(frame: FrameType | None) -> None:
    """Once a process: a block ended with no call, most often jax.grad called directly."""
    import jax
    if _warned_nothing[0] or jax.grad is not jax_own.grad:  # `workbench run` swapped jax.*
        return
    _warned_nothing[0] = True
    if frame is None:
        warnings.warn(NOTHING_RECORDED, NothingRecordedWarning, stacklevel=3)
    else:
        warnings.warn_explicit(NOTHING_RECORDED, NothingRecordedWarning,
                               frame.f_code.co_filename, frame.f_lineno,
                               module=frame.f_globals.get("__name__"))
