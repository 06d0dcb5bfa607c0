"""record(): the block inside which every transformation call is recorded into a Session."""
from __future__ import annotations

import contextlib
from typing import Iterator

from .._capture import enter_block, entering_frame, leave_block, reset_block_key
from ..model import Session
from ._recorder import SessionRecorder

__all__ = ["record"]


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
        try:
            yield recorder.session
        finally:
            leave_block(entered)
            recorder.finish_stages()  # a top-level jit's stages, now that its traces are over
            recorder.forget_jit_traces()
    finally:
        reset_block_key(entered)
