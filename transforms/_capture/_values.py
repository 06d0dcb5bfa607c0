"""Concrete values as records: an array or Python value by its aval and, when small, its
values (describe_concrete); a concrete pytree leaf's value text or summary statistics
(leaf_value); avals as text, printed once each (aval_text)."""
from __future__ import annotations

from typing import Any

import numpy as np

from .._common import BoundedCache, cut, safe_str
from ..model import ValueRecord

__all__ = ["SMALL_VALUE_SIZE", "STATS_MAX_SIZE", "aval_text", "describe_concrete", "leaf_value"]

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
