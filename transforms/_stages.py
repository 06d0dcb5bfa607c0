"""Stages of a transformation pipeline, captured after a recorded call.

Each stage is built with JAX's own staging (`jax.make_jaxpr`); a stage JAX
cannot produce for these inputs is recorded as unavailable with the reason.
"""
from __future__ import annotations

from typing import Any, Callable

import jax

from ._snapshot import jaxpr_record
from .record import Stage


def _jaxpr_stage(name: str, title: str, fun: Callable, args: tuple, kwargs: dict) -> Stage:
    try:
        closed = jax.make_jaxpr(fun)(*args, **kwargs)
    except Exception as e:  # the stage failed; the others still count
        return Stage(name, title, available=False, reason=f"{type(e).__name__}: {e}")
    return Stage(name, title, jaxpr=jaxpr_record(name, closed))


def capture_stages(spec: Any, args: tuple, kwargs: dict) -> tuple[Stage, ...]:
    """The jaxpr of the user's function and of the transformed function."""
    return (
        _jaxpr_stage("f", f"jaxpr of {spec.name}", spec.fun, args, kwargs),
        _jaxpr_stage(spec.kind, f"{spec.kind}({spec.name})", spec.transformed, args, kwargs),
    )
