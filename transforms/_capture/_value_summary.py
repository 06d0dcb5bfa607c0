"""A concrete array's values as a ValueSummary, made on a host copy: NumPy's own print of
small arrays, and for any size statistics over the finite values with counts of NaN, Inf and
zeros. What call inputs and outputs, replays and the NaN search show."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..model import ValueRecord, ValueSummary
from ._values import leaf_value

__all__ = ["PRINTED_SIZE", "SUMMARY_MAX_SIZE", "leaf_facts", "summarize_array"]

# Arrays with at most this many elements are printed as NumPy prints them.
PRINTED_SIZE = 64
# Bigger arrays than this get no summary: a host copy and its reductions would cost more
# than the recording around them (shape and dtype are in the aval already).
SUMMARY_MAX_SIZE = 1_000_000

_add, _minimum, _maximum = np.add.reduce, np.minimum.reduce, np.maximum.reduce


def summarize_array(x: Any, max_size: int = SUMMARY_MAX_SIZE,
                    origin: str = "") -> ValueSummary | None:
    """x's values (an array or NumPy value, on any device) summarised on the host; None for
    what has no numeric values (tokens, keys, strings) or more than max_size elements."""
    size = getattr(x, "size", None)
    if not isinstance(size, int) or size > max_size or isinstance(x, bool):
        return None
    a = np.asarray(x)
    kind = a.dtype.kind
    if kind not in "biuf":  # complex, bfloat16 and float8 (kind "V"), strings
        return _printed_only(a, origin) if kind == "c" or a.dtype.name.startswith(
            ("bfloat", "float8")) else None
    text = _numpy_text(a) if size <= PRINTED_SIZE else ""
    shape = tuple(int(d) for d in a.shape)
    if size == 0:
        return ValueSummary(shape, a.dtype.name, text, origin=origin)
    zeros = size - int(np.count_nonzero(a))
    if kind == "b":
        return ValueSummary(shape, a.dtype.name, text, 0.0 if zeros else 1.0,
                            1.0 if zeros < size else 0.0, zeros=zeros, origin=origin)
    nan = inf = 0
    finite = a
    if kind == "f":
        lo, hi = _minimum(a, axis=None), _maximum(a, axis=None)
        if not (np.isfinite(lo) and np.isfinite(hi)):
            nan = int(np.count_nonzero(np.isnan(a)))
            inf = int(np.count_nonzero(np.isinf(a)))
            finite = a[np.isfinite(a)]
    if finite.size == 0:
        return ValueSummary(shape, a.dtype.name, text, nan=nan, inf=inf, zeros=zeros,
                            origin=origin)
    mean = _add(finite, axis=None, dtype=np.float64) / finite.size
    deviations = np.subtract(finite.reshape(-1), mean, dtype=np.float64)
    std = np.sqrt(_add(deviations * deviations, axis=None) / finite.size)
    return ValueSummary(shape, a.dtype.name, text, _number(_minimum(finite, axis=None)),
                        _number(_maximum(finite, axis=None)), _number(mean), _number(std),
                        nan, inf, zeros, origin)


def _printed_only(a: np.ndarray, origin: str) -> ValueSummary:
    text = _numpy_text(a) if a.size <= PRINTED_SIZE else ""
    return ValueSummary(tuple(int(d) for d in a.shape), a.dtype.name, text, origin=origin)


def _numpy_text(a: np.ndarray) -> str:
    """As `print(a)` shows it (the program's print options apply), never elided."""
    return np.array2string(a, threshold=PRINTED_SIZE + 1)


def _number(v: Any) -> float | None:
    """A finite float for the record (JSON has no NaN); None otherwise."""
    f = float(v)
    return f if np.isfinite(f) else None


def leaf_facts(x: Any, rec: ValueRecord) -> tuple[str | None, ValueSummary | None]:
    """A pytree leaf's value text and summary: a concrete array's printed as NumPy prints it
    when small, its statistics text (`leaf_value`) otherwise; a tracer's or a Python
    value's as `leaf_value` gives them, without a summary."""
    if rec.is_tracer or rec.kind != "array":
        return leaf_value(x, rec), None
    try:
        summary = summarize_array(x)
    except Exception as e:  # e.g. a deleted or donated buffer
        return f"<unavailable: {type(e).__name__}>", None
    if summary is not None and summary.text:
        return summary.text.replace("\n", ""), summary
    return leaf_value(x, rec), summary
