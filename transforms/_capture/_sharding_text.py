"""Shardings and meshes as text, for a step's params and a layout's summary: what a reader
needs (axis names and sizes, the PartitionSpec), read through the public `jax.sharding` objects'
attributes, or their own repr."""
from __future__ import annotations

from typing import Any

from .._common import safe_repr


def mesh_text(mesh: Any) -> str:
    """`Mesh('data': 4, 'model': 2)`: axis names and sizes, what a reader needs."""
    try:
        axes = ", ".join(f"{name!r}: {size}" for name, size in mesh.shape.items())
    except Exception:  # an abstract or unfamiliar mesh object: its own text
        return safe_repr(mesh)
    return f"Mesh({axes})"


def spec_text(spec: Any) -> str:
    """`P('data', None)`, as JAX prints a PartitionSpec (also inside tuples)."""
    return safe_repr(spec)


def sharding_text(sharding: Any) -> str:
    """`NamedSharding(P('data', None) on Mesh('data': 4, 'model': 2))`, or JAX's repr."""
    spec = getattr(sharding, "spec", None)
    mesh = getattr(sharding, "mesh", None)
    if spec is None or mesh is None:
        return safe_repr(sharding)
    return f"{type(sharding).__name__}({spec_text(spec)} on {mesh_text(mesh)})"
