"""JAX's tracers: their owning trace, what each kind holds (by attributes, not class names),
and the variable a jit trace's tracer stands for. Part of the door.
"""
from __future__ import annotations

import operator
from typing import Any

from jax import tree_util
from jax.extend import core as jex_core

from ._base import Tracer

# NB: a tracer's owning trace has no public accessor. attrgetter: this runs
# once per recorded tracer, and a C-level getter is the cheapest call there is.
trace_of = operator.attrgetter("_trace")

# What each kind of tracer wraps, as (value, batch dimension) and (primal, tangent):
# attributes of JAX's BatchTracer, JVPTracer and LinearizeTracer (no public accessor).
batched_parts = operator.attrgetter("val", "batch_dim")
autodiff_parts = operator.attrgetter("primal", "tangent")
# The same names for the C step core: (trace, aval, val, batch_dim, primal, tangent).
TRACER_PART_NAMES = ("_trace", "aval", "val", "batch_dim", "primal", "tangent")

# (tracer class, trace class) -> what the tracer holds; see tracer_shape.
tracer_shapes: dict[tuple[type, type], str] = {}


def tracer_shape(tracer_type: type, trace_type: type) -> str:
    """What a tracer holds, told by its attributes once per (tracer, trace) class:
    batched (val, batch_dim) | linearize, jvp (primal, tangent) | jaxpr | tracer.

    NB: by attributes, not class names: classes and reprs change between JAX releases.
    """
    key = (tracer_type, trace_type)
    shape = tracer_shapes.get(key)
    if shape is None:
        if _has_attrs(tracer_type, "batch_dim", "val"):
            shape = "batched"
        elif _has_attrs(tracer_type, "primal", "tangent"):
            # A linearize trace stages its tangents into a jaxpr trace of its own.
            shape = "linearize" if _has_attrs(trace_type, "tangent_trace") else "jvp"
        elif _has_attrs(trace_type, "frame"):
            shape = "jaxpr"
        else:
            shape = "tracer"
        tracer_shapes[key] = shape
    return shape


def staged_var(x: Any) -> Any:
    """The variable a jit trace's tracer stands for: the output of the equation JAX staged
    for it, the same object in the jaxpr the trace makes (None for any other value).

    NB: jax._src.interpreters.partial_eval: DynamicJaxprTracer.val is that Var (0.10, 0.12);
    by attribute and type, so a release that changes it gives None, never a wrong link.
    """
    if not isinstance(x, Tracer):
        return None
    v = getattr(x, "val", None)
    return v if type(v) is _Var else None


_Var = jex_core.Var


def is_variable(x: Any) -> bool:
    """Whether x is a variable of a jaxpr (what staged_var gives)."""
    return type(x) is _Var


def traced_avals(args: tuple, kwargs: dict) -> tuple:
    """The abstract values of the tracers among a jit trace's arguments, in JAX's
    flattening order: the trace's `in_avals` (its static arguments are no tracers)."""
    return tuple(x.aval for x in tree_util.tree_leaves((args, kwargs)) if isinstance(x, Tracer))


def _has_attrs(cls: type, *names: str) -> bool:
    # Tracer attributes are __slots__ or class annotations, not set on the class.
    for name in names:
        if not any(name in getattr(k, "__slots__", ()) or name in getattr(k, "__annotations__", {})
                   or name in vars(k) for k in cls.__mro__):
            return False
    return True


def trace_key(traced: Any) -> tuple[Any, tuple]:
    """(the jaxpr, its input avals) of what a jitted function's public `.trace` returned."""
    closed = traced.jaxpr
    return closed, tuple(closed.in_avals)
