"""Live JAX objects -> plain records, at the moment they exist.

Tracers are described by their attributes (aval, val/batch_dim, primal/tangent),
never by class name alone: classes and reprs change between JAX releases.
"""
from __future__ import annotations

import sys
import weakref
from typing import Any

import numpy as np

from ._interpreters import JAX_DIR, PACKAGE_DIR, Tracer, trace_of
from .record import JaxprRecord, SourceLocation, ValueRecord

# Values with at most this many elements keep a printed summary.
SMALL_VALUE_SIZE = 8
_MAX_TEXT = 120


def aval_text(aval: Any) -> str:
    try:
        return aval.str_short()
    except Exception as e:  # an aval kind without str_short: keep its repr, say why
        return f"{type(aval).__name__}<{type(e).__name__}>"


class Describer:
    """Describes values for one call, reusing a record while its tracer is alive.

    The output tracer of one step is the input of the next: describing it once
    keeps recording cheap and the records shared (small memory per step).
    """

    def __init__(self, level_of_trace: dict[int, int]):
        self.level_of_trace = level_of_trace  # id(JAX trace) -> level index
        self._cache: dict[int, tuple[weakref.ref, ValueRecord]] = {}

    def describe(self, x: Any) -> ValueRecord:
        if isinstance(x, Tracer):
            hit = self._cache.get(id(x))
            if hit is not None and hit[0]() is x:
                return hit[1]
            rec = self._describe_tracer(x)
            self._cache[id(x)] = (weakref.ref(x), rec)
            return rec
        return describe_concrete(x)

    def _describe_tracer(self, x: Tracer) -> ValueRecord:
        trace = trace_of(x)
        level = self.level_of_trace.get(id(trace))
        aval = aval_text(x.aval)
        type_name = type(x).__name__
        if hasattr(x, "batch_dim") and hasattr(x, "val"):
            bdim = x.batch_dim
            return ValueRecord("batched", type_name, aval, level,
                               batch_dim=bdim if isinstance(bdim, int) else None,
                               children=(("val", self.describe(x.val)),))
        if hasattr(x, "primal") and hasattr(x, "tangent"):
            kind = "linearize" if hasattr(trace, "tangent_trace") else "jvp"
            return ValueRecord(kind, type_name, aval, level, children=(
                ("primal", self.describe(x.primal)), ("tangent", self.describe(x.tangent))))
        kind = "jaxpr" if hasattr(trace, "frame") else "tracer"
        return ValueRecord(kind, type_name, aval, level)


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
    return ValueRecord("python", type(x).__name__, _safe_text(x))


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
        arr = np.asarray(x)
    except Exception as e:  # e.g. a deleted or donated buffer
        return f"<unavailable: {type(e).__name__}>"
    text = np.array2string(arr, precision=6, separator=", ", threshold=SMALL_VALUE_SIZE)
    return text if len(text) <= _MAX_TEXT else text[:_MAX_TEXT - 1] + "…"


def _safe_text(x: Any) -> str:
    try:
        text = str(x)
    except Exception as e:
        return f"<repr-error {type(e).__name__}>"
    return text if len(text) <= _MAX_TEXT else text[:_MAX_TEXT - 1] + "…"


# --- jaxprs ------------------------------------------------------------------

def jaxpr_record(name: str, jaxpr: Any) -> JaxprRecord:
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    return JaxprRecord(
        name=name,
        text=_safe_text_full(jaxpr),
        eqn_count=len(inner.eqns),
        in_avals=tuple(aval_text(v.aval) for v in inner.invars),
        out_avals=tuple(aval_text(v.aval) for v in inner.outvars),
    )


def _safe_text_full(x: Any) -> str:
    try:
        return str(x)
    except Exception as e:
        return f"<repr-error {type(e).__name__}: {e}>"


def is_jaxpr(x: Any) -> bool:
    return hasattr(x, "eqns") and hasattr(x, "invars") or (
        hasattr(x, "jaxpr") and hasattr(x, "consts") and hasattr(getattr(x, "jaxpr"), "eqns"))


# --- source lines ------------------------------------------------------------

_EXCLUDED_PREFIXES = (JAX_DIR, PACKAGE_DIR, "<frozen ", sys.base_prefix + "/lib/python3")
_EXCLUDED_NAMES = ("contextlib.py", "functools.py")
_is_internal_code: dict[Any, bool] = {}
_locations: dict[tuple[Any, int], SourceLocation] = {}


def _internal(code) -> bool:
    hit = _is_internal_code.get(code)
    if hit is None:
        filename = code.co_filename
        hit = filename.startswith(_EXCLUDED_PREFIXES) or filename.endswith(_EXCLUDED_NAMES)
        if "/jaxlib/" in filename or "/site-packages/jax/" in filename:
            hit = True
        _is_internal_code[code] = hit
    return hit


def user_location(skip: int = 1) -> SourceLocation | None:
    """The innermost frame of user code on the current stack."""
    frame = sys._getframe(skip)
    while frame is not None and _internal(frame.f_code):
        frame = frame.f_back
    if frame is None:
        return None
    return location_of(frame.f_code, frame.f_lineno)


def location_of(code, line: int) -> SourceLocation:
    key = (code, line)
    loc = _locations.get(key)
    if loc is None:
        loc = SourceLocation(code.co_filename, line, code.co_name)
        _locations[key] = loc
    return loc


def traceback_location(tb) -> SourceLocation | None:
    """The innermost user frame of an exception's traceback."""
    found = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if not _internal(code):
            found = location_of(code, tb.tb_lineno)
        tb = tb.tb_next
    return found
