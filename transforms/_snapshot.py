"""Live JAX objects -> plain records, at the moment they exist.

Tracers are described by their attributes (aval, val/batch_dim, primal/tangent),
never by class name alone: classes and reprs change between JAX releases.
"""
from __future__ import annotations

import sys
import weakref
from typing import Any

import numpy as np

from ._interpreters import (JAX_DIR, PACKAGE_DIR, ClosedJaxpr, DropVar, Jaxpr, Literal, Tracer,
                            trace_of)
from .record import JaxprRecord, SourceLocation, ValueRecord

# Values with at most this many elements keep a printed summary.
SMALL_VALUE_SIZE = 8
_MAX_TEXT = 120


_aval_texts: dict[Any, str] = {}


def aval_text(aval: Any) -> str:
    # Avals hash cheaply (the hash is cached) but print slowly: print each once.
    try:
        text = _aval_texts.get(aval)
    except TypeError:  # an unhashable aval kind
        return _aval_text_uncached(aval)
    if text is None:
        if len(_aval_texts) > 100_000:
            _aval_texts.clear()
        text = _aval_texts[aval] = _aval_text_uncached(aval)
    return text


_short_aval_texts: dict[Any, str] = {}


def short_aval_text(aval: Any) -> str:
    """`f32[3]`, as jaxprs print avals."""
    try:
        text = _short_aval_texts.get(aval)
    except TypeError:
        return _aval_text_uncached(aval, short=True)
    if text is None:
        if len(_short_aval_texts) > 100_000:
            _short_aval_texts.clear()
        text = _short_aval_texts[aval] = _aval_text_uncached(aval, short=True)
    return text


def _aval_text_uncached(aval: Any, short: bool = False) -> str:
    try:
        return aval.str_short(short_dtypes=True) if short else aval.str_short()
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
        self._interned: dict[tuple, ValueRecord] = {}

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
            val = self.describe(x.val)
            return self._intern("batched", type_name, aval, level,
                                bdim if isinstance(bdim, int) else None, (("val", val),))
        if hasattr(x, "primal") and hasattr(x, "tangent"):
            kind = "linearize" if hasattr(trace, "tangent_trace") else "jvp"
            children = (("primal", self.describe(x.primal)), ("tangent", self.describe(x.tangent)))
            return self._intern(kind, type_name, aval, level, None, children)
        kind = "jaxpr" if hasattr(trace, "frame") else "tracer"
        return self._intern(kind, type_name, aval, level, None, ())

    def _intern(self, kind: str, type_name: str, aval: str, level: int | None,
                bdim: int | None, children: tuple) -> ValueRecord:
        # Equal descriptions share one record: cheaper to make and to keep.
        # Children are interned too, so their ids identify them.
        key = (kind, type_name, aval, level, bdim, tuple(id(c) for _, c in children))
        rec = self._interned.get(key)
        if rec is None:
            rec = self._interned[key] = ValueRecord(kind, type_name, aval, level, bdim,
                                                   None, children)
        return rec


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

def jaxpr_record(name: str, jaxpr: Any, full: bool = True) -> JaxprRecord:
    """A jaxpr as text: JAX's own printing, or with `full=False` a compact
    printing without params (`prim[…]`), about 10x cheaper, for jnp wrappers."""
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    return JaxprRecord(
        name=name,
        text=_safe_text_full(jaxpr) if full else compact_jaxpr_text(inner),
        eqn_count=len(inner.eqns),
        in_avals=tuple(aval_text(v.aval) for v in inner.invars),
        out_avals=tuple(aval_text(v.aval) for v in inner.outvars),
    )


def _safe_text_full(x: Any) -> str:
    try:
        return str(x)
    except Exception as e:
        return f"<repr-error {type(e).__name__}: {e}>"


_JAXPR_TYPES = (ClosedJaxpr, Jaxpr)


def is_jaxpr(x: Any) -> bool:
    return isinstance(x, _JAXPR_TYPES)


def compact_jaxpr_text(jaxpr: Any) -> str:
    """Print a jaxpr as JAX does, but with params elided as `[…]`."""
    names: dict[int, str] = {}

    def var(v: Any) -> str:
        if isinstance(v, Literal):
            return f"{v.val}:{short_aval_text(v.aval)}"
        if isinstance(v, DropVar):
            return "_"
        key = id(v)
        if key not in names:
            names[key] = _var_name(len(names))
        return names[key]

    def binder(v: Any) -> str:
        return f"{var(v)}:{short_aval_text(v.aval)}"

    consts = " ".join(binder(v) for v in jaxpr.constvars)
    args = " ".join(binder(v) for v in jaxpr.invars)
    lines = [f"{{ lambda {consts}{' ' if consts else ''}; {args}. let"]
    for eqn in jaxpr.eqns:
        outs = " ".join(binder(v) for v in eqn.outvars)
        shown = any(p is not None for p in eqn.params.values())
        mark = "[…]" if shown else ""
        ins = " ".join(var(v) for v in eqn.invars)
        lines.append(f"    {outs} = {eqn.primitive.name}{mark} {ins}".rstrip())
    outs = ", ".join(var(v) for v in jaxpr.outvars)
    lines.append(f"  in ({outs}{',' if len(jaxpr.outvars) == 1 else ''}) }}")
    return "\n".join(lines)


def _var_name(i: int) -> str:
    # JAX's scheme: a..z, then ba, bb, ...
    letters = "abcdefghijklmnopqrstuvwxyz"
    text = ""
    while True:
        text = letters[i % 26] + text
        i //= 26
        if i == 0:
            return text


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
    known = _is_internal_code
    while frame is not None:
        code = frame.f_code
        internal = known.get(code)
        if internal is None:
            internal = _internal(code)
        if not internal:
            break
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
