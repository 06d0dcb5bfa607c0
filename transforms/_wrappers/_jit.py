"""transforms.jit: `jax.jit` itself, on an entry that stands for the user's function.

How jit's entry works. JAX keys its caches (the C++ dispatch cache, the
trace cache, eval_shape's) on the function it is given, and names the jaxpr
after it. So `transforms.jit(f)` is `jax.jit(entry, ...)` where `entry`
stands for f:
- one entry per (f, options), kept in _JIT_ENTRIES while f lives (the entry
  holds f weakly; the jitted object holds f, as jax.jit(f) does), so jitting
  f twice reuses JAX's cache and a jitted call keeps nothing alive;
- `entry == f` and `hash(entry) == hash(f)`, so the traces of jax.jit(f),
  jax.eval_shape(f) and transforms.jit(f) are shared as JAX shares them;
- entry's name is JAX's name for f (`fun_name`), its other metadata f's,
  `__wrapped__` is f (JAX's source info unwraps it) and its signature
  hooks the pre-trace check (_i.cache_miss_signature);
- its `__call__` is a property: outside record() JAX calls f itself (no frame
  of ours); inside, `_JitEntry.record`, which records the trace as a call
  (or as a level of the call being recorded).
A function JAX cannot weak-reference or hash is given to jax.jit as it is
(JAX raises for it as it would), and not recorded.

What the user holds is a `Jitted` around JAX's jitted object. Its call is a JitCall's
(the C core's, or a Python twin whose `__call__` is a property): outside record() it is
JAX's object called, chosen with no Python code run (no frame of ours, JAX's C++
dispatch). Inside, each call first asks JAX for its trace (`.trace`, JAX's own
tracing cache): a miss traces here, recorded by the entry; a hit is a trace JAX made
before the block, traced once more for the recording only (see retracing_to_record),
once per block. The call then runs on JAX's own caches: a block never makes JAX trace
for the program, lower or compile what it had already (tests/transforms/test_compiles.py).
Once the block has recorded every trace JAX can answer the jit's calls from (_TraceCount),
its calls in the block are JAX's object itself too: a miss traces, and the entry records it.
"""
from __future__ import annotations

import functools
import inspect
import threading
import types
import weakref
from typing import TYPE_CHECKING, Any, Callable

from .. import _jax as _i
from .._capture import (
    ONLY_BLOCK,
    OPEN_BLOCKS,
    SINGLE_BLOCK,
    Options,
    TransformSpec,
    any_block_open,
    argument_names,
    check_retrace,
    jit_call_class,
    note_jit_traced,
    recording_off,
    retrace_refused,
    retracing_now,
    retracing_to_record,
)
from .._common import bracket, raised_as_is, returned_as_is
from .._jax import jax_own
from .._recording import (
    JitReplay,
    begin_call,
    build,
    compile_key,
    defined_at,
    new_function_id,
    note_jit_arguments,
    note_jit_values,
    note_user_jit,
    open_call_level,
    open_level,
    record_failed_call,
    state,
    take_jit_values,
    trace_signature,
    with_argument_values,
)
from .._trees import check_inputs, non_array_argument_error

__all__ = ["jit"]

_JIT_ENTRIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _JitEntry:
    """What jax.jit sees for the user's function f (see the notes above)."""

    def __init__(self, fun: Callable, options: Options, kwargs: dict):
        # f's metadata, as functools.wraps would copy it, except `__wrapped__`
        # (a property: the entry must not hold f, see _JIT_ENTRIES).
        for attr in functools.WRAPPER_ASSIGNMENTS:  # __module__, __annotations__, __doc__, ...
            if hasattr(fun, attr):
                setattr(self, attr, getattr(fun, attr))
        self.__dict__.update({k: v for k, v in getattr(fun, "__dict__", {}).items()
                              if k != "__wrapped__"})
        self.__name__ = _i.jax_function_name(fun)  # JAX names the jaxpr with it
        self._fun: Callable[[], Any] = weakref.ref(fun)
        self._hash = hash(fun)
        self._traces = 0  # traces of f inside a block (see_trace: did .trace trace just now)
        self._retraced_replay: Any = None  # the JitReplay of the call a retrace records
        # The block (its recorder's serial) that has recorded every trace JAX can answer
        # this entry's calls from, else _MIXED (None: JAX never traced it): a call in that
        # block may go straight to JAX (Jitted.__call__). See _TraceCount.
        self.owner: object = None
        self.count = _TraceCount()
        self._options = options
        self._kwargs = kwargs
        self._function_id = new_function_id()  # the function object, in compile keys
        # NB: the hook holds the entry weakly (no cycle entry -> signature -> entry)
        signature = _i.cache_miss_signature(
            fun, functools.partial(_check_before_trace, weakref.ref(self)))
        if signature is not None:
            self.__signature__ = signature

    @property
    def __wrapped__(self) -> Any:
        return self._fun()

    def transform_spec(self) -> TransformSpec:
        # NB: stages read JAX's own trace of this jit from its cache (after the
        # trace is over): a jax.jit of this same entry shares that cache, and
        # holds nothing that holds it back (no cycle through the jitted object).
        return TransformSpec("jit", self._fun(), jax_own.jit(self, **self._kwargs), self._options)

    def jit_again(self) -> Any:
        """jax.jit of this entry as built: JAX's own argument checks, for the pre-trace check."""
        return jax_own.jit(self, **self._kwargs)

    @property
    def __call__(self) -> Callable:
        if state.session is None and not retrace_refused():
            self.traced_outside()  # a block's call may hit it
            return self._fun()
        # NB: made per trace, not kept: the entry holds nothing that holds it back.
        return bracket(self._open_trace)

    def see_trace(self, jitted: Any, args: tuple, kwargs: dict) -> None:
        """Before a call inside record(): make sure the block records the trace it runs.

        JAX's `.trace` answers from its tracing cache, or traces (and the entry records)
        on a miss. A trace JAX cached before the block (not one the block traced, by
        eval_shape or .lower too) is traced once more, for the recording only, on its
        first run in the block. Errors are JAX's: the call would raise the same.
        """
        if state.session is None or retrace_refused():
            return
        self.check_cache(jitted)
        traces = self._traces
        self.traced(jitted.trace(*args, **kwargs), traces, jitted, args, kwargs)

    def check_cache(self, jitted: Any) -> None:
        """Before a call (or .trace) in a block, of an entry that never traced: JAX's dispatch
        cache holding entries already (made before by another jitted object of the same
        function) makes it _MIXED for good, so its calls take the path that records cached
        traces."""
        if self.owner is None and _i.jit_cache_size(jitted) != 0:
            self.owner = _MIXED
            self.count.uncountable()

    def traced_outside(self) -> None:
        """JAX traced f for the program outside any block (or in a context recording nothing)."""
        self.owner = _MIXED
        self.count.traced()

    def traced_in_block(self, serial: int) -> None:
        """JAX traced f for the program in block `serial`, which records the trace."""
        if self.owner is None or self.owner == serial:
            self.owner = serial  # every trace JAX holds of it is recorded in that block
        else:
            self.owner = _MIXED
        self.count.traced()

    def traced(self, traced: Any, traces: int, jitted: Any, args: tuple, kwargs: dict) -> None:
        """JAX's `.trace` answered (`traces`: the entry's count before it): retrace for the
        recording where the block has not recorded this trace (see see_trace)."""
        recorder = state.session
        if recorder is None:
            return
        jaxpr, avals = _i.trace_key(traced)
        signature = trace_signature(self._fun(), self._kwargs, args, kwargs)
        first_run, recorded = recorder.first_run_of(self, jaxpr, avals, signature)
        if not first_run:
            return
        # NB: traced just now is recorded too: a jaxpr's in_avals may hold more than the
        # arguments' (a leaked tracer becomes an input), so the avals alone can miss it.
        if not recorded and self._traces == traces:
            self._retraced_replay = None
            with retracing_to_record():
                retraced = jitted.trace(*args, **kwargs)
            replay, self._retraced_replay = self._retraced_replay, None
            if replay is not None:  # the jaxpr whose variables the recording saw
                replay.recorded_jaxpr = retraced.jaxpr
        if self.count.recorded_in(recorder.serial, _i.jit_cache_size(jitted)):
            self.owner = recorder.serial  # every trace JAX holds of f is recorded in the block

    def _open_trace(self, args: tuple, kwargs: dict | None) -> tuple:
        """JAX traces f (a miss of its cache): the trace recorded, as a Bracket's run (no
        frame of ours between JAX's and f's)."""
        fun = self._fun()
        kwargs = kwargs or {}
        check_retrace(fun)  # stage capture reads JAX's cache: a miss must not run fun
        note_jit_traced()  # cached under this block's key: a later block must trace it again
        if state.session is None:
            self.traced_outside()
            return fun, args, kwargs, returned_as_is, raised_as_is
        if not retracing_now():  # NB: a retrace is the recording's: JAX's calls never hit it
            self.traced_in_block(state.session.serial)
        self._traces += 1
        state.session.note_jit_traced(self, _i.traced_avals(args, kwargs),
                                      trace_signature(fun, self._kwargs, args, kwargs))
        call = state.call
        if call is None:  # a top-level trace: JAX reports it, its cache key goes with it
            self._note_key(fun, args, kwargs)
        if call is not None:  # traced inside a recorded call: a level of it
            return open_level(call, fun, "jit", self._options, args, kwargs)
        # Traced outside any recorded call: this trace is the call.
        values = take_jit_values(fun)  # the concrete arguments, summarised before the trace
        call = begin_call(state.session, "jit", fun, self._options, args, kwargs)
        if values is not None:
            call.trees.inputs = with_argument_values(call.trees.inputs, values)
            if values[2] is not None:  # small enough: its results replayed once traced
                call.stages.replay = JitReplay(values[2], args, kwargs, state.session)
                if retracing_now():  # JAX runs its own trace: the replay is told this one
                    self._retraced_replay = call.stages.replay
        call.stages.plan(self.transform_spec())
        return open_call_level(call, fun, "jit", self._options, args, kwargs)

    def _note_key(self, fun: Callable, args: tuple, kwargs: dict) -> None:
        recorder = state.session
        if recorder is None:
            return
        key = compile_key(self._function_id, fun, self._kwargs, args, kwargs)
        recorder.compiles.note_key(self.__name__, key, defined_at(fun), recorder.next_index())

    def __repr__(self) -> str:  # JAX prints it (errors, the jitted object's repr) as f
        return repr(self._fun())

    def __eq__(self, other: object) -> bool:
        return other is self or self._fun() == other

    def __hash__(self) -> int:
        return self._hash


_NOT_SPECIFIED = object()
_MIXED = "mixed"  # an entry whose traces no one block has all recorded


class _TraceCount:
    """How an entry traced before a block becomes JAX's own call in it (entry.owner).

    JAX answers a jitted call from a trace of the entry made for the program: JAX calls
    the entry for each one (in a block or not), so `made` counts every trace it can
    answer from (a count too high only keeps calls on the recording path). In a block, each
    distinct trace that a call (or .trace) ran is recorded on its first run there (see_trace)
    and counted in `recorded`; when that reaches `made`, the block has recorded them all.
    `recorded` never counts a trace twice (a trace's first run in the block) and only
    traces `made` counts, so it reaching `made` means each was recorded; it counts too
    few where a trace made in the block ran only on JAX's own call (while the block owned
    the entry): that only keeps calls on the recording path. Counting for another block
    starts again.
    JAX shares its caches between jitted objects of functions that compare equal (the
    entry == f): a dispatch cache holding more executables than `made` traces holds some
    no count saw (jax.jit(f)'s), and the entry stays on the recording path.
    NB: a lock: threads trace too, and a lost count could end recording too early.
    """
    __slots__ = ("made", "block", "recorded", "countable")

    def __init__(self) -> None:
        self.made = 0  # program traces of the entry, anywhere
        self.block: int | None = None  # the block `recorded` counts for
        self.recorded = 0  # distinct program traces run, so recorded, in that block
        self.countable = True  # False: JAX's cache held what no count saw (check_cache)

    def traced(self) -> None:
        """JAX traced the entry for the program (in a block or not)."""
        with _COUNT_LOCK:
            self.made += 1

    def recorded_in(self, serial: int, executables: int | None) -> bool:
        """A trace's first run in block `serial` (recorded there now): has that block now
        recorded every trace JAX can answer from? (`executables`: how many JAX's dispatch
        cache holds for the entry, None: not known)"""
        with _COUNT_LOCK:
            if self.block != serial:
                self.block, self.recorded = serial, 0
            self.recorded += 1
            return (self.countable and self.recorded == self.made and executables is not None
                    and executables <= self.made)

    def uncountable(self) -> None:
        self.countable = False


_COUNT_LOCK = threading.Lock()


@_i.api_boundary
@functools.wraps(jax_own.jit)
def jit(fun=_NOT_SPECIFIED, /, **kwargs):
    """`jax.jit` itself, on an entry standing for `fun` that records its traces in record().

    The result is JAX's own jitted object (`.lower`, `.trace`, `.eval_shape`,
    caching): cached calls run no Python of ours.
    """
    if fun is _NOT_SPECIFIED:  # used as @jit(static_argnums=...)
        jax_own.jit(**kwargs)  # raises now what JAX raises now for bad keywords
        return lambda f: jit(f, **kwargs)
    options = Options(kwargs)
    entry = _jit_entry(fun, options, kwargs)
    if entry is None:
        return build("jit", jax_own.jit, fun, options, **kwargs)
    jitted = jax_own.jit(entry, **kwargs)
    jitted.__wrapped__ = fun  # as jax.jit(f).__wrapped__ is f; it keeps f alive, as JAX's does
    jitted.__transform_spec__ = entry.transform_spec()
    return _jitted_class(jit_call_class())(jitted, entry)


class Jitted:
    """What transforms.jit returns: JAX's jitted object, seen through (see the notes above).

    Attributes are JAX's object's (`.lower`, `.trace`, `.clear_cache`, `_cache_size`, ...);
    metadata is jax.jit(f)'s; `__get__` binds it as a method, as JAX's binds. Its call is a
    JitCall's (`_capture.jit_call_class`: C, or a Python twin): made by `_jitted_class`.
    """

    if TYPE_CHECKING:  # the JitCall's, see _jitted_class
        _jitted: Any
        _entry: _JitEntry

        def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

        def _call_target(self) -> Callable: ...

    def __init__(self, jitted: Any, entry: _JitEntry):
        functools.update_wrapper(self, jitted)
        self.__wrapped__ = jitted.__wrapped__  # f, as jax.jit(f).__wrapped__ is
        # NB: the recording path is kept, and holds this object weakly: no cycle, and JAX's
        # leak checker, which walks the referrers of a leaked tracer, meets nothing of ours.
        in_block = bracket(functools.partial(_open_in_block, weakref.ref(self)))
        super().__init__(jitted, entry, in_block, OPEN_BLOCKS, ONLY_BLOCK,  # type: ignore[call-arg]
                         SINGLE_BLOCK)  # JitCall's (see _jitted_class)

    # JAX's ahead-of-time methods trace too: in a block, the trace they use is recorded.
    def trace(self, *args: Any, **kwargs: Any) -> Any:
        return self._seen_in_block(args, kwargs).trace(*args, **kwargs)

    def lower(self, *args: Any, **kwargs: Any) -> Any:
        return self._seen_in_block(args, kwargs).lower(*args, **kwargs)

    def eval_shape(self, *args: Any, **kwargs: Any) -> Any:
        return self._seen_in_block(args, kwargs).eval_shape(*args, **kwargs)

    def _seen_in_block(self, args: tuple, kwargs: dict) -> Any:
        if any_block_open():
            self._entry.see_trace(self._jitted, args, kwargs)
        return self._jitted

    def __getattr__(self, name: str) -> Any:
        if name == "_jitted":  # not set yet (copying, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self._jitted, name)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else types.MethodType(self, obj)

    def __repr__(self) -> str:
        return repr(self._jitted)

    def __getstate__(self) -> Any:  # JAX's (its function_name, ...), not this wrapper's
        return self._jitted.__getstate__()

    def __reduce__(self) -> Any:  # pickled as JAX's object: nothing of the recorder travels
        return self._jitted.__reduce__()


@functools.lru_cache(maxsize=None)
def _jitted_class(call: type) -> type:
    """Jitted with its call made by `call` (a JitCall, or its Python twin)."""
    return type("Jitted", (Jitted, call), {"__module__": __name__, "__doc__": Jitted.__doc__})


def _open_in_block(jitted_ref: Callable, args: tuple, kwargs: dict | None) -> tuple:
    """A call while some record() block is open, as a Bracket's run: JAX's call (which traces
    f on a miss of its cache, recorded by the entry), then the trace it ran recorded where
    the block has not recorded it (_InBlock)."""
    jitted = jitted_ref()
    if state.session is None or retrace_refused() or _i.jit_disabled():  # JAX traces nothing
        return jitted._jitted, args, kwargs, returned_as_is, raised_as_is
    jitted._entry.check_cache(jitted._jitted)
    run = _InBlock(jitted_ref, jitted._entry, args, kwargs)
    return jitted._jitted, args, kwargs, run.returned, run.raised


class _InBlock:
    """A jitted call in a block, once JAX's call returned: the trace it ran (JAX's `.trace`,
    from its cache now) recorded where the block has not (see_trace).

    NB: holds the jitted object weakly: while the call runs nothing of ours that the
    collector tracks refers to it (JAX's leak checker walks the referrers of a tracer).
    """
    __slots__ = ("jitted_ref", "entry", "args", "kwargs", "traces", "filtered")

    def __init__(self, jitted_ref: Callable, entry: _JitEntry, args: tuple,
                 kwargs: dict | None):
        self.jitted_ref, self.entry, self.args, self.kwargs = jitted_ref, entry, args, kwargs or {}
        self.traces = entry._traces
        self.filtered = _i.FilteredRun()

    def returned(self, out: Any) -> Any:
        try:
            jax_jitted = self.jitted_ref()._jitted
            args, kwargs = self.args, self.kwargs
            self.entry.traced(jax_jitted.trace(*args, **kwargs), self.traces, jax_jitted, args,
                              kwargs)
        except BaseException as e:
            self.filtered.raised(e)
            raise
        return self.filtered.returned(out)

    def raised(self, error: BaseException) -> None:
        """JAX's call raised (its trace, or the program)."""
        self.filtered.raised(error)


def _jit_entry(fun: Any, options: Options, kwargs: dict) -> _JitEntry | None:
    """The one entry for (fun, options), made on first use; None when JAX must see fun itself."""
    if not callable(fun) or inspect.isgeneratorfunction(fun):  # JAX's check_callable refuses
        return None
    try:
        entries = _JIT_ENTRIES.get(fun)
        hash(fun)
    except TypeError:  # not weak-referenceable or not hashable: JAX's own errors apply
        return None
    if entries is None:
        entries = _JIT_ENTRIES[fun] = {}
    entry = entries.get(options)
    if entry is None:
        entry = entries[options] = _JitEntry(fun, options, kwargs)
        note_user_jit(fun)  # the user's jit of jnp.sin is theirs, not a jnp operation
    return entry


def _check_before_trace(entry_ref: Callable, args: tuple, kwargs: dict) -> None:
    """On a jit cache miss while recording: record now a call whose unflatten will raise.

    `args` are what JAX binds: static arguments are stand-ins (leaves). When
    the round trip of a custom node raises, JAX's own unflatten of it raises
    the same before the function is traced: the call is recorded as failed
    with that exception and the check's findings. JAX's exception is the one
    the user gets. Otherwise nothing happens here: the trace records the call.
    Outside record(), or inside a recorded call (a level of it), nothing happens.
    """
    if state.session is None or state.call is not None:
        return
    entry = entry_ref()
    fun, options = entry._fun(), entry._options
    note_jit_arguments(fun, args, kwargs)  # stages compile at the arguments' shardings
    # the arguments' values, for the call's input trees (and its replay)
    note_jit_values(fun, args, kwargs, state.session.replays)
    raised: list[BaseException] = []
    check_inputs(args, kwargs, argument_names(fun, args), raised)
    if not raised:
        # An argument that is not an array (a function or a string inside an object):
        # JAX raises TypeError before tracing.
        with recording_off():  # JAX's check, run again, records nothing and binds no hook
            error = non_array_argument_error(entry.jit_again, args, kwargs)
        if error is None:
            return
        raised.append(error)
    record_failed_call("jit", fun, options, args, kwargs, raised[0])
