"""Drop-in `jax.*` transformations that record while a session is active.

Each wrapper hands JAX a function (`_level_entry`) which, once JAX calls it
inside the transformation, records the level and runs the user's function
under a RecordingTrace. Arguments and results pass through untouched, so
results, pytree structures and exceptions are JAX's own.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import weakref
from dataclasses import dataclass
from typing import Any, Callable

import jax

from . import _interpreters as _i
from ._diagnose import check_inputs, non_array_argument_error
from ._recorder import (
    TRACE_KINDS,
    _state,
    check_retrace,
    function_name,
    note_jit_arguments,
    recording_off,
    run_level,
)
from ._trees import JACOBIAN_NESTING, parameter_names

# Transformations whose backward pass runs at the enclosing level after the
# user's function returns.
_BACKWARD_KINDS = frozenset({"grad", "value_and_grad", "vjp", "jacrev", "hessian"})


@dataclass(frozen=True, eq=False)
class TransformSpec:
    """What a wrapper was built from: read by stage capture to rebuild the pipeline."""
    kind: str
    fun: Callable                 # the user's function (possibly another wrapper)
    transformed: Callable         # jax.<kind>(fun, ...) as built, callable on the call's args
    options: tuple
    settings: dict | None = None  # the options as given (options holds their reprs)

    @property
    def name(self) -> str:
        return function_name(self.fun)


def spec_of(f: Any) -> TransformSpec | None:
    """The TransformSpec of one of our wrappers (or of a jit built on one), else None."""
    spec = getattr(f, "__transform_spec__", None)
    if spec is None:
        spec = getattr(getattr(f, "__wrapped__", None), "__transform_spec__", None)
    return spec


def _options(**kwargs: Any) -> tuple[tuple[str, str], ...]:
    return tuple((k, _option_text(v)) for k, v in kwargs.items())


def _option_text(value: Any) -> str:
    try:
        return repr(value)
    except Exception as e:  # a user object whose repr raises
        return f"<repr-error {type(e).__name__}>"


def _level_entry(fun: Callable, kind: str, options: tuple) -> Callable:
    """The function JAX traces: records one level, then runs `fun` under a recorder."""

    @functools.wraps(fun)
    def traced(*args, **kwargs):
        call = _state.call
        if call is None:
            return fun(*args, **kwargs)
        parent = _state.levels[-1] if _state.levels else None
        level = call.new_level(kind, _i.current_trace(), parent, function_name(fun), options)
        tape = call.watch_level(level, fun, args, kwargs)  # stages: what fun binds here
        try:
            out = run_level(level, fun, args, kwargs)
            if kind in JACOBIAN_NESTING and call.transform == kind and level.depth == 1:
                call.trees.note_function_output(out)  # the Jacobian's outer structure
            if tape is not None:
                tape.finish(out)
            return out
        except BaseException as e:
            if tape is not None:
                tape.abandon(e)
            raise
        finally:
            if parent is not None and kind in _BACKWARD_KINDS:
                parent.set_phase("backward")

    return traced


def _invoke(kind: str, fun: Any, options: tuple, transformed: Callable,
            args: tuple, kwargs: dict, forward: int | None = None,
            settings: dict | None = None) -> Any:
    """Call a JAX-transformed function, opening a recorded Call when none is open.

    `forward` is the index of the call a backward call belongs to (a vjp's).
    """
    session = _state.session
    if session is None:
        return transformed(*args, **kwargs)
    call = _state.call
    if call is not None:
        spec = TransformSpec(kind, fun, transformed, options, settings)
        call.nested_transform(spec, args, kwargs)  # its own stages and gradient trees
        out = _invoke_nested(call, kind, transformed, args, kwargs)
        call.nested_returned(spec, args, kwargs, out)
        return out
    call = session.begin_call(kind, fun, options, args, kwargs, parent=forward)
    call.spec = TransformSpec(kind, fun, transformed, options, settings)
    forward_call = session.call_by_index(forward) if forward is not None else None
    if forward_call is not None:  # None: dropped by record(max_steps=...)
        call.trees.forward = forward_call.trees
    _state.call = call
    try:
        outer = call.new_level("outer", _i.current_trace(), None)
        if kind == "vjp_backward":
            outer.set_phase("backward")
        tape = call.watch_outer(outer, args, kwargs)  # stages: what the call executed
        out = run_level(outer, transformed, args, kwargs)
        if tape is not None:
            tape.finish(out)
    except BaseException:
        call.finish(failed=True)
        raise
    finally:
        _state.call = None
    call.finish(out)
    return out


def _invoke_nested(call, kind: str, transformed: Callable, args: tuple, kwargs: dict) -> Any:
    parent = _state.levels[-1] if _state.levels else None
    current = _i.current_trace()
    try:
        if isinstance(current, _i.RecordingTrace):
            return transformed(*args, **kwargs)
        # A jax.* transformation sits between us and the enclosing recorder:
        # record its level too, so what it emits is seen.
        kind_seen = TRACE_KINDS.get(type(current).__name__, type(current).__name__)
        level = call.new_level(kind_seen, current, parent, options=(("origin", "'jax'"),))
        return run_level(level, transformed, args, kwargs)
    finally:
        if parent is not None:
            parent.set_phase("forward")


def _record_creation_error(kind: str, fun: Any, options: tuple, error: BaseException) -> None:
    session = _state.session
    if session is None or _state.call is not None:
        return
    call = session.begin_call(kind, fun, options, (), {})
    call.record_error(error, None)
    call.finish(failed=True)


def _make(kind: str, jax_transform: Callable, fun: Any, options: tuple,
          *args: Any, **kwargs: Any) -> Callable:
    """Build `jax_transform(level_entry(fun), ...)`, recording a creation error."""
    target = _level_entry(fun, kind, options) if callable(fun) else fun
    try:
        return jax_transform(target, *args, **kwargs)
    except BaseException as e:
        _record_creation_error(kind, fun, options, e)
        raise


def _wrap_call(kind: str, fun: Any, options: tuple, transformed: Callable,
               settings: dict | None = None) -> Callable:
    @_i.api_boundary
    @functools.wraps(transformed)
    def call(*args, **kwargs):
        return _invoke(kind, fun, options, transformed, args, kwargs, settings=settings)
    call.__wrapped__ = fun  # as jax.<transform>(f).__wrapped__ is f
    call.__transform_spec__ = TransformSpec(  # type: ignore[attr-defined]
        kind, fun, transformed, options, settings)
    return call


# --- the public transformations -----------------------------------------------

@_i.api_boundary
@functools.wraps(jax.grad)
def grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False, **kwargs):
    options = _options(argnums=argnums, has_aux=has_aux)
    transformed = _make("grad", jax.grad, fun, options, argnums=argnums, has_aux=has_aux,
                        holomorphic=holomorphic, allow_int=allow_int, **kwargs)
    return _wrap_call("grad", fun, options, transformed)


@_i.api_boundary
@functools.wraps(jax.value_and_grad)
def value_and_grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False, **kwargs):
    options = _options(argnums=argnums, has_aux=has_aux)
    transformed = _make("value_and_grad", jax.value_and_grad, fun, options, argnums=argnums,
                        has_aux=has_aux, holomorphic=holomorphic, allow_int=allow_int, **kwargs)
    return _wrap_call("value_and_grad", fun, options, transformed)


@_i.api_boundary
@functools.wraps(jax.vmap)
def vmap(fun, in_axes=0, out_axes=0, **kwargs):
    options = _options(in_axes=in_axes, out_axes=out_axes, **kwargs)
    transformed = _make("vmap", jax.vmap, fun, options, in_axes=in_axes, out_axes=out_axes,
                        **kwargs)
    return _wrap_call("vmap", fun, options, transformed,
                      dict(in_axes=in_axes, out_axes=out_axes, **kwargs))


@_i.api_boundary
@functools.wraps(jax.jacfwd)
def jacfwd(fun, argnums=0, has_aux=False, holomorphic=False):
    options = _options(argnums=argnums, has_aux=has_aux)
    transformed = _make("jacfwd", jax.jacfwd, fun, options, argnums=argnums, has_aux=has_aux,
                        holomorphic=holomorphic)
    return _wrap_call("jacfwd", fun, options, transformed)


@_i.api_boundary
@functools.wraps(jax.jacrev)
def jacrev(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False):
    options = _options(argnums=argnums, has_aux=has_aux)
    transformed = _make("jacrev", jax.jacrev, fun, options, argnums=argnums, has_aux=has_aux,
                        holomorphic=holomorphic, allow_int=allow_int)
    return _wrap_call("jacrev", fun, options, transformed)


@_i.api_boundary
@functools.wraps(jax.hessian)
def hessian(fun, argnums=0, has_aux=False, holomorphic=False):
    options = _options(argnums=argnums, has_aux=has_aux)
    transformed = _make("hessian", jax.hessian, fun, options, argnums=argnums, has_aux=has_aux,
                        holomorphic=holomorphic)
    return _wrap_call("hessian", fun, options, transformed)


@_i.api_boundary
@functools.wraps(jax.jvp)
def jvp(fun, primals, tangents, has_aux=False):
    options = _options(has_aux=has_aux)
    target = _level_entry(fun, "jvp", options) if callable(fun) else fun
    run = functools.partial(jax.jvp, target)
    return _invoke("jvp", fun, options, run, (primals, tangents), {"has_aux": has_aux})


@_i.api_boundary
@functools.wraps(jax.vjp)
def vjp(fun, *primals, **kwargs):
    options = _options(**kwargs)
    target = _level_entry(fun, "vjp", options) if callable(fun) else fun
    run = functools.partial(jax.vjp, target)
    return _invoke_keeping_origin("vjp", fun, options, run, primals, kwargs, _recording_pullback)


def _invoke_keeping_origin(kind: str, fun: Any, options: tuple, run: Callable, primals: tuple,
                           kwargs: dict, wrap: Callable) -> Any:
    """A top-level vjp/linearize call whose returned function (out[1]) records its own calls."""
    session = _state.session
    top_level = session is not None and _state.call is None
    out = _invoke(kind, fun, options, run, primals, kwargs)
    if not top_level or session is None:
        return out
    origin = (weakref.ref(session), len(session.session.calls) - 1, fun, options)
    return (out[0], wrap(out[1], origin)) + tuple(out[2:])


def _forward_index(origin: tuple) -> int | None:
    """The forward call's index, when it was recorded in the session now recording."""
    session_ref, index = origin[0], origin[1]
    return index if session_ref() is _state.session else None


# --- the pullback of a recorded vjp ------------------------------------------------


def _recording_pullback(pullback: Any, origin: tuple) -> Any:
    """JAX's VJP object with its function swapped for one whose product records.

    NB: the pullback stays an instance of JAX's own VJP class (a registered
    pytree node, so a subclass or wrapper would change its structure): only
    its `fun` field, a functools.partial, becomes a _PullbackPartial with the
    same function and arguments. A pullback of another form is returned as is.
    """
    fun = getattr(pullback, "fun", None)
    if not dataclasses.is_dataclass(pullback) or type(fun) is not functools.partial:
        return pullback
    recording = _PullbackPartial(fun.func, *fun.args, **fun.keywords)
    recording.origin = origin  # type: ignore[attr-defined]
    return dataclasses.replace(pullback, fun=recording)  # type: ignore[type-var]


class _PullbackPartial(functools.partial):
    """partial(_vjp3_callable, ...) whose product, the backward function, records its call."""

    def __call__(self, /, *args, **kwargs):
        backward = super().__call__(*args, **kwargs)
        # A jax.tree_util.Partial, as JAX's own: the backward function stays a child.
        return jax.tree_util.Partial(functools.partial(_run_backward, self.origin), backward)


def _run_backward(origin: tuple, backward: Callable, out_ct: Any) -> Any:
    """Run a vjp's backward function, recorded as a call whose parent is the forward call."""
    if _state.session is None:
        return backward(out_ct)
    _, _, fun, options = origin
    return _invoke("vjp_backward", fun, options, backward, (out_ct,), {},
                   forward=_forward_index(origin))


@_i.api_boundary
@functools.wraps(jax.linearize)
def linearize(fun, *primals, **kwargs):
    options = _options(**kwargs)
    target = _level_entry(fun, "linearize", options) if callable(fun) else fun
    run = functools.partial(jax.linearize, target)
    return _invoke_keeping_origin("linearize", fun, options, run, primals, kwargs,
                                  _recording_pushforward)


def _recording_pushforward(f_jvp: Any, origin: tuple) -> Any:
    """JAX's Partial, rebuilt around a function that records each push (a linearize_jvp call).

    NB: it stays a jax.tree_util.Partial with the same children (the
    linearization's constants): only its static function differs.
    """
    if type(f_jvp) is not jax.tree_util.Partial:
        return f_jvp
    push = functools.partial(_run_pushforward, origin, f_jvp.func, len(f_jvp.args))
    return jax.tree_util.Partial(push, *f_jvp.args, **f_jvp.keywords)


def _run_pushforward(origin: tuple, linear: Callable, num_consts: int, *args, **kwargs) -> Any:
    """Push tangents through a linearization, recorded with the linearize call as parent."""
    if _state.session is None:
        return linear(*args, **kwargs)
    _, _, fun, options = origin
    run = functools.partial(linear, *args[:num_consts])
    return _invoke("linearize_jvp", fun, options, run, args[num_consts:], kwargs,
                   forward=_forward_index(origin))


_NOT_SPECIFIED = object()


@_i.api_boundary
@functools.wraps(jax.jit)
def jit(fun=_NOT_SPECIFIED, /, **kwargs):
    """`jax.jit` itself, on a function that records its first trace of each signature.

    The result is JAX's own jitted object (`.lower`, `.trace`, `.eval_shape`,
    caching): cached calls run no Python of ours.
    """
    if fun is _NOT_SPECIFIED:  # used as @jit(static_argnums=...)
        jax.jit(**kwargs)  # raises now what JAX raises now for bad keywords
        return lambda f: jit(f, **kwargs)
    options = _options(**kwargs)
    if not callable(fun):
        return _make("jit", jax.jit, fun, options, **kwargs)
    entry = _jit_entry(fun, options, kwargs)
    jitted = jax.jit(entry, **kwargs)
    jitted.__wrapped__ = fun  # as jax.jit(f).__wrapped__ is f
    # NB: stages are rebuilt from the plain jax.jit, so capturing them never records.
    # NB: stages read JAX's own trace of this jitted object from its cache.
    spec = TransformSpec("jit", fun, jitted, options, dict(kwargs))
    entry.__transform_spec__ = jitted.__transform_spec__ = spec
    return jitted


def _jit_entry(fun: Callable, options: tuple, jit_kwargs: dict) -> Callable:
    level_entry = _level_entry(fun, "jit", options)

    @functools.wraps(fun)
    def traced(*args, **kwargs):
        check_retrace(fun)  # stage capture reads JAX's cache: a miss must not run fun
        session = _state.session
        if session is None or _state.call is not None:
            return level_entry(*args, **kwargs)
        # Traced outside any recorded call: this trace is the call.
        call = session.begin_call("jit", fun, options, args, kwargs)
        call.spec = traced.__transform_spec__
        _state.call = call
        try:
            out = level_entry(*args, **kwargs)
        except BaseException:
            call.finish(failed=True)
            raise
        finally:
            _state.call = None
        call.finish(out)
        return out

    def jit_again() -> Any:  # JAX's own argument checks, for the pre-trace check
        return jax.jit(traced, **jit_kwargs)

    signature = _pre_trace_signature(fun, functools.partial(_check_before_trace, fun, options,
                                                            jit_again))
    if signature is not None:
        traced.__signature__ = signature  # type: ignore[attr-defined]
    return traced


class _PreTraceSignature(inspect.Signature):
    """The jit entry's signature, whose `bind` runs the pre-trace check.

    NB: on every cache miss jax.jit binds `inspect.signature(fun)` (to name the
    arguments in its debug info) before it unflattens the arguments and calls
    `fun`. A custom node whose unflatten raises makes JAX raise right there,
    before our entry runs, so `bind` is our one moment before it. Cached calls
    never bind; binding itself is Signature's. Copies made by `replace` have
    no hook.
    """
    __slots__ = ("_on_bind",)

    def bind(self, /, *args, **kwargs):
        on_bind = getattr(self, "_on_bind", None)
        if on_bind is not None and _state.session is not None and _state.call is None:
            on_bind(args, kwargs)
        return super().bind(*args, **kwargs)


def _pre_trace_signature(fun: Callable, on_bind: Callable) -> _PreTraceSignature | None:
    try:
        signature = inspect.signature(fun)
    except (TypeError, ValueError):  # no signature: JAX names the arguments args[i]
        return None
    hooked = _PreTraceSignature(list(signature.parameters.values()),
                                return_annotation=signature.return_annotation,
                                __validate_parameters__=False)
    hooked._on_bind = on_bind  # type: ignore[attr-defined]
    return hooked


def _check_before_trace(fun: Callable, options: tuple, jit_again: Callable, args: tuple,
                        kwargs: dict) -> None:
    """On a jit cache miss while recording: record now a call whose unflatten will raise.

    `args` are what JAX binds: static arguments are stand-ins (leaves). When
    the round trip of a custom node raises, JAX's own unflatten of it raises
    the same before the function is traced: the call is recorded as failed
    with that exception and the check's findings. JAX's exception is the one
    the user gets. Otherwise nothing happens here: the trace records the call.
    """
    note_jit_arguments(fun, args, kwargs)  # stages compile at the arguments' shardings
    raised: list[BaseException] = []
    check_inputs(args, kwargs, parameter_names(fun, args), raised)
    if not raised:
        # An argument that is not an array (a function or a string inside an object):
        # JAX raises TypeError before tracing.
        with recording_off():  # JAX's check, run again, records nothing and binds no hook
            error = non_array_argument_error(jit_again, args, kwargs)
        if error is None:
            return
        raised.append(error)
    session = _state.session
    assert session is not None  # bind checks it before calling us
    call = session.begin_call("jit", fun, options, args, kwargs)
    call.record_error(raised[0], None)
    call.finish(failed=True)
