"""Drop-in `jax.*` transformations that record while a session is active.

Outside a record() block each call goes to JAX's own transformed function
with no frame of ours (see _Transformed, _Dispatch, and _jit.py's entry).
Inside, each wrapper hands JAX a function (`_calls.level_entry`) which,
once JAX calls it inside the transformation, records the level and runs the
user's function under a RecordingTrace. What each kind is (its stages, its
trees, its backward pass) is its entry in `kinds.KINDS`.
"""
from __future__ import annotations

import functools
import types
from typing import Any, Callable

from .. import _jax as _i
from .._capture import Options, TransformSpec, Wrapper, count_if_unrecorded
from .._common import bracket
from .._jax import jax_own
from .._recording import build, level_entry, open_invoke, state
from ._jit import jit
from ._returned import open_keeping_origin, recording_pullback, recording_pushforward

__all__ = ["grad", "hessian", "jacfwd", "jacrev", "jit", "jvp", "linearize", "value_and_grad",
           "vjp", "vmap"]


# --- what grad(f), vmap(f), ... return ---------------------------------------------
#
# NB: a frame of ours between a caller and JAX changes what JAX's users see
# (stack depths, tracebacks), so the objects we hand out have a `__call__`
# *property*: Python calls the callable the getter returns after the getter
# has returned. Outside record() that is JAX's own transformed function (or
# JAX's own jax.jvp), so no frame of ours is on the stack while JAX runs.


class _Transformed(Wrapper):
    """transforms.grad(f) and its kin: JAX's own `jax.grad(f)` outside record(), recording inside.

    The recording variant, `jax.grad(<level entry of f>)` called through
    `_calls.invoke`, is built on its first recorded call. Metadata is jax.grad(f)'s;
    `__wrapped__` is the user's function, as jax.grad(f).__wrapped__ is.
    """

    def __init__(self, kind: str, fun: Any, options: Options, plain: Callable,
                 build_recording: Callable[[], Callable]):
        functools.update_wrapper(self, plain)
        self.__wrapped__ = fun
        self._plain = plain
        self._kind, self._fun, self._options = kind, fun, options
        self._build_recording = build_recording
        self._transformed: Callable | None = None

    @property
    def __call__(self) -> Callable:
        if state.session is None:
            count_if_unrecorded()
            return self._plain
        # NB: made per call, not kept (it would hold the wrapper: a reference cycle).
        return bracket(self._open_call, self._plain)

    def _open_call(self, args: tuple, kwargs: dict | None) -> tuple | None:
        """A recorded call of the wrapper: JAX's transformation of the level entry."""
        return open_invoke(self._kind, self._fun, self._options, self._recording_transform(),
                           args, kwargs)

    def _recording_transform(self) -> Callable:
        """jax.<kind>(level entry of f), built once: stage capture knows it by identity."""
        if self._transformed is None:
            self._transformed = self._build_recording()
        return self._transformed

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        # Bound as a method, as the function jax.grad(f) returns would be.
        return self if obj is None else types.MethodType(self, obj)

    @property
    def __transform_spec__(self) -> TransformSpec:
        return TransformSpec(self._kind, self._fun, self._recording_transform(), self._options)


def _transformed(kind: str, jax_transform: Callable, fun: Any, options: Options) -> Callable:
    """jax.<kind>(fun, **options.given), recording inside record()."""
    plain = build(kind, jax_transform, fun, options, **options.given)
    if not callable(fun):  # JAX accepted it (it raises later, when called): keep JAX's
        return plain

    def build_recording() -> Callable:
        return jax_transform(level_entry(fun, kind, options), **options.given)
    return _Transformed(kind, fun, options, plain, build_recording)


class _Dispatch:
    """transforms.jvp / vjp / linearize: JAX's own function outside record(), ours inside.

    NB: JAX's own, as captured at import (`_i.jax_own`): workbench's runner replaces
    `jax.<name>` with this object while a script runs.
    """

    def __init__(self, name: str, open_call: Callable[[tuple, dict | None], tuple | None]):
        functools.update_wrapper(self, getattr(jax_own, name))
        self._name = name
        # Arguments JAX would refuse go to JAX's own function (open_call returns None), so
        # the error is JAX's.
        self._recording = bracket(open_call, getattr(jax_own, name))

    @property
    def __call__(self) -> Callable:
        if state.session is None:
            count_if_unrecorded()
            return getattr(jax_own, self._name)
        return self._recording


# --- the public transformations -----------------------------------------------
#
# Each records the options a user reads (argnums, has_aux; all of vmap's) and
# hands JAX every keyword it was given (Options.given).

@_i.api_boundary
@functools.wraps(jax_own.grad)
def grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False, **kwargs):
    return _transformed("grad", jax_own.grad, fun, Options(
        dict(argnums=argnums, has_aux=has_aux), dict(
            argnums=argnums, has_aux=has_aux, holomorphic=holomorphic, allow_int=allow_int,
            **kwargs)))


@_i.api_boundary
@functools.wraps(jax_own.value_and_grad)
def value_and_grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False, **kwargs):
    return _transformed("value_and_grad", jax_own.value_and_grad, fun, Options(
        dict(argnums=argnums, has_aux=has_aux), dict(
            argnums=argnums, has_aux=has_aux, holomorphic=holomorphic, allow_int=allow_int,
            **kwargs)))


@_i.api_boundary
@functools.wraps(jax_own.vmap)
def vmap(fun, in_axes=0, out_axes=0, **kwargs):
    return _transformed("vmap", jax_own.vmap, fun,
                        Options(dict(in_axes=in_axes, out_axes=out_axes, **kwargs)))


@_i.api_boundary
@functools.wraps(jax_own.jacfwd)
def jacfwd(fun, argnums=0, has_aux=False, holomorphic=False):
    return _transformed("jacfwd", jax_own.jacfwd, fun, Options(
        dict(argnums=argnums, has_aux=has_aux),
        dict(argnums=argnums, has_aux=has_aux, holomorphic=holomorphic)))


@_i.api_boundary
@functools.wraps(jax_own.jacrev)
def jacrev(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False):
    return _transformed("jacrev", jax_own.jacrev, fun, Options(
        dict(argnums=argnums, has_aux=has_aux),
        dict(argnums=argnums, has_aux=has_aux, holomorphic=holomorphic, allow_int=allow_int)))


@_i.api_boundary
@functools.wraps(jax_own.hessian)
def hessian(fun, argnums=0, has_aux=False, holomorphic=False):
    return _transformed("hessian", jax_own.hessian, fun, Options(
        dict(argnums=argnums, has_aux=has_aux),
        dict(argnums=argnums, has_aux=has_aux, holomorphic=holomorphic)))


def _bound(parameters: Callable, args: tuple, kwargs: dict | None) -> Any:
    """`parameters(*args, **kwargs)`, or None where the call would not bind."""
    try:
        return parameters(*args, **(kwargs or {}))
    except TypeError:
        return None


def _jvp_parameters(fun, primals, tangents, has_aux=False):
    return fun, primals, tangents, has_aux


def _vjp_parameters(fun, *primals, **kwargs):
    return fun, primals, kwargs


def _open_jvp(args: tuple, kwargs: dict | None) -> tuple | None:
    bound = _bound(_jvp_parameters, args, kwargs)
    if bound is None:
        return None
    fun, primals, tangents, has_aux = bound
    options = Options(dict(has_aux=has_aux))
    target = level_entry(fun, "jvp", options) if callable(fun) else fun
    run = functools.partial(jax_own.jvp, target)
    return open_invoke("jvp", fun, options, run, (primals, tangents), {"has_aux": has_aux})


def _open_vjp(args: tuple, kwargs: dict | None) -> tuple | None:
    bound = _bound(_vjp_parameters, args, kwargs)
    if bound is None:
        return None
    fun, primals, kwargs = bound
    options = Options(kwargs)
    target = level_entry(fun, "vjp", options) if callable(fun) else fun
    run = functools.partial(jax_own.vjp, target)
    return open_keeping_origin("vjp", fun, options, run, primals, kwargs, recording_pullback)


def _open_linearize(args: tuple, kwargs: dict | None) -> tuple | None:
    bound = _bound(_vjp_parameters, args, kwargs)
    if bound is None:
        return None
    fun, primals, kwargs = bound
    options = Options(kwargs)
    target = level_entry(fun, "linearize", options) if callable(fun) else fun
    run = functools.partial(jax_own.linearize, target)
    return open_keeping_origin("linearize", fun, options, run, primals, kwargs,
                               recording_pushforward)


jvp = _Dispatch("jvp", _open_jvp)
vjp = _Dispatch("vjp", _open_vjp)
linearize = _Dispatch("linearize", _open_linearize)
