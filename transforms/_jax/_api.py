"""JAX's transformations and the objects they return: its own functions captured at import
(jax_own), the functions inside what jax.vjp / jax.linearize return, jit's cache key and
cache misses, its names for functions, the legacy mesh. Part of the door.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any, Callable

import jax

# NB: jax._src: jax.jit names a jaxpr (and its jitted object's `function_name`)
# with this: a partial is named after the function it wraps.
from jax._src.util import fun_name as _jax_fun_name


def legacy_mesh() -> Any:
    """The mesh of an enclosing `with Mesh(...):` block, or None.

    NB: jax._src.mesh: the legacy mesh context has no public getter; jit's
    tracing cache is keyed on it, so stages traced later re-enter it.
    """
    from jax._src import mesh as _mesh
    try:
        mesh = _mesh.thread_resources.env.physical_mesh
    except AttributeError:
        return None
    return None if getattr(mesh, "empty", True) else mesh



def jax_function_name(fun: Any) -> str:
    """The name JAX gives a function it traces (`my_function` for partial(my_function))."""
    return _jax_fun_name(fun)


# NB: a public JAX surface (jax.make_user_context, in 0.10.2 and 0.12): a value
# that JAX's tracing, lowering and compilation caches are keyed on, as they are
# on jax_enable_x64. Made once, at import (making one is not thread-safe).
_RECORDING_CACHE_KEY = jax.make_user_context(None)


def jit_disabled() -> bool:
    """Inside `jax.disable_jit()`: a jitted call runs its function eagerly and traces nothing
    (public config, read as JAX reads it at each call)."""
    return bool(jax.config.jax_disable_jit)  # type: ignore[attr-defined]  # set at runtime


def jit_cache_key(value: int | None) -> Any:
    """A context manager setting the value JAX's jit caches are keyed on (None: as outside)."""
    return _RECORDING_CACHE_KEY(value)



class JaxTransforms:
    """JAX's own transformations, as `jax.*` held them when transforms was imported.

    `workbench run` replaces jax.grad (...) with ours while a script runs (workbench/run/_runner.py
    patches `jax.*` only); ours call these, so they never call themselves.
    """

    def __init__(self) -> None:
        self.grad = jax.grad
        self.value_and_grad = jax.value_and_grad
        self.vmap = jax.vmap
        self.jit = jax.jit
        self.jvp = jax.jvp
        self.vjp = jax.vjp
        self.linearize = jax.linearize
        self.jacfwd = jax.jacfwd
        self.jacrev = jax.jacrev
        self.hessian = jax.hessian
        ours = [name for name, fun in vars(self).items()
                if getattr(fun, "__module__", "").startswith("transforms.")]
        if ours:
            raise ImportError(f"transforms imported while jax.{ours[0]} is patched with ours")


jax_own = JaxTransforms()



def swap_vjp_function(pullback: Any, swap: Callable[[functools.partial], Any]) -> bool:
    """Replace, in place, the function inside the pullback jax.vjp returns: swap(partial).

    NB: jax._src.api: the pullback is a VJP dataclass whose `fun` is
    partial(_vjp3_callable, ...); calling that gives the backward function (see
    swap_linear_function). A pullback of another form is left as JAX made it (False).
    """
    fun = getattr(pullback, "fun", None)
    if not (dataclasses.is_dataclass(pullback) and type(fun) is functools.partial):
        return False
    setattr(pullback, "fun", swap(fun))  # noqa: B010 - JAX's dataclass, swapped in place
    return True


def swap_linear_function(linear: Any, swap: Callable[[functools.partial, int], Any]) -> bool:
    """Replace, in place, the function inside jax.linearize's `f_jvp` (or a VJP's backward
    function): swap(partial, number of constants it is called with first).

    NB: jax._src.api: both are tree_util.Partial(_HashableCallableShim(partial(...)), *consts);
    only the innermost partial is swapped, so their pytree structure stays JAX's. Another
    form is left as JAX made it (False).
    """
    shim: Any = getattr(linear, "func", None)
    inner = getattr(shim, "fun", None)
    if not (type(linear) is jax.tree_util.Partial and type(inner) is functools.partial):
        return False
    shim.fun = swap(inner, len(linear.args))
    return True



class _MissSignature(inspect.Signature):
    """A signature whose `bind` calls a hook first (see cache_miss_signature)."""
    __slots__ = ("_on_miss",)

    def bind(self, /, *args, **kwargs):
        on_miss = getattr(self, "_on_miss", None)
        if on_miss is not None:
            on_miss(args, kwargs)
        return super().bind(*args, **kwargs)


def cache_miss_signature(fun: Callable, on_miss: Callable[[tuple, dict], None]
                         ) -> inspect.Signature | None:
    """fun's signature, to set as `__signature__` of what jax.jit is given, calling
    on_miss(args, kwargs) on each of jit's cache misses before JAX unflattens the arguments
    and traces; None for a function without a signature.

    NB: jax._src.api_util: on every cache miss jax.jit binds `inspect.signature(fun)` (to
    name the arguments in its debug info), and cached calls never do. Copies made by
    `replace` have no hook.
    """
    try:
        signature = inspect.signature(fun)
    except (TypeError, ValueError):  # no signature: JAX names the arguments args[i]
        return None
    hooked = _MissSignature(list(signature.parameters.values()),
                            return_annotation=signature.return_annotation,
                            __validate_parameters__=False)
    hooked._on_miss = on_miss  # type: ignore[attr-defined]
    return hooked
