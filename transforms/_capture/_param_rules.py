"""Per-primitive parameter summaries, one rule per primitive in a table.

A rule turns a primitive's params into short (name, text) pairs and names the
sub-jaxprs to keep. Primitives without a rule get `default_rule`.
"""
from __future__ import annotations

import enum
import marshal
from typing import Any, Callable

import numpy as np

from .._common import BoundedCache, cut, safe_str
from .._jax import inline_token
from ._jaxpr_records import is_jaxpr
from ._sharding_text import mesh_text, sharding_text, spec_text

ParamPairs = tuple[tuple[str, str], ...]
SubJaxprs = list[tuple[str, Any]]
Rule = Callable[[dict], tuple[ParamPairs, SubJaxprs]]

_PLAIN = (int, bool, float, type(None))
_MAX_PARAM_TEXT = 100


_formatted: BoundedCache = BoundedCache(50_000)
# Values safe to keep as cache keys: plain data, never a jaxpr, function or array.
_CACHEABLE = (tuple, str, np.dtype, enum.Enum)


_enum_texts: dict[Any, str] = {}


def format_param(value: Any) -> str:
    kind = type(value)
    if kind in _PLAIN:
        return str(value)
    if kind is str:
        return repr(value)
    if isinstance(value, enum.Enum):  # e.g. jit's Inline on jax 0.12: a module-level singleton
        text = _enum_texts.get(value)
        if text is None:
            text = _enum_texts[value] = _format_param(value)
        return text
    if not isinstance(value, _CACHEABLE):
        return _format_param(value)
    # Params repeat (dtypes, dimension numbers): print each distinct value once.
    # NB: keyed with the element types too: (0,) == (False,) == (0.0,) in Python.
    try:
        key = (value, _types_of(value))
        text = _formatted.get(key)
    except TypeError:  # unhashable
        return _format_param(value)
    if text is None:
        text = _format_param(value)
        if _plain_data(value):  # never keep a jaxpr or function alive as a key
            _formatted.put(key, text)
    return text


def _types_of(value: Any) -> Any:
    if type(value) is tuple:
        return tuple(map(_types_of, value))
    return type(value)


def _plain_data(value: Any) -> bool:
    if type(value) is tuple:
        return all(_plain_data(v) for v in value)
    return type(value) in _PLAIN or isinstance(value, (str, np.dtype, enum.Enum))


def _jaxpr_text(jaxpr: Any) -> str:
    """`{jaxpr: sin, cos}` for a small body, `{jaxpr: 57 eqns}` for a larger one."""
    eqns = getattr(jaxpr, "jaxpr", jaxpr).eqns
    if 0 < len(eqns) <= 4:
        return "{jaxpr: " + ", ".join([e.primitive.name for e in eqns]) + "}"
    return f"{{jaxpr: {len(eqns)} eqns}}"


def _format_param(value: Any) -> str:
    if type(value) is str:
        return repr(value)
    if is_jaxpr(value):
        return _jaxpr_text(value)
    if callable(value) and not isinstance(value, type):
        return f"<fn {getattr(value, '__name__', type(value).__name__)}>"
    if type(value) in (tuple, list) and _holds_numpy_scalars(value):
        return cut(_sequence_text(value), _MAX_PARAM_TEXT)
    return safe_str(value, _MAX_PARAM_TEXT)


def _holds_numpy_scalars(value: Any) -> bool:
    return any(isinstance(v, np.generic) or (type(v) in (tuple, list) and _holds_numpy_scalars(v))
               for v in value)


def _sequence_text(value: Any) -> str:
    """A tuple or list as Python prints it, NumPy scalars as their numbers (`2`, not
    `np.int64(2)`: JAX's params hold them where a jnp function computed a size)."""
    if type(value) not in (tuple, list):
        return str(value) if isinstance(value, np.generic) else safe_str(value, _MAX_PARAM_TEXT)
    items = ", ".join(_sequence_text(v) for v in value)
    if type(value) is list:
        return f"[{items}]"
    return f"({items},)" if len(value) == 1 else f"({items})"


def _jaxprs_in(name: str, value: Any) -> list[tuple[str, Any]]:
    if is_jaxpr(value):
        return [(name, value)]
    if type(value) in (tuple, list) and value and is_jaxpr(value[0]):
        return [(f"{name}[{i}]", item) for i, item in enumerate(value) if is_jaxpr(item)]
    return []


def default_rule(params: dict) -> tuple[ParamPairs, SubJaxprs]:
    pairs = []
    jaxprs: SubJaxprs = []
    for key, value in params.items():
        if type(value) in _PLAIN:  # the common case, kept cheap
            pairs.append((key, str(value)))
            continue
        if key == "subfuns":  # WrappedFuns of call primitives: not data
            continue
        found = _jaxprs_in(key, value)
        if found:
            jaxprs.extend(found)
            pairs.append((key, ", ".join(_jaxpr_text(j) for _, j in found)))
        else:
            pairs.append((key, format_param(value)))
    return tuple(pairs), jaxprs


def _jit_rule(params: dict) -> tuple[ParamPairs, SubJaxprs]:
    # Every jnp function is a jit step, so this rule is on the hot path: no
    # generic walk. Sharding and layout params say nothing on one device.
    jaxpr = params.get("jaxpr")
    pairs = [("name", format_param(params.get("name")))]
    if jaxpr is not None:
        pairs.append(("jaxpr", _jaxpr_text(jaxpr)))
    for key in ("inline", "keep_unused", "donated_invars"):
        if key in params:
            pairs.append((key, format_param(params[key])))
    return tuple(pairs), [("jaxpr", jaxpr)] if jaxpr is not None else []


def _custom_jvp_rule(params: dict) -> tuple[ParamPairs, SubJaxprs]:
    keep = {k: v for k, v in params.items()
            if k in ("name", "call_jaxpr", "num_consts", "symbolic_zeros")}
    return default_rule(keep)


def _sharding_constraint_rule(params: dict) -> tuple[ParamPairs, SubJaxprs]:
    # The sharding printed as spec on mesh: JAX's repr is cut off before the spec is readable.
    pairs = [("sharding", sharding_text(params["sharding"]))] if "sharding" in params else []
    if params.get("unconstrained_dims"):
        pairs.append(("unconstrained_dims", format_param(params["unconstrained_dims"])))
    return tuple(pairs), []


def _shard_map_rule(params: dict) -> tuple[ParamPairs, SubJaxprs]:
    """mesh, in_specs, out_specs (a thunk at eval level: called, as JAX has by then)."""
    pairs, jaxprs = default_rule({k: v for k, v in params.items()
                                  if k not in ("mesh", "debug_info", "out_specs_thunk")})
    readable = []
    if "mesh" in params:
        readable.append(("mesh", mesh_text(params["mesh"])))
    thunk = params.get("out_specs_thunk")
    if callable(thunk):
        try:
            readable.append(("out_specs", spec_text(thunk())))
        except Exception:  # not yet known: JAX fills it while tracing the body
            pass
    return tuple(readable) + pairs, jaxprs


RULES: dict[str, Rule] = {
    "sharding_constraint": _sharding_constraint_rule,
    "shard_map": _shard_map_rule,
    "jit": _jit_rule,
    "pjit": _jit_rule,
    "custom_jvp_call": _custom_jvp_rule,
}


_interned_pairs: BoundedCache = BoundedCache(50_000)
# The pairs of param sets of plain data, by params_key (read by the C step core too): most steps repeat a few.
param_summaries: BoundedCache = BoundedCache(50_000)
_KEYED_SCALARS = frozenset({int, bool, float, type(None), str})
KEYED_OBJECTS = (np.dtype, enum.Enum)


def params_key(primitive_name: str, params: dict) -> tuple | None:
    """A key for params of plain data only (None for any other: a jaxpr, a function, a
    sharding...), exact about types: a tuple by its `marshal` bytes, which tell 0, False
    and 0.0 apart (Python's == does not), a scalar with its type."""
    key: list[Any] = [primitive_name]
    append = key.append
    for name, value in params.items():
        kind = type(value)
        if kind is tuple:
            try:
                value = marshal.dumps(value)
            except ValueError:  # holds something marshal does not write (a dtype...)
                return None
        elif kind not in _KEYED_SCALARS and not isinstance(value, KEYED_OBJECTS):
            return None
        append(name)
        append(kind)
        append(value)
    return tuple(key)


def jit_pairs_key(params: dict) -> tuple | None:
    """A key for the pairs `_jit_rule` makes of a jit's params: what it prints (the name,
    the flags, the body's text); None without a body.

    NB: not params_key's exact one: JAX's flags are bools (or, for inline on 0.12, an
    enum member) and the name a str, so == tells them apart; this runs once per jit step
    under vmap and grad, whose jaxprs JAX makes anew in every call."""
    jaxpr = params.get("jaxpr")
    if jaxpr is None:
        return None
    get = params.get
    return (get("name"), inline_token(params), get("keep_unused"), get("donated_invars"),
            _jaxpr_text(jaxpr))


def summarize_params(primitive_name: str, params: dict) -> tuple[ParamPairs, SubJaxprs]:
    if not params:
        return (), []
    key = params_key(primitive_name, params)
    if key is not None:
        hit = param_summaries.get(key)
        if hit is not None:
            return hit, []
    pairs, jaxprs = RULES.get(primitive_name, default_rule)(params)
    # Most steps repeat a few param sets: share one tuple (memory per step).
    shared = _interned_pairs.get(pairs)
    if shared is None:
        shared = _interned_pairs.put(pairs, pairs)
    if key is not None and not jaxprs:
        param_summaries.put(key, shared)
    return shared, jaxprs
