"""What JAX says when it traces, lowers and compiles a jit, and what its caches are keyed
on: its monitoring events by name, the function each names, a trace's argument leaves as
its cache key sees them, the settings its caches are keyed on. Part of the door.
"""
from __future__ import annotations

import sys
from typing import Any, Callable, NamedTuple

import jax
from jax import tree_util

from .._common import safe_str
from ._api import legacy_mesh

__all__ = ["COMPILE_EVENTS", "LeafKey", "cache_config", "compiling_placements", "event_function",
           "event_phase", "jit_cache_size", "key_leaves", "listen_to_compiles", "path_text",
           "tree_def", "tree_text"]

# NB: JAX's monitoring event names (jax/_src/dispatch.py): one event per top-level trace
# (`jaxpr_trace_duration` in 0.10.2; `tracing_duration` in some releases), per
# lowering to an MLIR module and per XLA compilation, each with `fun_name`.
COMPILE_EVENTS: dict[str, str] = {
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/tracing_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/backend_compile_duration": "compile",
}


def event_phase(event: str) -> str | None:
    """"trace", "lower" or "compile" for JAX's event of that step of a jit; None for others."""
    return COMPILE_EVENTS.get(event)


def event_function(kwargs: dict) -> str:
    """The jitted function's name in an event's keywords: a lowering and a compilation name
    their module `jit(f)`, a trace names `f`."""
    name = str(kwargs.get("fun_name", "?"))
    if name.startswith("jit(") and name.endswith(")"):
        return name[4:-1]
    return name


# NB: jax._src.pjit._pjit_call_impl_python(*args, ...) compiles a jit called with `args`
# (its dynamic argument leaves, in order) after a miss of its C++ dispatch cache (0.10.2 to
# 0.12); its frame is on the stack while JAX reports the compilation.
_COMPILING_FRAME = "_pjit_call_impl_python"


def compiling_placements() -> tuple[str, ...] | None:
    """During JAX's compile event of a jit call, where each of its dynamic arguments sits:
    `cpu:1` (committed to that device), `uncommitted`, a sharding over several devices, or
    "" for a Python scalar; None when not compiling a call (`.lower().compile()`) or where
    this JAX compiles elsewhere."""
    frame: Any = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == _COMPILING_FRAME and code.co_filename.endswith("pjit.py"):
            args = frame.f_locals.get("args")
            return tuple(_placement(a) for a in args) if isinstance(args, tuple) else None
        frame = frame.f_back
    return None


def _placement(x: Any) -> str:
    if not isinstance(x, jax.Array):
        return ""
    if not getattr(x, "committed", True):
        return "uncommitted"
    devices: Any = x.sharding.device_set
    if len(devices) == 1:
        (device,) = devices
        return f"{device.platform}:{device.id}"
    return f"{type(x.sharding).__name__} over {len(devices)} devices"


def listen_to_compiles(callback: Callable[..., None]) -> None:
    """Call callback(event, seconds, **kwargs) at each of JAX's duration events (public)."""
    jax.monitoring.register_event_duration_secs_listener(callback)


class LeafKey(NamedTuple):
    """One traced argument leaf as the jit's cache key holds it."""
    path: tuple      # JAX's key path entries under the argument
    dtype: str
    shape: tuple[int, ...]
    weak_type: bool
    sharding: str    # "" for no sharding of its own in the abstract value


def key_leaves(value: Any) -> list[LeafKey]:
    """The array leaves of one argument of a jit being traced (tracers), with their paths."""
    leaves, _ = tree_util.tree_flatten_with_path(value)
    found = []
    for path, leaf in leaves:
        aval = getattr(leaf, "aval", None)
        if aval is None or not hasattr(aval, "shape"):
            continue
        found.append(LeafKey(path, str(aval.dtype), tuple(int(d) for d in aval.shape),
                             bool(getattr(aval, "weak_type", False)), _aval_sharding(aval)))
    return found


def path_text(path: tuple) -> str:
    """`['x'][0].w`, as JAX's keystr writes a key path (a key whose repr raises says so)."""
    return safe_str(_KeyPath(path), None)


class _KeyPath:
    """A key path printed by keystr (through safe_str: a user key's repr may raise)."""

    def __init__(self, path: tuple):
        self.path = path

    def __str__(self) -> str:
        return tree_util.keystr(self.path)


def tree_def(value: Any) -> Any:
    """The value's tree structure, hashable, equal where JAX's cache key's is."""
    return tree_util.tree_structure(value)


def tree_text(value: Any) -> str:
    """The argument's tree structure as JAX prints it (PyTreeDef(...)); the user's aux data
    whose repr raises says so, as the recording's other tree texts do."""
    return safe_str(tree_util.tree_structure(value), None)


def _aval_sharding(aval: Any) -> str:
    """The abstract value's sharding when it names mesh axes (explicit sharding), else ""."""
    sharding = getattr(aval, "sharding", None)
    spec = getattr(sharding, "spec", None)
    if spec is None or all(axis is None for axis in spec):
        return ""
    return str(spec)


def cache_config() -> tuple[tuple[str, str], ...]:
    """The settings JAX's jit caches are keyed on that users change: x64, the default
    device, the mesh of a `with mesh:` block."""
    mesh = legacy_mesh()
    config: Any = jax.config  # its options are attributes made at run time
    return (("jax_enable_x64", str(bool(config.jax_enable_x64))),
            ("jax_default_device", str(config.jax_default_device)),
            ("mesh", "" if mesh is None else str(dict(mesh.shape))))


def jit_cache_size(jitted: Any) -> int | None:
    """How many entries the jitted object's dispatch cache holds (None: not known).

    NB: `_cache_size` of JAX's jitted object (its C++ dispatch cache), as its tests read it.
    """
    size = getattr(jitted, "_cache_size", None)
    return size() if callable(size) else None
