"""Live values -> plain records, at the moment they exist: the Describer of one call.

Tracers are described by their attributes (aval, val/batch_dim, primal/tangent),
never by class name alone: classes and reprs change between JAX releases. Concrete
values are _values.py's.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable

import numpy as np

from .._common import BoundedCache
from .._jax import (
    Tracer,
    autodiff_parts,
    batched_parts,
    enclosing_traces,
    trace_has_ended,
    trace_of,
    tracer_shape,
    tracer_shapes,
)
from ..model import TRACES_BY_TRACER, ValueRecord
from ._state import state
from ._values import SMALL_VALUE_SIZE, _aval_texts, aval_text, describe_concrete

__all__ = ["SMALL_RECORD", "Describer"]



class _Seen(weakref.ref):
    """A leaked tracer's own record, and its key in the cache (dropped when it dies)."""
    __slots__ = ("key", "rec")
    key: int
    rec: ValueRecord


class _TraceSeen(weakref.ref):
    """One JAX trace whose tracers a call met: its level, and the records of its tracers
    by their facts. Dropped from the describer when the trace dies (its id is then free)."""
    __slots__ = ("key", "level", "unowned", "tracer_type", "shape", "parts", "records")
    key: int
    level: int | None
    unowned: bool             # no level of the call: its tracers may have leaked
    tracer_type: type | None  # the tracer class met first (traces make one class)
    shape: str
    parts: tuple
    records: Any  # a BoundedCache once the tracer class is known


def _forgetter(table: dict, *others: dict) -> Callable[[Any], None]:
    """A weakref callback dropping `seen` from table (unless a newer entry took its key),
    and its key from the others.

    NB: it holds the tables, not the describer: no cycle through the weak references."""
    def forget(seen: Any) -> None:
        key = seen.key
        if table.get(key) is seen:
            del table[key]
            for other in others:
                other.pop(key, None)
    return forget


# How a trace's tracers are keyed in Describer.fast (the C step core reads the numbers).
FLAT, BATCHED, PAIR = 0, 1, 2


# Records shared by every call of every session (equal facts, one record: a training
# loop's calls describe their values once), bounded: a full table starts again.
_CONCRETE: BoundedCache = BoundedCache(50_000)      # record -> the equal record kept
_ARRAYS: BoundedCache = BoundedCache(50_000)        # (class, aval) -> record, or SMALL_RECORD
_SMALL_ARRAYS: BoundedCache = BoundedCache(50_000)  # (class, aval, bytes) -> record
_SCALARS: BoundedCache = BoundedCache(50_000)       # (class, exact value, aval) -> record
# (level, trace class, tracer class) -> the records of such tracers by their facts (see
# Describer._describe_tracer): a level's tracers are described alike in every call.
_TRACER_RECORDS: BoundedCache = BoundedCache(10_000)
_RECORDS_PER_TABLE = 50_000


def _tracer_records(level: int | None, trace_type: type, tracer_type: type) -> BoundedCache:
    """The shared table of records of tracer_type's tracers on a trace_type trace at level.

    NB: its keys hold the ids of records (a tower's parts), kept alive by the records
    holding them as children: an id in a key is not reused while the key is there."""
    key = (level, trace_type, tracer_type)
    table = _TRACER_RECORDS.get(key)
    if table is None:
        table = _TRACER_RECORDS.put(key, BoundedCache(_RECORDS_PER_TABLE))
    return table


class Describer:
    """Describes values for one call: a tracer by its facts (its class, trace, aval and,
    for a tower, what it wraps), each distinct description one shared record.

    The output tracer of one step is the input of the next: equal facts give the same
    record, so steps share their records (small memory per step).

    NB: the cyclic GC walks every tracked object kept alive at each full pass, and a big
    trace keeps tens of thousands of tracers alive: the describer keeps nothing per
    tracer (no weak reference, no cache entry), only an entry per JAX trace met (a weak
    reference, removed when the trace dies) holding the records of its tracers by facts.
    """

    def __init__(self, level_of_trace: dict[int, int]):
        self.level_of_trace = level_of_trace  # id(JAX trace) -> level index
        self._traces: dict[int, _TraceSeen] = {}
        # id(JAX trace) -> (its tracer class, leak-free, FLAT/BATCHED/PAIR, its records by
        # facts): what the hot path reads (here and in the C step core), once the trace's
        # tracer class is known; dropped with the trace's entry in _traces.
        self.fast: dict[int, tuple[type, bool, int, dict]] = {}
        self._forget_trace = _forgetter(self._traces, self.fast)
        self._leaks: dict[int, _Seen] = {}
        self._forget = _forgetter(self._leaks)
        self.tuple_index: dict[tuple, int] = {}
        self.single_index: dict[int, int] = {}  # id(record) -> the number of (record,)
        self.tuples: list[tuple[ValueRecord, ...]] = []  # by describe_all's numbers
        # Concrete values' records, shared by every call (a loop's calls meet the same ones).
        self._concrete = _CONCRETE
        self.arrays = _ARRAYS
        self.small_arrays = _SMALL_ARRAYS
        self.scalars = _SCALARS
        self.leaked: list[ValueRecord] = []  # tracers of no transformation running now
        self.enclosing: set[int] | None = None  # ids of the traces the call runs inside

    def level_added(self, trace: Any) -> None:
        """`trace` became a level of the call: its entry (made when it was no level, or
        another level on the same trace) is made again when its tracers are next met."""
        self._traces.pop(id(trace), None)
        self.fast.pop(id(trace), None)

    def describe_all(self, xs: Any) -> int:
        """The records of a step's inputs or outputs, as a number in `tuples` (equal tuples
        share one): a step row of numbers and strings is one the cyclic GC stops tracking.

        NB: keyed by the records' ids: records are interned and kept alive by `tuples`."""
        recs = tuple(map(self.describe, xs))  # NB: xs may only iterate (JAX's FlatTree)
        if len(recs) == 1:
            return self._single(recs[0])
        key = tuple(map(id, recs))
        number = self.tuple_index.get(key)
        if number is None:
            number = self.tuple_index[key] = len(self.tuples)
            self.tuples.append(recs)
        return number

    def describe_one(self, x: Any) -> int:
        """describe_all((x,))."""
        return self._single(self._tracer(x, self.enclosing is not None) if isinstance(x, Tracer)
                            else self.concrete_record(x))

    def _single(self, rec: ValueRecord) -> int:
        number = self.single_index.get(id(rec))
        if number is None:
            number = self.single_index[id(rec)] = len(self.tuples)
            self.tuples.append((rec,))
        return number

    def describe(self, x: Any) -> ValueRecord:
        """A step's input or output, a call's argument or result."""
        if isinstance(x, Tracer):
            return self._tracer(x, self.enclosing is not None)
        return self.concrete_record(x)

    def concrete_record(self, x: Any) -> ValueRecord:
        """A concrete value's record: an array's by its class and aval (and, when small, its
        bytes), a scalar's by its class, aval and exact value, made once per call; anything
        else described each time."""
        if isinstance(x, _PYTHON_SCALARS):
            return self._scalar(x)
        aval = getattr(x, "aval", None)
        if aval is not None:
            key = (type(x), aval)
            try:
                rec = self.arrays.get(key)
            except TypeError:  # an aval kind that cannot be hashed
                return self._shared(describe_concrete(x))
            if rec is not None and rec is not SMALL_RECORD:
                return rec
            if rec is None and getattr(x, "size", SMALL_VALUE_SIZE + 1) > SMALL_VALUE_SIZE:
                rec = self.arrays.put(key, self._shared(describe_concrete(x)))
                return rec
            self.arrays.put(key, SMALL_RECORD)
            return self._small_array(x, key)
        return self._shared(describe_concrete(x))

    def _scalar(self, x: Any) -> ValueRecord:
        """A Python scalar or a JAX typed literal (jnp code binds many: `0.5 * x`)."""
        if isinstance(x, float):  # NB: by its bits: 0.0 == -0.0, and nan is no key
            exact: Any = float.hex(x)
        elif isinstance(x, complex):
            exact = (float.hex(x.real), float.hex(x.imag))
        else:
            exact = int(x)
        try:
            key = (type(x), exact, getattr(x, "aval", None))
            rec = self.scalars.get(key)
        except TypeError:  # an aval kind that cannot be hashed
            return self._shared(describe_concrete(x))
        if rec is None:
            rec = self.scalars.put(key, self._shared(describe_concrete(x)))
        return rec

    def _shared(self, rec: ValueRecord) -> ValueRecord:
        # Equal concrete descriptions (the same literal, the same small value) share a record.
        kept = self._concrete.get(rec)
        return kept if kept is not None else self._concrete.put(rec, rec)

    def _small_array(self, x: Any, key: tuple) -> ValueRecord:
        """A small array: its record by its bytes (its value printed once per call)."""
        try:
            value = np.asarray(x)
            by_bytes = (*key, value.tobytes())
            rec = self.small_arrays.get(by_bytes)
        except Exception:  # e.g. a deleted or donated buffer: described as it is
            return self._shared(describe_concrete(x))
        if rec is None:
            rec = self.small_arrays.put(by_bytes, self._shared(describe_concrete(x)))
        return rec

    def _has_leaked(self, x: Tracer) -> bool:
        trace = trace_of(x)
        if trace_has_ended(trace):
            return True
        if id(trace) in (self.enclosing or ()):
            return False
        # A trace the running level binds on that is none of the call's levels (a library's
        # own tracing inside the call: diffrax's solver under equinox) is no leak. NB: the
        # running level's trace, not JAX's current one (bind makes an eval trace current).
        levels = state.levels
        return not levels or id(trace) not in enclosing_traces(levels[-1].jax_trace)

    def _see(self, trace: Any) -> _TraceSeen:
        try:
            seen = _TraceSeen(trace, self._forget_trace)
        except TypeError:  # a trace kind that cannot be weakly referenced: not kept
            seen = _TraceSeen(_Unreferenced(), None)
        else:
            self._traces[id(trace)] = seen
        seen.key = id(trace)
        seen.level = level = self.level_of_trace.get(id(trace))
        seen.unowned = level is None
        seen.tracer_type = None
        seen.shape, seen.parts = "tracer", ()
        seen.records = BoundedCache(_RECORDS_PER_TABLE)  # shared once the tracer class is known
        return seen

    def _tracer(self, x: Tracer, check_leak: bool) -> ValueRecord:
        """The hot path of recording, one call per tracer met (and per part of a tower):
        a tracer of its trace's usual class whose facts were met before, kept flat."""
        entry = self.fast.get(id(trace_of(x)))
        if entry is not None and type(x) is entry[0] and (entry[1] or not check_leak):
            parts = entry[2]
            key: Any
            if parts == BATCHED:
                val, bdim = batched_parts(x)
                key = (x.aval, bdim, id(self._tracer(val, False) if isinstance(val, Tracer)
                                        else self.concrete_record(val)))
            elif parts == PAIR:
                primal, tangent = autodiff_parts(x)
                key = (x.aval,
                       id(self._tracer(primal, False) if isinstance(primal, Tracer)
                          else self.concrete_record(primal)),
                       id(self._tracer(tangent, False) if isinstance(tangent, Tracer)
                          else self.concrete_record(tangent)))
            else:
                key = x.aval
            try:
                rec = entry[3].get(key)
            except TypeError:  # an aval kind that cannot be hashed
                rec = None
            if rec is not None:
                return rec
        return self.new_tracer_record(x, check_leak)

    def new_tracer_record(self, x: Tracer, check_leak: bool) -> ValueRecord:
        """A tracer whose facts were not met before (or a leaked one): its record."""
        trace = trace_of(x)
        seen = self._traces.get(id(trace))
        if seen is None:
            seen = self._see(trace)
        if check_leak and seen.unowned and self._has_leaked(x):
            return self._leaked_record(x, seen)
        tracer_type = type(x)
        if seen.tracer_type is None:
            seen.tracer_type = tracer_type
            seen.shape = _tracer_shape(tracer_type, trace)
            seen.parts = _PARTS.get(seen.shape) or ()
            seen.records = _tracer_records(seen.level, type(trace), tracer_type)
            if self._traces.get(id(trace)) is seen:  # kept: its tracers take the hot path
                # NB: a trace the call runs inside (make_jaxpr's, an outer jit's) lives
                # until the call returns: its tracers cannot have leaked before then.
                leak_free = not seen.unowned or id(trace) in (self.enclosing or ())
                self.fast[id(trace)] = (tracer_type, leak_free,
                                        BATCHED if seen.parts is _BATCHED else
                                        PAIR if seen.parts else FLAT, seen.records)
        try:
            return self._describe_tracer(x, seen)
        except TypeError:  # an aval kind that cannot be hashed: keyed by its text
            return self._describe_tracer(x, seen, True)

    def _part(self, x: Any) -> ValueRecord:
        """What a tracer wraps (a tangent may live on a trace of JAX's own: no leak check)."""
        if isinstance(x, Tracer):
            return self._tracer(x, False)
        return self.concrete_record(x)

    def _describe_tracer(self, x: Tracer, seen: _TraceSeen, by_text: bool = False) -> ValueRecord:
        """A tracer's record, made once per distinct facts in its trace's table: keyed as
        `_tracer` looks them up (a tracer of another class than the trace's usual one
        with its class in front)."""
        tracer_type = type(x)
        aval = aval_text(x.aval) if by_text else x.aval
        prefix: tuple
        if tracer_type is seen.tracer_type:
            shape, parts, prefix = seen.shape, seen.parts, ()
        else:  # a second tracer class on one trace
            shape = _tracer_shape(tracer_type, trace_of(x))
            parts, prefix = _PARTS.get(shape) or (), (tracer_type,)
        key: Any
        children: tuple[tuple[str, ValueRecord], ...]
        bdim = None
        if parts is _BATCHED:
            val, bdim = batched_parts(x)
            child = self._part(val)
            key = (*prefix, aval, bdim, id(child))
            children = (("val", child),)
        elif parts:  # primal and tangent
            primal, tangent = autodiff_parts(x)
            first, second = self._part(primal), self._part(tangent)
            key = (*prefix, aval, id(first), id(second))
            children = (("primal", first), ("tangent", second))
        else:
            key = (*prefix, aval) if prefix else aval
            children = ()
        records = seen.records
        rec = records.get(key)
        if rec is None:
            # NB: a record keeps its children alive, so their ids in the keys stay theirs.
            text = aval if isinstance(aval, str) else (_aval_texts.get(aval) or aval_text(aval))
            rec = records.put(key, ValueRecord(
                shape, tracer_type.__name__, text, seen.level,
                bdim if isinstance(bdim, int) else None, None, children))
        return rec

    def _leaked_record(self, x: Tracer, seen: _TraceSeen) -> ValueRecord:
        """A leaked tracer: its own record (never shared), so steps using it are found."""
        hit = self._leaks.get(id(x))
        if hit is not None and hit() is x:
            return hit.rec
        rec = self._describe_tracer(x, seen, True)._replace()
        if len(self.leaked) < 10:
            self.leaked.append(rec)
        try:
            remembered = _Seen(x, self._forget)
        except TypeError:
            return rec
        remembered.key, remembered.rec = id(x), rec
        self._leaks[id(x)] = remembered
        return rec


class _Unreferenced:
    """Stands for a trace that cannot be weakly referenced (its records are not kept)."""


def _tracer_shape(tracer_type: type, trace: Any) -> str:
    return tracer_shapes.get((tracer_type, type(trace))) or tracer_shape(tracer_type, type(trace))


_PYTHON_SCALARS = (bool, int, float, complex)
SMALL_RECORD = ValueRecord("array", "", "")  # marks an array small enough to keep its value


_PARTS = {kind: t.children for kind, t in TRACES_BY_TRACER.items()}
_BATCHED = _PARTS["batched"]
