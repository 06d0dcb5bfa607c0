"""Live JAX objects -> plain records, at the moment they exist.

Tracers are described by their attributes (aval, val/batch_dim, primal/tangent),
never by class name alone: classes and reprs change between JAX releases.
"""
from __future__ import annotations

import os
import site
import sys
import sysconfig
import weakref
from types import FrameType
from typing import Any, Callable, Sequence

import numpy as np

from .._common import BoundedCache, cut, message, safe_str
from .._jax import (
    JAX_DIR,
    PACKAGE_DIR,
    ClosedJaxpr,
    Jaxpr,
    Tracer,
    autodiff_parts,
    batched_parts,
    context_traceback,
    trace_has_ended,
    trace_of,
    traceback_frames,
    tracer_shape,
    tracer_shapes,
)
from ..model import TRACES_BY_TRACER, JaxprRecord, SourceLocation, ValueRecord

# Values with at most this many elements keep a printed summary.
SMALL_VALUE_SIZE = 8
_MAX_TEXT = 120


_aval_texts: BoundedCache = BoundedCache(100_000)


def aval_text(aval: Any) -> str:
    # Avals hash cheaply (the hash is cached) but print slowly: print each once.
    try:
        text = _aval_texts.get(aval)
    except TypeError:  # an unhashable aval kind
        return _aval_text_uncached(aval)
    if text is None:
        text = _aval_texts.put(aval, _aval_text_uncached(aval))
    return text


def _aval_text_uncached(aval: Any) -> str:
    try:
        return aval.str_short()
    except Exception as e:  # an aval kind without str_short: keep its repr, say why
        return f"{type(aval).__name__}<{type(e).__name__}>"


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
        return id(trace) not in (self.enclosing or ()) or trace_has_ended(trace)

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


def describe_concrete(x: Any) -> ValueRecord:
    """An array or Python value: its aval and, when small, its value."""
    if isinstance(x, (bool, int, float, complex)):  # also JAX's typed literals
        aval = getattr(x, "aval", None)
        text = aval_text(aval) if aval is not None else _python_aval(x)
        return ValueRecord("python", type(x).__name__, text, value=_scalar_text(x))
    aval = getattr(x, "aval", None)
    if aval is not None:
        size = getattr(x, "size", SMALL_VALUE_SIZE + 1)
        value = _array_summary(x) if size <= SMALL_VALUE_SIZE else None
        return ValueRecord("array", type(x).__name__, aval_text(aval), value=value)
    if isinstance(x, np.ndarray):
        value = _array_summary(x) if x.size <= SMALL_VALUE_SIZE else None
        return ValueRecord("array", "ndarray", f"{x.dtype.name}{list(x.shape)}".replace(" ", ""),
                           value=value)
    # A symbolic Zero tangent, a token, or something new: keep what it says about itself.
    return ValueRecord("python", type(x).__name__, safe_str(x, _MAX_TEXT))


def _scalar_text(x: Any) -> str:
    for base in (bool, int, float, complex):
        if isinstance(x, base):
            return base.__repr__(x)
    return repr(x)


def _python_aval(x: Any) -> str:
    for base, text in ((bool, "bool[]"), (int, "int32[]"), (float, "float32[]")):
        if isinstance(x, base):
            return text
    return "complex64[]"


def _array_summary(x: Any) -> str | None:
    try:
        values = np.asarray(x).tolist()
    except Exception as e:  # e.g. a deleted or donated buffer
        return f"<unavailable: {type(e).__name__}>"
    return cut(_format_values(values), _MAX_TEXT)


# A concrete pytree leaf too big to print (call inputs and outputs, not every step's
# values) gets summary statistics up to this many elements.
STATS_MAX_SIZE = 1_000_000


def leaf_value(x: Any, rec: ValueRecord) -> str | None:
    """A concrete leaf's value text: its values when small (rec.value), else summary
    statistics as treescope shows them (`≈0.5 ±0.29 [≥0, ≤1]`, NaN/inf counted)."""
    if rec.value is not None or rec.is_tracer or rec.kind != "array":
        return rec.value
    size = getattr(x, "size", None)
    if not isinstance(size, int) or not 0 < size <= STATS_MAX_SIZE:
        return None
    try:
        a = np.asarray(x)
        kind = a.dtype.kind
        if kind == "b":
            return f"true: {int(_add(a, axis=None)):,} of {a.size:,}"
        if kind not in "iuf":  # complex, bfloat16 and float8 (kind "V"), strings...
            return None
        lo, hi = _minimum(a, axis=None), _maximum(a, axis=None)
        if kind != "f" or (_isfinite(lo) and _isfinite(hi)):
            return _statistics(a, lo, hi)  # every value finite: the usual case
        finite = a[_isfinite(a)]
        text = "no finite values" if finite.size == 0 else _statistics(finite)
        nan, inf = int(np.isnan(a).sum()), int(np.isinf(a).sum())
        return text + (f" nan:{nan:,}" if nan else "") + (f" inf:{inf:,}" if inf else "")
    except Exception as e:  # e.g. a deleted or donated buffer
        return f"<unavailable: {type(e).__name__}>"


# NB: the ufuncs' own reductions, not ndarray.mean/std/min/max, whose Python wrappers
# (numpy/_core/_methods.py) cost most of a small leaf's statistics: tens of us a leaf, for
# every leaf of every call, in and out.
_add, _minimum, _maximum, _multiply, _isfinite = np.add.reduce, np.minimum.reduce, \
    np.maximum.reduce, np.multiply, np.isfinite


def _statistics(a: np.ndarray, lo: Any = None, hi: Any = None) -> str:
    """`≈mean ±std [≥min, ≤max]` of finite values, the mean and spread accumulated in
    float64 (as a.mean(dtype=np.float64) and a.std(dtype=np.float64): a float16's own
    precision would print a spread of 0)."""
    count = a.size
    mean = _add(a, axis=None, dtype=np.float64) / count
    deviations = np.subtract(a.reshape(-1), mean, dtype=np.float64)
    squares = _multiply(deviations, deviations, out=deviations)
    std = np.sqrt(_add(squares, axis=None) / count)
    lo = _minimum(a, axis=None) if lo is None else lo
    hi = _maximum(a, axis=None) if hi is None else hi
    return f"≈{_g(mean)} ±{_g(std)} [≥{_g(lo)}, ≤{_g(hi)}]"


def _g(v: Any) -> str:
    return f"{float(v):.3g}"


def _format_values(values: Any) -> str:
    # NB: not np.array2string, which costs ~30 us a call on the recording path.
    if isinstance(values, list):
        return "[" + ", ".join(map(_format_values, values)) + "]"
    if isinstance(values, float):
        text = f"{values:.6g}"
        return text if any(c in text for c in ".en") else text + "."  # 0. as numpy prints it
    return repr(values)


# --- jaxprs ------------------------------------------------------------------

def jaxpr_record(name: str, jaxpr: Any) -> JaxprRecord:
    """A jaxpr's text as JAX prints it, and the figures views need."""
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    return JaxprRecord(
        name=name,
        text=_safe_text_full(jaxpr),
        eqn_count=len(inner.eqns),
        in_avals=tuple(aval_text(v.aval) for v in inner.invars),
        out_avals=tuple(aval_text(v.aval) for v in inner.outvars),
        primitives=tuple(e.primitive.name for e in inner.eqns),
    )


def _safe_text_full(x: Any) -> str:
    try:
        # NB: JAX colours a jaxpr's text when stdout is a terminal; records keep plain text.
        printer = getattr(x, "pretty_print", None)
        return printer(use_color=False) if printer is not None else str(x)
    except Exception as e:
        return f"<repr-error {type(e).__name__}: {message(e)}>"


_JAXPR_TYPES = (ClosedJaxpr, Jaxpr)


def is_jaxpr(x: Any) -> bool:
    return isinstance(x, _JAXPR_TYPES)


# --- source lines ------------------------------------------------------------
# A frame is JAX's or ours (skipped), an installed library's (skipped, the innermost
# kept as the location's `via`), or the user's (the location).

_INTERNAL, _LIBRARY, _USER = 1, 2, 0
_EXCLUDED_PREFIXES = (JAX_DIR, PACKAGE_DIR, "<frozen ", sys.base_prefix + "/lib/python3")
_EXCLUDED_NAMES = ("contextlib.py", "functools.py")


def _installed_prefixes() -> tuple[str, ...]:
    """Where installed libraries live: site-packages and the interpreters' prefixes."""
    found = set(site.getsitepackages()) | {site.getusersitepackages()}
    found |= {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    found |= {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}
    return tuple(sorted(os.path.join(os.path.abspath(p), "") for p in found if p))


_INSTALLED = _installed_prefixes()
_library_prefixes: tuple[str, ...] = _INSTALLED
_user_prefixes: tuple[str, ...] = ()
_setting: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
# Keyed by id(code), with the code kept to rule out a reused id: hashing a
# code object rehashes its bytecode (about 3 us), once per frame walked.
_code_kinds: BoundedCache = BoundedCache(100_000)  # id(code) -> (code, kind)
_locations: dict[tuple, tuple[Any, Any, SourceLocation]] = {}
# The same tables for the C step core, which walks frames known here without calling in.
CODE_KINDS, LOCATIONS = _code_kinds, _locations


def code_kind_numbers() -> dict[str, int]:
    """The numbers CODE_KINDS gives each kind of code."""
    return {"user": _USER, "internal": _INTERNAL, "library": _LIBRARY}


def set_user_code(user: Sequence[str] = (), library: Sequence[str] = ()) -> tuple:
    """Say what counts as user code in recorded locations; returns the previous setting.

    By default a file under site-packages or the interpreter's prefix is an
    installed library's, anything else (the script's folder, a checkout) the
    user's. Files under a `user` path are the user's even when installed (a
    package being worked on); files under a `library` path are a library's
    (a vendored framework). `set_user_code(*previous)` restores a setting.
    """
    global _user_prefixes, _library_prefixes, _setting
    previous = _setting
    _setting = (tuple(user), tuple(library))
    _user_prefixes = tuple(os.path.join(os.path.abspath(p), "") for p in user)
    _library_prefixes = tuple(os.path.join(os.path.abspath(p), "") for p in library) + _INSTALLED
    _code_kinds.clear()
    _file_kinds.clear()
    _staged.clear()
    return previous


def _kind_of_file(filename: str) -> int:
    if filename.startswith(_EXCLUDED_PREFIXES) or filename.endswith(_EXCLUDED_NAMES) \
            or "/jaxlib/" in filename or "/site-packages/jax/" in filename:
        return _INTERNAL
    if _user_prefixes and filename.startswith(_user_prefixes):
        return _USER
    if filename.startswith(_library_prefixes):
        return _LIBRARY
    return _USER


def _kind(code) -> int:
    kind = _kind_of_file(code.co_filename)
    _code_kinds.put(id(code), (code, kind))
    return kind


def _internal(code) -> bool:
    """JAX's, ours or an installed library's: not a line the user wrote."""
    hit = _code_kinds.get(id(code))
    return (hit[1] if hit is not None and hit[0] is code else _kind(code)) != _USER


def user_location(skip: int = 1) -> SourceLocation | None:
    """The innermost frame of user code on the current stack, with the innermost
    library frame on the way there as its `via` (a library-only stack: that frame)."""
    frame: FrameType | None = sys._getframe(skip)
    known = _code_kinds
    via: FrameType | None = None
    while frame is not None:
        code = frame.f_code
        hit = known.get(id(code))
        kind = hit[1] if hit is not None and hit[0] is code else _kind(code)
        if kind == _USER:
            break
        if kind == _LIBRARY and via is None:
            via = frame
        frame = frame.f_back
    if via is None:
        return location_of(frame.f_code, frame.f_lineno) if frame is not None else None
    # Reached through a library: it may be evaluating a jaxpr staged earlier (equinox's
    # closure conversion, diffrax's solver loop), whose equations JAX binds under the
    # traceback of where the user wrote them.
    tb = context_traceback()
    if tb is not None:
        staged = staged_location(tb)
        if staged is not None:
            return staged
    if frame is None:
        return location_of(via.f_code, via.f_lineno)
    return location_via(frame.f_code, frame.f_lineno, via.f_code, via.f_lineno)


_file_kinds: BoundedCache = BoundedCache(10_000)
_staged: BoundedCache = BoundedCache(10_000)  # id(traceback) -> (traceback, location)


def _file_kind(filename: str) -> int:
    kind = _file_kinds.get(filename)
    if kind is None:
        kind = _file_kinds.put(filename, _kind_of_file(filename))
    return kind


def staged_location(tb: Any) -> SourceLocation | None:
    """The user's line in a JAX traceback (once per traceback object), via its library line."""
    hit = _staged.get(id(tb))
    if hit is not None and hit[0] is tb:
        return hit[1]
    found = via = None
    for file, line, function in traceback_frames(tb):
        kind = _file_kind(file)
        if kind == _USER:
            found = SourceLocation(file, line, function, via)
            break
        if kind == _LIBRARY and via is None:
            via = SourceLocation(file, line, function)
    _staged.put(id(tb), (tb, found))  # the traceback kept: its id is not reused
    return found


def _function(code) -> str:
    """A method with its class (`MLP.__call__`: a model's modules read by type), any other
    function by its name (`loss`, not `test_step.<locals>.loss`)."""
    parts = getattr(code, "co_qualname", code.co_name).split(".")
    if len(parts) >= 2 and parts[-2] != "<locals>":
        return f"{parts[-2]}.{parts[-1]}"
    return code.co_name


def location_of(code, line: int) -> SourceLocation:
    key = (id(code), line)
    hit = _locations.get(key)
    if hit is None or hit[0] is not code:
        hit = _locations[key] = (code, None, SourceLocation(code.co_filename, line, _function(code)))
    return hit[2]


def location_via(code, line: int, via_code, via_line: int) -> SourceLocation:
    """A user line reached through a library's line: both interned, as `location_of`."""
    key = (id(code), line, id(via_code), via_line)
    hit = _locations.get(key)
    if hit is None or hit[0] is not code or hit[1] is not via_code:
        loc = SourceLocation(code.co_filename, line, _function(code), location_of(via_code, via_line))
        hit = _locations[key] = (code, via_code, loc)
    return hit[2]


def traceback_location(tb) -> SourceLocation | None:
    """The innermost user frame of an exception's traceback, via the innermost library
    frame below it; a traceback of library frames only: the innermost of those."""
    found = via = None
    while tb is not None:
        code = tb.tb_frame.f_code
        hit = _code_kinds.get(id(code))
        kind = hit[1] if hit is not None and hit[0] is code else _kind(code)
        if kind == _USER:
            found, via = (code, tb.tb_lineno), None
        elif kind == _LIBRARY:
            via = (code, tb.tb_lineno)
        tb = tb.tb_next
    if found is None:
        return location_of(*via) if via is not None else None
    return location_via(*found, *via) if via is not None else location_of(*found)
