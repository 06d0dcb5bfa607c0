"""Drop-in `jax.*` transformations that record while a session is active.

Outside a record() block each call goes to JAX's own transformed function
with no frame of ours (see _Transformed, _Dispatch, _JitEntry). Inside, each
wrapper hands JAX a function (`_level_entry`) which, once JAX calls it
inside the transformation, records the level and runs the user's function
under a RecordingTrace. Arguments and results pass through untouched, so
results, pytree structures and exceptions are JAX's own.
"""
from __future__ import annotations

import functools
import inspect
import types
import weakref
from dataclasses import dataclass
from typing import Any, Callable

from . import _interpreters as _i
from ._diagnose import check_inputs, non_array_argument_error
from ._interpreters import jax_own
from ._recorder import (
    TRACE_KINDS,
    _state,
    check_retrace,
    function_name,
    note_jit_arguments,
    note_jit_traced,
    recording_off,
    retrace_refused,
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
    """The function JAX traces while recording: records one level, then runs `fun` under a recorder."""

    @functools.wraps(fun)
    def traced(*args, **kwargs):
        call = _state.call
        if call is None:
            return fun(*args, **kwargs)
        return _run_recorded_level(call, fun, kind, options, args, kwargs)

    return traced


def _run_recorded_level(call, fun: Callable, kind: str, options: tuple, args: tuple,
                        kwargs: dict) -> Any:
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


def _build(kind: str, jax_transform: Callable, fun: Any, options: tuple,
           *args: Any, **kwargs: Any) -> Callable:
    """`jax_transform(fun, ...)`, recording a creation error (JAX's, raised as JAX raised it)."""
    try:
        return jax_transform(fun, *args, **kwargs)
    except BaseException as e:
        _record_creation_error(kind, fun, options, e)
        raise


# --- what grad(f), vmap(f), ... return ---------------------------------------------
#
# NB: a frame of ours between a caller and JAX changes what JAX's users see
# (stack depths, tracebacks), so the objects we hand out have a `__call__`
# *property*: Python calls the callable the getter returns after the getter
# has returned. Outside record() that is JAX's own transformed function (or
# JAX's own jax.jvp), so no frame of ours is on the stack while JAX runs.


class _Transformed:
    """transforms.grad(f) and its kin: JAX's own `jax.grad(f)` outside record(), recording inside.

    The recording variant, `jax.grad(<level entry of f>)` called through
    `_invoke`, is built on its first recorded call. Metadata is jax.grad(f)'s;
    `__wrapped__` is the user's function, as jax.grad(f).__wrapped__ is.
    """

    def __init__(self, kind: str, fun: Any, options: tuple, plain: Callable,
                 build_recording: Callable[[], Callable], settings: dict | None = None):
        functools.update_wrapper(self, plain)
        self.__wrapped__ = fun
        self._plain = plain
        self._kind, self._fun, self._options, self._settings = kind, fun, options, settings
        self._build_recording = build_recording
        self._recording: Callable | None = None
        self._transformed: Callable | None = None

    @property
    def __call__(self) -> Callable:
        if _state.session is None:
            return self._plain
        recording = self._recording
        if recording is None:
            recording = self._recording = _i.api_boundary(functools.partial(
                _invoke_star, self._kind, self._fun, self._options, self._recording_transform(),
                self._settings))
        return recording

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
        return TransformSpec(self._kind, self._fun, self._recording_transform(), self._options,
                             self._settings)


def _invoke_star(kind: str, fun: Any, options: tuple, transformed: Callable,
                 settings: dict | None, *args: Any, **kwargs: Any) -> Any:
    return _invoke(kind, fun, options, transformed, args, kwargs, settings=settings)


def _transformed(kind: str, jax_transform: Callable, fun: Any, options: tuple,
                 settings: dict | None = None, **kwargs: Any) -> Callable:
    plain = _build(kind, jax_transform, fun, options, **kwargs)
    if not callable(fun):  # JAX accepted it (it raises later, when called): keep JAX's
        return plain

    def build_recording() -> Callable:
        return jax_transform(_level_entry(fun, kind, options), **kwargs)
    return _Transformed(kind, fun, options, plain, build_recording, settings)


class _Dispatch:
    """transforms.jvp / vjp / linearize: JAX's own function outside record(), ours inside.

    NB: JAX's own, as captured at import (`_i.jax_own`): workbench's runner replaces
    `jax.<name>` with this object while a script runs.
    """

    def __init__(self, name: str, recording: Callable):
        functools.update_wrapper(self, getattr(jax_own, name))
        self._name = name
        self._recording = _i.api_boundary(recording)

    @property
    def __call__(self) -> Callable:
        if _state.session is None:
            return getattr(jax_own, self._name)
        return self._recording


# --- the public transformations -----------------------------------------------

@_i.api_boundary
@functools.wraps(jax_own.grad)
def grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False, **kwargs):
    options = _options(argnums=argnums, has_aux=has_aux)
    return _transformed("grad", jax_own.grad, fun, options, argnums=argnums, has_aux=has_aux,
                        holomorphic=holomorphic, allow_int=allow_int, **kwargs)


@_i.api_boundary
@functools.wraps(jax_own.value_and_grad)
def value_and_grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False, **kwargs):
    options = _options(argnums=argnums, has_aux=has_aux)
    return _transformed("value_and_grad", jax_own.value_and_grad, fun, options, argnums=argnums,
                        has_aux=has_aux, holomorphic=holomorphic, allow_int=allow_int,
                        **kwargs)


@_i.api_boundary
@functools.wraps(jax_own.vmap)
def vmap(fun, in_axes=0, out_axes=0, **kwargs):
    options = _options(in_axes=in_axes, out_axes=out_axes, **kwargs)
    return _transformed("vmap", jax_own.vmap, fun, options,
                        dict(in_axes=in_axes, out_axes=out_axes, **kwargs),
                        in_axes=in_axes, out_axes=out_axes, **kwargs)


@_i.api_boundary
@functools.wraps(jax_own.jacfwd)
def jacfwd(fun, argnums=0, has_aux=False, holomorphic=False):
    options = _options(argnums=argnums, has_aux=has_aux)
    return _transformed("jacfwd", jax_own.jacfwd, fun, options, argnums=argnums, has_aux=has_aux,
                        holomorphic=holomorphic)


@_i.api_boundary
@functools.wraps(jax_own.jacrev)
def jacrev(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False):
    options = _options(argnums=argnums, has_aux=has_aux)
    return _transformed("jacrev", jax_own.jacrev, fun, options, argnums=argnums, has_aux=has_aux,
                        holomorphic=holomorphic, allow_int=allow_int)


@_i.api_boundary
@functools.wraps(jax_own.hessian)
def hessian(fun, argnums=0, has_aux=False, holomorphic=False):
    options = _options(argnums=argnums, has_aux=has_aux)
    return _transformed("hessian", jax_own.hessian, fun, options, argnums=argnums, has_aux=has_aux,
                        holomorphic=holomorphic)


def _recorded_jvp(fun, primals, tangents, has_aux=False):
    options = _options(has_aux=has_aux)
    target = _level_entry(fun, "jvp", options) if callable(fun) else fun
    run = functools.partial(jax_own.jvp, target)
    return _invoke("jvp", fun, options, run, (primals, tangents), {"has_aux": has_aux})


def _recorded_vjp(fun, *primals, **kwargs):
    options = _options(**kwargs)
    target = _level_entry(fun, "vjp", options) if callable(fun) else fun
    run = functools.partial(jax_own.vjp, target)
    return _invoke_keeping_origin("vjp", fun, options, run, primals, kwargs, _recording_pullback)


def _recorded_linearize(fun, *primals, **kwargs):
    options = _options(**kwargs)
    target = _level_entry(fun, "linearize", options) if callable(fun) else fun
    run = functools.partial(jax_own.linearize, target)
    return _invoke_keeping_origin("linearize", fun, options, run, primals, kwargs,
                                  _recording_pushforward)


jvp = _Dispatch("jvp", _recorded_jvp)
vjp = _Dispatch("vjp", _recorded_vjp)
linearize = _Dispatch("linearize", _recorded_linearize)


def _invoke_keeping_origin(kind: str, fun: Any, options: tuple, run: Callable, primals: tuple,
                           kwargs: dict, wrap: Callable) -> Any:
    """A top-level vjp/linearize call whose returned function (out[1]) records its own calls."""
    session = _state.session
    top_level = session is not None and _state.call is None
    out = _invoke(kind, fun, options, run, primals, kwargs)
    if not top_level or session is None:
        return out
    wrap(out[1], (weakref.ref(session), len(session.session.calls) - 1, _FunctionRef(fun),
                  options))
    return out


def _forward_index(origin: tuple) -> int | None:
    """The forward call's index, when it was recorded in the session now recording."""
    session_ref, index = origin[0], origin[1]
    return index if session_ref() is _state.session else None


# --- the functions vjp and linearize return -------------------------------------------
#
# They stay JAX's own objects, with JAX's pytree structure: a VJP whose `fun`
# is a partial, and a tree_util.Partial around a _HashableCallableShim of a
# partial. Only that inner functools.partial is swapped for a _RecordingPartial
# with the same function and arguments; what its calls are recorded as (the
# origin) is kept beside it in _ORIGINS, so nothing of ours (no weakref, no
# user function) is in their aux data, their reprs or the jaxprs JAX prints.

_ORIGINS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _FunctionRef:
    """The user's function, held weakly where it can be: nothing of theirs kept alive by us."""
    __slots__ = ("_ref", "_name")

    def __init__(self, fun: Any):
        self._name = function_name(fun)
        try:
            self._ref: Callable[[], Any] = weakref.ref(fun)
        except TypeError:
            self._ref = lambda: None

    def get(self) -> Any:
        fun = self._ref()
        return fun if fun is not None else types.SimpleNamespace(__qualname__=self._name)


class _RecordingPartial(functools.partial):
    """functools.partial(JAX's function, JAX's arguments) whose calls are recorded."""

    @property
    def __call__(self) -> Callable:
        found = _ORIGINS.get(self)
        if found is None or (_state.session is None and found[0] != "vjp_fun"):
            # NB: partial's own C call: no frame of ours outside record().
            return functools.partial.__call__.__get__(self, type(self))
        return functools.partial(_RECORDED_CALLS[found[0]], self, found)

    def __repr__(self) -> str:
        return repr(functools.partial(self.func, *self.args, **self.keywords))

    def __reduce__(self):  # pickles as JAX's partial would
        return functools.partial(self.func, *self.args, **self.keywords).__reduce__()


def _recording(partial: Any, role: str, origin: tuple, num_consts: int) -> Any:
    """`partial`'s functools.partial replaced by a _RecordingPartial, recorded as `role`."""
    recording = _RecordingPartial(partial.func, *partial.args, **partial.keywords)
    _ORIGINS[recording] = (role, origin, num_consts)
    return recording


def _recording_pullback(pullback: Any, origin: tuple) -> None:
    """JAX's VJP object, its inner function swapped in place (_i.swap_vjp_function)."""
    _i.swap_vjp_function(pullback, lambda fun: _recording(fun, "vjp_fun", origin, 0))


def _recording_pushforward(f_jvp: Any, origin: tuple) -> None:
    """jax.linearize's f_jvp, its inner function swapped in place (_i.swap_linear_function)."""
    _i.swap_linear_function(
        f_jvp, lambda inner, consts: _recording(inner, "linearize_jvp", origin, consts))


def _call_vjp_fun(partial: _RecordingPartial, found: tuple, *args, **kwargs) -> Any:
    """The VJP's function: its product, the backward Partial, records its own call."""
    backward = functools.partial.__call__(partial, *args, **kwargs)
    _i.swap_linear_function(
        backward, lambda inner, consts: _recording(inner, "vjp_backward", found[1], consts))
    return backward


def _call_recorded(partial: _RecordingPartial, found: tuple, *args, **kwargs) -> Any:
    """Run a pushforward or backward function as a Call whose parent is the forward call."""
    role, origin, num_consts = found
    run = functools.partial(functools.partial.__call__, partial, *args[:num_consts])
    return _invoke(role, origin[2].get(), origin[3], run, args[num_consts:], kwargs,
                   forward=_forward_index(origin))


_RECORDED_CALLS = {"vjp_fun": _call_vjp_fun, "vjp_backward": _call_recorded,
                   "linearize_jvp": _call_recorded}


# --- jit ------------------------------------------------------------------------
#
# How jit's entry works. JAX keys its caches (the C++ dispatch cache, the
# trace cache, eval_shape's) on the function it is given, and names the jaxpr
# after it. So `transforms.jit(f)` is `jax.jit(entry, ...)` where `entry`
# stands for f:
# - one entry per (f, options), kept in _JIT_ENTRIES while f lives (the entry
#   holds f weakly; the jitted object holds f, as jax.jit(f) does), so jitting
#   f twice reuses JAX's cache and a jitted call keeps nothing alive;
# - `entry == f` and `hash(entry) == hash(f)`, so the traces of jax.jit(f),
#   jax.eval_shape(f) and transforms.jit(f) are shared as JAX shares them;
# - entry's name is JAX's name for f (`fun_name`), its other metadata f's,
#   `__wrapped__` is f (JAX's source info unwraps it) and its signature
#   hooks the pre-trace check (_i.cache_miss_signature);
# - its `__call__` is a property: outside record() JAX calls f itself (no frame
#   of ours); inside, `_JitEntry.record`, which records the trace as a call
#   (or as a level of the call being recorded).
# A function JAX cannot weak-reference or hash is given to jax.jit as it is
# (JAX raises for it as it would), and not recorded.

_JIT_ENTRIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _JitEntry:
    """What jax.jit sees for the user's function f (see the notes above)."""

    def __init__(self, fun: Callable, options: tuple, kwargs: dict):
        # f's metadata, as functools.wraps would copy it, except `__wrapped__`
        # (a property: the entry must not hold f, see _JIT_ENTRIES).
        for attr in functools.WRAPPER_ASSIGNMENTS:  # __module__, __annotations__, __doc__, ...
            if hasattr(fun, attr):
                setattr(self, attr, getattr(fun, attr))
        self.__dict__.update({k: v for k, v in getattr(fun, "__dict__", {}).items()
                              if k != "__wrapped__"})
        self.__name__ = _i.jax_function_name(fun)  # JAX names the jaxpr with it
        self._fun: Callable[[], Any] = weakref.ref(fun)
        self._hash = hash(fun)
        self._options = options
        self._kwargs = kwargs
        # NB: the hook holds the entry weakly (no cycle entry -> signature -> entry)
        signature = _i.cache_miss_signature(
            fun, functools.partial(_check_before_trace, weakref.ref(self)))
        if signature is not None:
            self.__signature__ = signature

    @property
    def __wrapped__(self) -> Any:
        return self._fun()

    def transform_spec(self) -> TransformSpec:
        # NB: stages read JAX's own trace of this jit from its cache (after the
        # trace is over): a jax.jit of this same entry shares that cache, and
        # holds nothing that holds it back (no cycle through the jitted object).
        return TransformSpec("jit", self._fun(), jax_own.jit(self, **self._kwargs), self._options,
                             dict(self._kwargs))

    def jit_again(self) -> Any:
        """jax.jit of this entry as built: JAX's own argument checks, for the pre-trace check."""
        return jax_own.jit(self, **self._kwargs)

    @property
    def __call__(self) -> Callable:
        if _state.session is None and not retrace_refused():
            return self._fun()
        return self.record

    def record(self, *args, **kwargs):
        fun = self._fun()
        check_retrace(fun)  # stage capture reads JAX's cache: a miss must not run fun
        note_jit_traced()  # cached under this block's key: a later block must trace it again
        if _state.session is None:
            return fun(*args, **kwargs)
        call = _state.call
        if call is not None:  # traced inside a recorded call: a level of it
            return _run_recorded_level(call, fun, "jit", self._options, args, kwargs)
        # Traced outside any recorded call: this trace is the call.
        call = _state.session.begin_call("jit", fun, self._options, args, kwargs)
        call.spec = self.transform_spec()
        _state.call = call
        try:
            out = _run_recorded_level(call, fun, "jit", self._options, args, kwargs)
        except BaseException:
            call.finish(failed=True)
            raise
        finally:
            _state.call = None
        call.finish(out)
        return out

    def __repr__(self) -> str:  # JAX prints it (errors, the jitted object's repr) as f
        return repr(self._fun())

    def __eq__(self, other: object) -> bool:
        return other is self or self._fun() == other

    def __hash__(self) -> int:
        return self._hash


_NOT_SPECIFIED = object()


@_i.api_boundary
@functools.wraps(jax_own.jit)
def jit(fun=_NOT_SPECIFIED, /, **kwargs):
    """`jax.jit` itself, on an entry standing for `fun` that records its traces in record().

    The result is JAX's own jitted object (`.lower`, `.trace`, `.eval_shape`,
    caching): cached calls run no Python of ours.
    """
    if fun is _NOT_SPECIFIED:  # used as @jit(static_argnums=...)
        jax_own.jit(**kwargs)  # raises now what JAX raises now for bad keywords
        return lambda f: jit(f, **kwargs)
    options = _options(**kwargs)
    entry = _jit_entry(fun, options, kwargs)
    if entry is None:
        return _build("jit", jax_own.jit, fun, options, **kwargs)
    jitted = jax_own.jit(entry, **kwargs)
    jitted.__wrapped__ = fun  # as jax.jit(f).__wrapped__ is f; it keeps f alive, as JAX's does
    jitted.__transform_spec__ = entry.transform_spec()
    return jitted


def _jit_entry(fun: Any, options: tuple, kwargs: dict) -> _JitEntry | None:
    """The one entry for (fun, options), made on first use; None when JAX must see fun itself."""
    if not callable(fun) or inspect.isgeneratorfunction(fun):  # JAX's check_callable refuses
        return None
    try:
        entries = _JIT_ENTRIES.get(fun)
        hash(fun)
    except TypeError:  # not weak-referenceable or not hashable: JAX's own errors apply
        return None
    if entries is None:
        entries = _JIT_ENTRIES[fun] = {}
    entry = entries.get(options)
    if entry is None:
        entry = entries[options] = _JitEntry(fun, options, kwargs)
    return entry


def _check_before_trace(entry_ref: Callable, args: tuple, kwargs: dict) -> None:
    """On a jit cache miss while recording: record now a call whose unflatten will raise.

    `args` are what JAX binds: static arguments are stand-ins (leaves). When
    the round trip of a custom node raises, JAX's own unflatten of it raises
    the same before the function is traced: the call is recorded as failed
    with that exception and the check's findings. JAX's exception is the one
    the user gets. Otherwise nothing happens here: the trace records the call.
    Outside record(), or inside a recorded call (a level of it), nothing happens.
    """
    if _state.session is None or _state.call is not None:
        return
    entry = entry_ref()
    fun, options = entry._fun(), entry._options
    note_jit_arguments(fun, args, kwargs)  # stages compile at the arguments' shardings
    raised: list[BaseException] = []
    check_inputs(args, kwargs, parameter_names(fun, args), raised)
    if not raised:
        # An argument that is not an array (a function or a string inside an object):
        # JAX raises TypeError before tracing.
        with recording_off():  # JAX's check, run again, records nothing and binds no hook
            error = non_array_argument_error(entry.jit_again, args, kwargs)
        if error is None:
            return
        raised.append(error)
    session = _state.session
    assert session is not None  # checked above
    call = session.begin_call("jit", fun, options, args, kwargs)
    call.record_error(raised[0], None)
    call.finish(failed=True)
