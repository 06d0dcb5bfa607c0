"""Every trace, lowering and compilation of a jit while a block records, as CompileRecords.

JAX reports each through its public monitoring events (`_jax.listen_to_compiles`), whoever
called jax.jit: the user, a library, jnp's own jits. Each event of a recording context
becomes, or completes, a record of the block's session (`CompileLog`), with its seconds and
the user's line. A jit of ours (transforms.jit; jax.jit under `workbench run`) notes its
cache key when JAX traces it (`note_key`), so its trace's record holds the key and, after
the first trace of the same function, why it missed against the nearest earlier key
(model.miss_reasons). Events of what the recorder traces itself (stages, the trace made
for the recording only) are not the program's and are left out.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import itertools
import threading
from typing import Any, Iterable

from .. import _jax as _i
from .._capture import argument_names, location_of, retracing_now, state, user_location
from .._common import safe_repr
from ..model import (
    CompileKey,
    CompileRecord,
    KeyLeaf,
    SourceLocation,
    StaticKey,
    compile_reasons,
    miss_reasons,
    same_function,
)

__all__ = ["CompileLog", "compile_key", "defined_at", "listen", "new_function_id"]

_STATIC_TEXT = 80  # a static argument's repr is cut to this
_listening = [False]
_listen_lock = threading.Lock()
_function_ids = itertools.count(1)


def new_function_id() -> int:
    """A number for a new function object (ids are reused once an object dies; these not)."""
    return next(_function_ids)


def listen() -> None:
    """Hear JAX's compile events from now on (once per process; costs nothing outside blocks)."""
    with _listen_lock:
        if not _listening[0]:
            _i.listen_to_compiles(_on_event)
            _listening[0] = True


def _on_event(event: str, seconds: float, **kwargs: Any) -> None:
    phase = _i.event_phase(event)
    if phase is None:
        return
    recorder = state.session  # None outside blocks and while the recorder traces for itself
    if recorder is None:
        return
    recorder.compiles.on_event(phase, _i.event_function(kwargs), seconds, retracing_now())


class CompileLog:
    """A session's compile records as JAX's events arrive (appended to `records`)."""

    def __init__(self, records: list[CompileRecord]):
        self.records = records
        self._lock = threading.Lock()
        # What our jit entries noted while JAX traced them, by (thread, function name):
        # the trace's event comes after the trace.
        self._pending: dict[tuple[int, str], tuple[CompileKey, SourceLocation | None,
                                                   int | None]] = {}
        self._latest: dict[tuple[int, str], int] = {}  # where a trace's lower/compile goes
        self._function_ids: dict[int, int] = {}  # the process's number -> the session's

    def note_key(self, function: str, key: CompileKey, defined: SourceLocation | None,
                 call_index: int | None) -> None:
        # NB: the process's number for the function object made the session's (1, 2, ... in
        # order of first trace): a dump says the same whatever ran before it.
        with self._lock:
            local = self._function_ids.setdefault(key.function_id, len(self._function_ids) + 1)
        key = dataclasses.replace(key, function_id=local)
        self._pending[(threading.get_ident(), function)] = (key, defined, call_index)

    def on_event(self, phase: str, function: str, seconds: float, for_recording: bool) -> None:
        at = (threading.get_ident(), function)
        if phase == "trace":
            noted = self._pending.pop(at, None)
            if for_recording:  # traced again for the recording only: not the program's
                return
            self._traced(at, function, seconds, noted)
        elif not for_recording:
            self._followed(at, function, phase, seconds)

    def _traced(self, at: tuple[int, str], function: str, seconds: float,
                noted: tuple | None) -> None:
        key, defined, call_index = noted if noted is not None else (None, None, None)
        record = CompileRecord(function, location=user_location(), defined_at=defined,
                               traced=True, trace_seconds=seconds, key=key,
                               call_index=call_index)
        with self._lock:
            earlier = self.records
            number = sum(1 for r in earlier if r.traced and same_function(r, record))
            if number:
                record = dataclasses.replace(record, number=number,
                                             reasons=miss_reasons(earlier, record))
            self._latest[at] = len(earlier)
            earlier.append(record)

    def _followed(self, at: tuple[int, str], function: str, phase: str, seconds: float) -> None:
        """A lowering or compilation: of the trace just made, or of one made before (of a
        function traced in this session: its key, and why it compiled again)."""
        placements = (_i.compiling_placements() or ()) if phase == "compile" else ()
        with self._lock:
            position = self._latest.get(at)
            if position is not None and position < len(self.records) and \
                    not _has(self.records[position], phase):
                done = _with(self.records[position], phase, seconds, placements)
                self.records[position] = done
                return
            self._latest[at] = len(self.records)
            record = _with(self._untraced(function), phase, seconds, placements)
            if phase == "compile" and record.key is not None:
                record = dataclasses.replace(
                    record, reasons=compile_reasons(self.records, record))
            self.records.append(record)

    def _untraced(self, function: str) -> CompileRecord:
        """A lowering or compile with no trace before it: of the latest trace of a function
        of that name traced in the session (its key: JAX's tracing cache hit it), if any."""
        here = user_location()
        traced = [r for r in self.records if r.traced and r.key is not None
                  and r.function == function]
        if not traced:
            return CompileRecord(function, location=here)
        return CompileRecord(function, location=here, defined_at=traced[-1].defined_at,
                             key=traced[-1].key, call_index=None)


def _has(record: CompileRecord, phase: str) -> bool:
    return record.lowered if phase == "lower" else record.compiled


def _with(record: CompileRecord, phase: str, seconds: float,
          placements: tuple[str, ...] = ()) -> CompileRecord:
    """The record with its lowering ("lower") or compilation done, in seconds (a compile
    for a call: where its arguments sat)."""
    if phase == "lower":
        return dataclasses.replace(record, lowered=True, lower_seconds=seconds)
    return dataclasses.replace(record, compiled=True, compile_seconds=seconds,
                               placements=placements)


def compile_key(function_id: int, fun: Any, jit_kwargs: dict, args: tuple,
                kwargs: dict) -> CompileKey:
    """The key of a jit's trace as data: its arguments (tracers, and static values) as
    JAX's caches see them, the function object's number and JAX's keyed settings."""
    names = argument_names(fun, args)
    static_positions, static_names = _statics(jit_kwargs, names, len(args))
    leaves: list[KeyLeaf] = []
    statics: list[StaticKey] = []
    trees: list[tuple[str, str]] = []
    named = [(names[i], i in static_positions or names[i] in static_names, a)
             for i, a in enumerate(args)]
    named += [(k, k in static_names, v) for k, v in kwargs.items()]
    for name, static, value in named:
        if static:
            statics.append(StaticKey(name, safe_repr(value, _STATIC_TEXT), type(value).__name__))
            continue
        trees.append((name, _i.tree_text(value)))
        leaves += [KeyLeaf(name + _i.path_text(leaf.path), leaf.dtype, leaf.shape,
                           leaf.weak_type, leaf.sharding) for leaf in _i.key_leaves(value)]
    return CompileKey(tuple(leaves), tuple(statics), tuple(trees), function_id,
                      _i.cache_config())


def trace_signature(fun: Any, jit_kwargs: dict, args: tuple, kwargs: dict) -> tuple:
    """What, beside the arrays' abstract values, tells apart two traces of a jit (its cache
    key's other parts): the static arguments as (name, type, hash) and the other
    arguments' tree. NB: hashes, not the values: the recorder keeps nothing of the user's
    (JAX hashed them already, its caches are keyed on them)."""
    names = argument_names(fun, args)
    positions, static_names = _statics(jit_kwargs, names, len(args))
    statics = [(names[i], args[i]) for i in sorted(positions) if i < len(args)]
    statics += [(k, v) for k, v in kwargs.items() if k in static_names]
    tree = _i.tree_def(([a for i, a in enumerate(args) if i not in positions],
                        {k: v for k, v in kwargs.items() if k not in static_names}))
    return tuple((name, type(value).__qualname__, hash(value)) for name, value in statics), tree


def _statics(jit_kwargs: dict, names: list[str], count: int) -> tuple[set[int], set[str]]:
    """The static argument positions and names jax.jit was given; where only one side was
    given, the other completed from it by the parameters' names, as JAX infers them (given
    both, JAX takes them as they are, even where they disagree)."""
    given_numbers, given_names = (jit_kwargs.get(k) is not None
                                  for k in ("static_argnums", "static_argnames"))
    numbers = _as_tuple(jit_kwargs.get("static_argnums", ()))
    argnames = set(_as_tuple(jit_kwargs.get("static_argnames", ())))
    positions = {n if n >= 0 else count + n for n in numbers if isinstance(n, int)}
    if not (given_numbers and given_names):
        positions |= {i for i, name in enumerate(names) if name in argnames}
        argnames |= {names[i] for i in positions if 0 <= i < len(names)}
    return positions, {n for n in argnames if isinstance(n, str)}


def _as_tuple(value: Any) -> tuple:
    if value is None:
        return ()
    return tuple(value) if isinstance(value, Iterable) and not isinstance(value, str) \
        else (value,)


def defined_at(fun: Any) -> SourceLocation | None:
    """Where the function was written (a partial's, a wrapper's function), when known."""
    while isinstance(fun, functools.partial):
        fun = fun.func
    try:
        fun = inspect.unwrap(fun)
    except ValueError:  # a cycle of __wrapped__: the object itself
        pass
    code = getattr(fun, "__code__", None)
    if code is None:
        return None
    return location_of(code, code.co_firstlineno)
