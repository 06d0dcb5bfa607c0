"""Per-primitive parameter summaries, one rule per primitive in a table.

A rule turns a primitive's params into short (name, text) pairs and names the
sub-jaxprs to keep. Primitives without a rule get `default_rule`.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator

from ._snapshot import _safe_text, is_jaxpr

ParamPairs = tuple[tuple[str, str], ...]
SubJaxprs = list[tuple[str, Any]]
Rule = Callable[[dict], tuple[ParamPairs, SubJaxprs]]

_PLAIN = (int, bool, float, type(None))
_MAX_PARAM_TEXT = 100


def format_param(value: Any) -> str:
    if type(value) in _PLAIN:
        return str(value)
    if type(value) is str:
        return repr(value)
    if is_jaxpr(value):
        inner = getattr(value, "jaxpr", value)
        return f"{{jaxpr: {len(inner.eqns)} eqns}}"
    if callable(value) and not isinstance(value, type):
        return f"<fn {getattr(value, '__name__', type(value).__name__)}>"
    text = _safe_text(value)
    return text if len(text) <= _MAX_PARAM_TEXT else text[:_MAX_PARAM_TEXT - 1] + "…"


def _jaxprs_in(name: str, value: Any) -> Iterator[tuple[str, Any]]:
    if is_jaxpr(value):
        yield name, value
    elif isinstance(value, (tuple, list)) and value and is_jaxpr(value[0]):
        for i, item in enumerate(value):
            if is_jaxpr(item):
                yield f"{name}[{i}]", item


def default_rule(params: dict) -> tuple[ParamPairs, SubJaxprs]:
    pairs = []
    jaxprs: SubJaxprs = []
    for key, value in params.items():
        if key == "subfuns":  # WrappedFuns of call primitives: not data
            continue
        found = list(_jaxprs_in(key, value))
        if found:
            jaxprs.extend(found)
            pairs.append((key, ", ".join(format_param(j) for _, j in found)))
        else:
            pairs.append((key, format_param(value)))
    return tuple(pairs), jaxprs


def _jit_rule(params: dict) -> tuple[ParamPairs, SubJaxprs]:
    # Sharding and layout params of jit are long and say nothing on one device.
    keep = {k: v for k, v in params.items()
            if k in ("jaxpr", "name", "inline", "keep_unused", "donated_invars")}
    return default_rule(keep)


def _custom_jvp_rule(params: dict) -> tuple[ParamPairs, SubJaxprs]:
    keep = {k: v for k, v in params.items() if k in ("call_jaxpr", "num_consts", "symbolic_zeros")}
    return default_rule(keep)


RULES: dict[str, Rule] = {
    "jit": _jit_rule,
    "pjit": _jit_rule,
    "custom_jvp_call": _custom_jvp_rule,
}


def summarize_params(primitive_name: str, params: dict) -> tuple[ParamPairs, SubJaxprs]:
    if not params:
        return (), []
    return RULES.get(primitive_name, default_rule)(params)
