"""The recording trace: RecordingTrace wraps the trace JAX is running, records each
`process_*` call and forwards it unchanged; the table of JAX's Trace methods it handles
(checked against the installed Trace at import); installing one as the current trace.
Part of the door.
"""
from __future__ import annotations

import sys
from typing import Any, Callable

from jax import core as jax_core
from jax.extend import linear_util as lu

from .._common import bracket
from ._base import Trace, set_current_trace, take_current_trace
from ._custom_rules import custom_call_name
from ._params import JIT_PRIMITIVE_NAMES, is_inline_jit_params


def current_trace() -> Trace:
    with take_current_trace() as trace:
        return trace


def enclosing_traces(trace: Any) -> set[int]:
    """ids of `trace` and the traces it binds on (`parent_trace`, our recorders' `parent`).

    A tracer of a trace outside this set and outside a call's levels belongs
    to no transformation running now: it leaked.
    """
    ids: set[int] = set()
    while trace is not None and id(trace) not in ids and len(ids) < 1000:
        ids.add(id(trace))
        trace = trace.parent if isinstance(trace, RecordingTrace) else \
            getattr(trace, "parent_trace", None)
    return ids



def traced_for(trace: Any) -> tuple[str, str]:
    """What JAX traces a jaxpr trace for, and the function it traces: ("while_body", "body"),
    ("scan", "step"), ("custom_root solve", "solve"), ("jit", "loss"); ("", "") if unknown.

    NB: jax._src.interpreters.partial_eval: a DynamicJaxprTrace's `frame.debug_info`
    (core.DebugInfo: `traced_for`, `func_src_info`), made by the control-flow primitive that
    traces it (lax.while_loop: "while_body", "while_cond"; lax.scan: "scan").
    """
    info = getattr(getattr(trace, "frame", None), "debug_info", None)
    purpose = getattr(info, "traced_for", "")
    source = getattr(info, "func_src_info", "")  # "body at loop.py:5", as func_name reads it
    name = source.split(" ")[0] if isinstance(source, str) else ""
    return (purpose if isinstance(purpose, str) else "", name)

def trace_has_ended(trace: Any) -> bool:
    """A trace whose transformation has returned: its tracers have leaked.

    NB: JAX invalidates a trace when its transformation ends and raises
    UnexpectedTracerError when it meets one of its tracers (`Trace.is_valid`).
    """
    is_valid = getattr(trace, "is_valid", None)
    try:
        return is_valid is not None and not is_valid()
    except Exception:  # a trace type without the flag
        return False


def eval_jaxpr(closed_jaxpr: Any, args: list) -> list:
    jaxpr = getattr(closed_jaxpr, "jaxpr", closed_jaxpr)
    consts = getattr(closed_jaxpr, "consts", ())
    # Not the wrapper's own source info (traced inside jnp, it names no user
    # frame): tracers made here must say "created on line" of the user's code.
    return jax_core.eval_jaxpr(jaxpr, consts, *args, propagate_source_info=False)


class RecordingTrace(Trace):
    """Records every primitive bound at one level, then forwards it to `parent`.

    NB: unlike JAX's traces this one makes no tracers of its own: the tracers
    user code sees are the parent's, so JAX's identity checks
    (`x._trace.tag is self.tag`) keep working unchanged.

    Every method of JAX's `Trace` base class is handled as TRACE_METHODS says
    (the base's own versions raise `must override`, and `__getattr__` never
    runs for a name the class defines); names the base lacks are forwarded by
    `__getattr__`.
    """

    def __init__(self, parent: Trace, level: Any):
        super().__init__()
        self.parent = parent
        self.level = level  # a _levels.LevelState (transforms._recording); it knows its call
        # Primitives check `trace.requires_low` before dispatch: answer as the parent would.
        self.requires_low = getattr(parent, "requires_low", True)
        # NB: JAX's rules bind on `parent_trace` with it current; here that is
        # us. An eager impl run with us current would miss jit's top-level fast
        # path (and record its inner jit), so make an EvalTrace parent current.
        # Other traces set the current trace themselves before running rules.
        self.parent_current = type(parent).__name__ == "EvalTrace"

    def __repr__(self) -> str:
        return f"RecordingTrace({self.level.label}, parent={self.parent!r})"

    def process_primitive(self, primitive, tracers, params, /):
        level = self.level
        if level.inline_jnp and _is_inlinable_jit(primitive, params):
            # Evaluate the wrapper's body here so users see sin/mul, not jit[name=sin].
            with set_current_trace(self):
                return eval_jaxpr(params["jaxpr"], list(tracers))
        # The hot path of recording: the step core directly (one call each way), unless
        # the level keeps a tape for stages (then LevelState's steps).
        core = level.core if level.tape is None else None
        if core is not None:
            index = core.begin(level.index, primitive, tracers, "primitive")
        else:
            index = level.begin_step(primitive, tracers, params, "primitive")
        try:
            if self.parent_current:
                with set_current_trace(self.parent):
                    out = self.parent.process_primitive(primitive, tracers, params)
            else:
                out = self.parent.process_primitive(primitive, tracers, params)
        except BaseException as e:
            level.fail_step(index, primitive, params, e)
            raise
        if core is not None:
            core.end(index, primitive, params, out, primitive.multiple_results)
        else:
            level.end_step(index, primitive, params, out, primitive.multiple_results)
        return out

    def process_call(self, call_primitive, f, tracers, params, /):
        # `core.call`-style primitives (jax 0.10; gone from the base in 0.12).
        # NB: we stay current: EvalTrace's impl runs `f` with the current
        # trace, so the body's primitives are recorded at this level.
        level = self.level
        index = level.begin_step(call_primitive, tracers, params, "call")
        try:
            out = self.parent.process_call(call_primitive, f, tracers, params)
        except BaseException as e:
            level.fail_step(index, call_primitive, params, e)
            raise
        level.end_step(index, call_primitive, params, out, True)
        return out

    # NB: the custom calls run the user's rules: each is a property giving a Bracket, so no
    # frame of ours is between JAX's and the rule's (the rule sees JAX's stack depth).
    @property
    def process_custom_jvp_call(self) -> Callable:
        return bracket(self._open_custom_jvp)

    @property
    def process_custom_vjp_call(self) -> Callable:
        return bracket(self._open_custom_vjp)

    def _open_custom_jvp(self, args: tuple, params: dict | None) -> tuple:
        primitive, fun, jvp, tracers = args
        level = self.level
        index = level.begin_step(primitive, tracers, params or {}, "custom_jvp_call", (fun, jvp))
        primal = fun  # the function differentiated: names a `defjvps` rule
        fun = _record_rule(fun, level.rule_spec("custom_jvp_fun", fun))
        jvp = _record_rule(jvp, level.rule_spec("custom_jvp_rule", jvp, primal))
        return _ParentStep(self, index, primitive, params or {}, primal).run(
            self.parent.process_custom_jvp_call, (primitive, fun, jvp, tracers))

    def _open_custom_vjp(self, args: tuple, params: dict | None) -> tuple:
        primitive, fun, fwd, bwd, tracers = args
        level = self.level
        index = level.begin_step(primitive, tracers, params or {}, "custom_vjp_call",
                                 (fun, fwd, bwd))
        named = _ParentStep(self, index, primitive, params or {}, fun)
        fun = _record_rule(fun, level.rule_spec("custom_vjp_fun", fun))
        fwd = _record_rule(fwd, level.rule_spec("custom_vjp_fwd", fwd))
        bwd = _record_rule(bwd, level.rule_spec("custom_vjp_bwd", bwd))
        return named.run(self.parent.process_custom_vjp_call, (primitive, fun, fwd, bwd, tracers))

    def stage_value(self, val):
        return self.parent.stage_value(val)

    def full_raise(self, x):
        return self.parent.full_raise(x)

    def __getattr__(self, name: str):
        # Names JAX's Trace base class does not define (a concrete trace's
        # process_custom_transpose, process_map, tag, ...): forwarded; the
        # process_* family recorded as call steps so nothing passes unseen.
        parent = object.__getattribute__(self, "parent")
        attr = getattr(parent, name)
        if name.startswith("process_") and callable(attr):
            return _recording_forwarder(self, name, attr)
        return attr


class _ParentStep:
    """A recorded step whose work is the parent trace's method (the parent current while it
    runs), as a Bracket's run: ended by `returned` or `raised`. A custom call's step is
    recorded with its function's name among its params, as a jaxpr prints the call
    (`custom_jvp_call[name=_softmax]`); JAX's method gets its own params."""
    __slots__ = ("trace", "index", "primitive", "params", "recorded", "context")

    def __init__(self, trace: RecordingTrace, index: int, primitive: Any, params: dict,
                 function: Any = None):
        self.trace, self.index, self.primitive, self.params = trace, index, primitive, params
        name = custom_call_name(function) if function is not None else ""
        self.recorded = {"name": name, **params} if name else params

    def run(self, method: Callable, args: tuple) -> tuple:
        self.context = set_current_trace(self.trace.parent)
        self.context.__enter__()
        return method, args, self.params, self.returned, self.raised

    def returned(self, out: Any) -> Any:
        self.context.__exit__(None, None, None)
        self.trace.level.end_step(self.index, self.primitive, self.recorded, out, True)
        return out

    def raised(self, error: BaseException) -> None:
        self.context.__exit__(None, None, None)
        self.trace.level.fail_step(self.index, self.primitive, self.recorded, error)


def _recording_forwarder(trace: RecordingTrace, name: str, method: Callable) -> Callable:
    """Record a process_* method we know nothing about as a call step, then forward it."""
    level = trace.level

    def forward(primitive, *args, **params):
        tracers = next((a for a in reversed(args) if isinstance(a, (list, tuple))), ())
        step_params = params or next((a for a in args if isinstance(a, dict)), {})
        index = level.begin_step(primitive, tracers, step_params, "call")
        try:
            with set_current_trace(trace.parent):
                out = method(primitive, *args, **params)
        except BaseException as e:
            level.fail_step(index, primitive, step_params, e)
            raise
        level.end_step(index, primitive, step_params, out, True)
        return out
    forward.__name__ = name
    return forward


# How RecordingTrace handles each attribute of JAX's Trace base class:
#   recorded   overridden here: recorded as a step, then forwarded to the parent
#   forwarded  overridden here: the parent's answer
#   own        the base's own behaviour is right for a RecordingTrace (its own
#              validity flag and weakref; `main` reads `tag`, which
#              __getattr__ forwards; requires_low is set from the parent)
# tests/test_fidelity.py fails when the installed JAX's Trace has a name
# missing here: a JAX release added a method, decide how to handle it.
TRACE_METHODS: dict[str, str] = {
    "process_primitive": "recorded",
    "process_call": "recorded",
    "process_custom_jvp_call": "recorded",
    "process_custom_vjp_call": "recorded",
    "stage_value": "forwarded",
    "full_raise": "forwarded",
    "invalidate": "own",
    "is_valid": "own",
    "main": "own",
    "requires_low": "own",
    "_invalidated": "own",
    "_weakref": "own",
}


def trace_base_names() -> set[str]:
    """Every non-dunder attribute of the installed JAX's Trace base class."""
    return {name for klass in Trace.__mro__ if klass is not object
            for name in vars(klass) if not (name.startswith("__") and name.endswith("__"))}


def _forward_unknown_base_methods() -> list[str]:
    """Forward any method the base defines and TRACE_METHODS does not know.

    NB: without this a new base method would raise `must override` under
    recording. Recorded if it is a process_* method, else forwarded.
    """
    added = []
    for name in sorted(trace_base_names() - TRACE_METHODS.keys()):
        if not callable(getattr(Trace, name, None)) or name in vars(RecordingTrace):
            continue

        def method(self, *args, __name=name, **kwargs):
            attr = getattr(self.parent, __name)
            if __name.startswith("process_"):
                return _recording_forwarder(self, __name, attr)(*args, **kwargs)
            return attr(*args, **kwargs)
        method.__name__ = name
        setattr(RecordingTrace, name, method)
        added.append(name)
    return added


UNKNOWN_TRACE_METHODS = _forward_unknown_base_methods()


def _is_inlinable_jit(primitive, params) -> bool:
    return primitive.name in JIT_PRIMITIVE_NAMES and "jaxpr" in params and is_inline_jit_params(params)


def _record_rule(fun, spec):
    """Wrap a linear_util WrappedFun so that its body runs in a recorded sub-level
    (`spec.body`: the rule's body under a recorder, with no frame between JAX and it)."""
    if spec is None or not isinstance(fun, lu.WrappedFun):
        return fun
    # NB: transformation2 is curried: the trailing () applies it.
    return lu.transformation2(spec.body, fun)()


def install(level) -> Any:
    """A context manager making a recorder for `level` the current trace."""
    return set_current_trace(RecordingTrace(level.jax_trace, level))


def binding_params(thread_id: int, core: Any, index: int) -> dict | None:
    """The params of step `index` of `core` while a RecordingTrace binds it in thread
    `thread_id` (None: that thread binds no such step now).

    NB: a step's params are handed to the core when it ends; while it runs (a crash inside
    a jit) they are only in the binding frame, which is ours (process_primitive), read
    from another thread: handing them in at each step's start would cost every step.
    """
    frame = sys._current_frames().get(thread_id)
    code = RecordingTrace.process_primitive.__code__
    while frame is not None:
        if frame.f_code is code:
            found = frame.f_locals
            level = found.get("level")
            if found.get("index") == index and getattr(level, "core", None) is core:
                params = found.get("params")
                return params if isinstance(params, dict) else None
        frame = frame.f_back
    return None
