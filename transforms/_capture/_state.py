"""Recording state: the open record() blocks, the call being recorded, its levels.

Context-local (contextvars), so asyncio tasks and threads each record into their own
session; also the keys of JAX's jit caches per block, and stage capture's refusal to
run a user's function again. The recording layer (transforms._recording) writes it, the
wrappers (_api.py) and stage capture (_chain.py) read it.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import itertools
import sys
import threading
from types import FrameType
from typing import Any, Generic, Iterator, NamedTuple, TypeVar

from .. import _jax as _i
from ._spec import function_name

# The state holds the recording layer's objects (a layer above this one) and never uses them:
# that layer reads it as RecordingState[SessionRecorder, CallBuilder, LevelState].
Recorder = TypeVar("Recorder")  # a record() block's recorder (SessionRecorder)
OpenCall = TypeVar("OpenCall")  # the call being recorded (CallBuilder)
OpenLevel = TypeVar("OpenLevel")  # a level open in it (LevelState)


class _Block:
    """One `record()` block: its recorder (and its serial), the frame that entered it, whether
    it has ended (a thread started inside it may outlive it)."""
    __slots__ = ("recorder", "frame", "serial", "closed")

    def __init__(self, recorder: Any, frame: FrameType | None):
        self.recorder, self.frame, self.closed = recorder, frame, False
        self.serial = getattr(recorder, "serial", None)


# Recording state is context-local (contextvars), so asyncio tasks and threads each
# record into their own session. NB: a tuple of the open blocks, not one value with
# its previous one saved: a block that exits out of order (generators interleaved)
# removes only itself, and never restores a session that has already closed.
_blocks: contextvars.ContextVar[tuple[_Block, ...]] = contextvars.ContextVar(
    "transforms_record_blocks", default=())
_off: contextvars.ContextVar[bool] = contextvars.ContextVar("transforms_recording_off",
                                                            default=False)
_call: contextvars.ContextVar[Any] = contextvars.ContextVar("transforms_call", default=None)
_levels: contextvars.ContextVar[list | None] = contextvars.ContextVar(
    "transforms_levels", default=None)


class RecordingState(Generic[Recorder, OpenCall, OpenLevel]):
    """The recording state as attributes (read by _api.py), kept in context variables.

    `session` is the recorder of the innermost open block whose frame is running (a
    generator resumed inside its own `with record()` records there), else of the
    block entered last (a pytest fixture that yields inside one)."""

    @property
    def session(self) -> Recorder | None:
        if _off.get():
            return None
        blocks = _blocks.get()
        if not blocks:
            return None
        if blocks[-1].closed:  # a thread that outlived the block it was started in
            blocks = tuple(b for b in blocks if not b.closed)
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
    def call(self) -> OpenCall | None:
        return _call.get()

    @call.setter
    def call(self, value: OpenCall | None) -> None:
        _call.set(value)

    @property
    def levels(self) -> list[OpenLevel]:
        levels = _levels.get()
        if levels is None:
            levels = []
            _levels.set(levels)
        return levels


state: RecordingState[Any, Any, Any] = RecordingState()


def entering_frame() -> FrameType | None:
    """The frame whose `with` statement entered record(): the first outside contextlib."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename == contextlib.__file__:
        frame = frame.f_back
    return frame


# The serial of the one block open in this context (None: none, or several), for the
# jitted call's hot path (transforms.jit): read as `SINGLE_BLOCK.get()`.
SINGLE_BLOCK: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "transforms_single_block", default=None)


def _set_blocks(blocks: tuple) -> None:
    _blocks.set(blocks)
    SINGLE_BLOCK.set(blocks[0].serial if len(blocks) == 1 else None)


def active_session() -> Any:
    """The recorder of the block recording in this context, else None."""
    return state.session


def count_if_unrecorded() -> None:
    """A transformation is called with no block recording here: when this thread was started
    in a block that has ended since, that block's recorder counts the call it cannot record."""
    blocks = _blocks.get()
    if blocks and blocks[-1].closed:
        blocks[-1].recorder.count_unrecorded()


class Entered(NamedTuple):
    """What entering a record() block replaced: leave_block puts it back."""
    block: _Block
    call: Any
    levels: Any
    key: int
    key_token: Any


def enter_block(recorder: Any, frame: FrameType | None) -> Entered:
    """Open a record() block: calls in this context now record into `recorder`."""
    block = _Block(recorder, frame)
    with _open_blocks_lock:
        _open_blocks[0] += 1
        _open_serials.append(block.serial)
        ONLY_BLOCK[0] = block.serial if _open_blocks[0] == 1 else None
        if _open_blocks[0] == 1:
            threading.Thread.start = _start_in_this_context  # type: ignore[method-assign, assignment]
    prev = (_call.get(), _levels.get())
    _set_blocks((*_blocks.get(), block))
    _call.set(None)
    _levels.set([])
    key = _new_block_key()
    return Entered(block, *prev, key, _block_key.set(key))


def leave_block(entered: Entered) -> None:
    """Close the block: it records no more (the block's jit cache key stays until
    reset_block_key, for the stages read after)."""
    blocks = _blocks.get()
    innermost = bool(blocks) and blocks[-1] is entered.block
    _set_blocks(tuple(b for b in blocks if b is not entered.block))
    if innermost:  # in order: the state of the block around it comes back
        _call.set(entered.call)
        _levels.set(entered.levels)
    entered.block.frame = None
    entered.block.closed = True


def reset_block_key(entered: Entered) -> None:
    _block_key.reset(entered.key_token)
    with _open_blocks_lock:
        _open_blocks[0] -= 1
        _open_serials.remove(entered.block.serial)
        ONLY_BLOCK[0] = _open_serials[0] if _open_blocks[0] == 1 else None
        if _open_blocks[0] == 0:
            threading.Thread.start = _plain_start  # type: ignore[method-assign]


# Threads do not inherit context variables (before Python 3.14), so a thread the program
# starts inside a block would record nothing. While any block is open, Thread.start runs
# the thread in a copy of the starting context: its calls record into the block it was
# started in, as calls of their own (no call or level of the starter's is open there).
# NB: the starter's block only: a thread started outside every block is left as it is, and
# a thread that enters a record() block of its own records there (the innermost).
_plain_start = threading.Thread.start


def _start_in_this_context(thread: threading.Thread) -> None:
    if _blocks.get():
        context = contextvars.copy_context()
        run = thread.run
        thread.run = functools.partial(context.run, _run_as_new_thread, run)  # type: ignore[method-assign]
    _plain_start(thread)


def _run_as_new_thread(run: Any) -> None:
    _call.set(None)
    _levels.set([])
    run()


# How many record() blocks are open, in every thread: while none is, a jitted call
# returns JAX's own object at once (one list read), see transforms.jit.
OPEN_BLOCKS = _open_blocks = [0]  # read as OPEN_BLOCKS[0] on jit's hot path (no call)
# The serial of the one block open in the process (None: none, or several), read as
# ONLY_BLOCK[0] on that path: a context outside it records nothing, so for a jitted call
# there it is as good as the context's own block (SINGLE_BLOCK), and a list read is
# cheaper than a context variable's.
ONLY_BLOCK: list[int | None] = [None]
_open_serials: list[int | None] = []
_open_blocks_lock = threading.Lock()


def any_block_open() -> bool:
    return _open_blocks[0] > 0


def open_levels() -> list:
    """The levels open in this context's call (none: an empty list, not kept)."""
    return _levels.get() or []



# Stage capture's own state, in context variables as the recording state is.
_refuse_retrace: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "transforms_refuse_retrace", default=False)


# A block never changes what JAX's caches are keyed on while the program runs: its calls
# run on JAX's cached traces and executables, as outside. A jit that JAX had traced
# before the block is traced once more, for the recording only, under a key of the block's
# own (a number, nothing of ours, as the value of a jax.make_user_context): JAX's tracing
# cache misses there, so the function runs under the recorder, and nothing traced under
# that key is ever lowered, compiled or run.
# NB: a new number only after a block traced a jit entry of ours under the last one: the
# traces it cached under that number would answer the next block's retrace.
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


_retracing: contextvars.ContextVar[bool] = contextvars.ContextVar("transforms_retracing",
                                                                 default=False)


def retracing_now() -> bool:
    """True inside retracing_to_record: what JAX traces there is the recording's, not the program's."""
    return _retracing.get()


@contextlib.contextmanager
def retracing_to_record() -> Iterator[None]:
    """Trace a jit that JAX had cached before the block again, for the recording only.

    Under the block's own key JAX's tracing cache misses, so the user's function runs
    under the recorder; what is traced here is never lowered, compiled or run (the call
    itself runs on JAX's cached executable, keyed as always).
    """
    token = _retracing.set(True)
    try:
        with _i.jit_cache_key(_block_key.get()):
            yield
    finally:
        _retracing.reset(token)


class RetraceRefused(RuntimeError):
    """Stage capture met a JAX cache miss that would run the user's function again."""


@contextlib.contextmanager
def refusing_retrace() -> Iterator[None]:
    """While capturing from JAX's caches: a trace of a recorded function raises instead."""
    token = _refuse_retrace.set(True)
    try:
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
