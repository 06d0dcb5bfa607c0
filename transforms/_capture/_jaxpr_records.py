"""Jaxprs as records: their text as JAX prints it, and the figures views need."""
from __future__ import annotations

from typing import Any

from .._common import message
from .._jax import ClosedJaxpr, Jaxpr
from ..model import JaxprRecord
from ._values import aval_text

__all__ = ["is_jaxpr", "jaxpr_record"]


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
