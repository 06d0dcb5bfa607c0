"""The one module that touches JAX internals: the recording Trace, and every fact about JAX
that a JAX release may change (internal names, object layouts, parameter layouts), each behind
a named function. tests/test_jax_door.py fails when such a fact appears in another module, and
tests each function on both JAX versions.

A RecordingTrace wraps the trace JAX is running (its `parent`) and is made the
current trace while user code runs at that level. Every `process_*` call is
recorded, then forwarded to the parent unchanged, so JAX computes exactly what
it would have computed. JAX's own traces bind their inner work on their
`parent_trace`, which is one of our recorders when transforms nest, so every
level is seen.

Everything here is public surface (`jax.core`, `jax.extend.*`) except where a
comment says `# NB: jax._src`.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import operator
import os
import types
from typing import Any, Callable, NamedTuple

import jax
from jax import core as jax_core

# NB: jax._src: traceback filtering has no public registration; without it our
# wrapper frames would show in the tracebacks JAX filters for users.
from jax._src import source_info_util as _source_info
from jax._src import traceback_util as _traceback_util

# NB: jax._src: jax.jit names a jaxpr (and its jitted object's `function_name`)
# with this: a partial is named after the function it wraps.
from jax._src.util import fun_name as _jax_fun_name
from jax.extend import core as jex_core
from jax.extend import linear_util as lu
from jax.extend import source_info_util

Trace = jax_core.Trace
Tracer = jax_core.Tracer
ClosedJaxpr = jex_core.ClosedJaxpr
Jaxpr = jex_core.Jaxpr
take_current_trace = jex_core.take_current_trace
set_current_trace = jex_core.set_current_trace

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
JAX_DIR = os.path.dirname(os.path.abspath(jax.__file__))

# The exact package path (not a parent folder), so that JAX's "created on line"
# messages and jaxpr source info point at user code, not at our wrappers.
source_info_util.register_exclusion(PACKAGE_DIR + os.sep)
_traceback_util.register_exclusion(PACKAGE_DIR + os.sep)


def _is_ours(frame: types.FrameType) -> bool:
    return frame.f_code.co_filename.startswith(PACKAGE_DIR + os.sep)


def _walk(tb: types.TracebackType | None):
    while tb is not None:
        yield tb
        tb = tb.tb_next


def _hidden_as_jax_would(tb: types.TracebackType | None) -> list[bool]:
    """Per traceback entry: would JAX hide it, had our frames not been there? Ours: always.

    NB: jax._src. JAX filters, at its outermost api_boundary (its reraise
    frame), the frames below it that `include_frame` rejects; frames above it
    (jacfwd's `jacfun`, say) stay.
    """
    hidden, below_boundary = [], False
    for t in _walk(tb):
        frame = t.tb_frame
        below_boundary = below_boundary or _traceback_util._is_reraiser_frame(frame)
        hidden.append(_is_ours(frame) or (below_boundary
                                          and not _traceback_util.include_frame(frame)))
    return hidden


def _filter_as_jax_would(e: BaseException, mode: str) -> None:
    tb = e.__traceback__
    hidden = _hidden_as_jax_would(tb)
    entries = list(_walk(tb))
    if mode == "tracebackhide":
        for t, hide in zip(entries, hidden):
            if hide:
                t.tb_frame.f_locals["__tracebackhide__"] = True
        return
    out = None
    for t, hide in zip(reversed(entries), reversed(hidden)):
        if not hide:
            out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    e.with_traceback(out)
    jax_filtered = any(_traceback_util._is_reraiser_frame(t.tb_frame) for t in entries)
    note = "--------------------\n" + _traceback_util._simplified_tb_msg
    if jax_filtered and note not in getattr(e, "__notes__", ()):
        e.add_note(note)  # as JAX's boundary adds it


def api_boundary(fun: Callable) -> Callable:
    """Tracebacks of what `fun` raises filtered as JAX would filter them without us.

    Not JAX's own api_boundary: that filters every JAX frame under it,
    including frames JAX leaves in for users (jacfwd's `jacfun`). Here JAX's
    own boundaries are switched off while `fun` runs (so the recorder sees
    whole tracebacks, as the pytree mismatch rules need), and at the end
    exactly the frames JAX would have removed are removed, and ours (or, where
    JAX marks frames `__tracebackhide__` for IPython, marked). With
    JAX_TRACEBACK_FILTERING=off nothing is removed; in `remove_frames` mode
    JAX filters as usual and only our frames are removed.
    """
    # NB: jax._src: JAX's filtering mode, and its thread-local switch.
    filtering = _traceback_util.config.traceback_filtering

    @functools.wraps(fun)
    def boundary(*args, **kwargs):
        mode = _traceback_util._filtering_mode()
        if mode == "off":
            return fun(*args, **kwargs)
        emulated = mode in ("quiet_remove_frames", "tracebackhide")
        try:
            if emulated:
                with filtering("off"):
                    return fun(*args, **kwargs)
            return fun(*args, **kwargs)
        except Exception as e:
            if emulated:
                _filter_as_jax_would(e, mode)
            else:
                e.with_traceback(_without_our_frames(e.__traceback__))
            raise
    return boundary


def _without_our_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    out = None
    for t in reversed(list(_walk(tb))):
        if not _is_ours(t.tb_frame):
            out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out


def current_trace() -> Trace:
    with take_current_trace() as trace:
        return trace


# NB: a tracer's owning trace has no public accessor. attrgetter: this runs
# once per recorded tracer, and a C-level getter is the cheapest call there is.
trace_of = operator.attrgetter("_trace")

# What each kind of tracer wraps, as (value, batch dimension) and (primal, tangent):
# attributes of JAX's BatchTracer, JVPTracer and LinearizeTracer (no public accessor).
batched_parts = operator.attrgetter("val", "batch_dim")
autodiff_parts = operator.attrgetter("primal", "tangent")

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


def _has_attrs(cls: type, *names: str) -> bool:
    # Tracer attributes are __slots__ or class annotations, not set on the class.
    for name in names:
        if not any(name in getattr(k, "__slots__", ()) or name in getattr(k, "__annotations__", {})
                   or name in vars(k) for k in cls.__mro__):
            return False
    return True


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


_name_stack_texts: dict[Any, str] = {}
# By identity first: a NameStack is a dataclass, hashed and compared field by field.
_name_stacks_seen: dict[int, tuple[Any, str]] = {}


_last_name_stack: list[Any] = [None, ""]  # the stack seen last and its text


def name_stack() -> str:
    """The current name stack, e.g. `vmap(transpose(jvp()))`, printed once per value."""
    stack = source_info_util.current_name_stack()
    last = _last_name_stack
    if stack is last[0]:  # consecutive steps mostly share one
        return last[1]
    hit = _name_stacks_seen.get(id(stack))
    if hit is not None and hit[0] is stack:
        last[0], last[1] = stack, hit[1]
        return hit[1]
    text = _name_stack_texts.get(stack)
    if text is None:
        if len(_name_stack_texts) > 10_000:
            _name_stack_texts.clear()
        text = _name_stack_texts[stack] = str(stack)
    if len(_name_stacks_seen) >= 64:  # the few current lately: few kept alive
        _name_stacks_seen.clear()
    _name_stacks_seen[id(stack)] = (stack, text)  # keeps the stack alive: its id stays its own
    last[0], last[1] = stack, text
    return text


# NB: jax._src: the source context has no public reader. eval_jaxpr and the
# backward pass bind a staged jaxpr's equations inside
# user_context(eqn.source_info.traceback): the traceback of where they were written.
_source_context = _source_info._source_info_context


def context_traceback() -> Any:
    """The traceback JAX binds the current equation under (a staged jaxpr being
    evaluated again), or None when primitives are bound by live code."""
    return _source_context.context.traceback


def source_frame(source_info: Any) -> tuple[str, int, str] | None:
    """(file, line, function) of the frame an equation's source info names, as
    `source_info_util.summarize` prints it (the innermost frame outside JAX), or None.

    NB: jax._src.source_info_util: `user_frame` has no public alias (summarize prints it).
    """
    frame = _source_info.user_frame(source_info.traceback)
    return None if frame is None else (frame.file_name, frame.start_line, frame.function_name)


def traceback_frames(tb: Any) -> list[tuple[str, int, str]]:
    """(file, line, function) of a JAX traceback's frames, innermost first."""
    return [(f.file_name, f.line_num, f.function_name) for f in tb.frames]


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
        self.level = level  # a _recorder.LevelState; it knows its call
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

    def process_custom_jvp_call(self, primitive, fun, jvp, tracers, /, **params):
        level = self.level
        index = level.begin_step(primitive, tracers, params, "custom_jvp_call", (fun, jvp))
        fun = _record_rule(fun, level.rule_spec("custom_jvp_fun", fun))
        jvp = _record_rule(jvp, level.rule_spec("custom_jvp_rule", jvp))
        try:
            with set_current_trace(self.parent):
                out = self.parent.process_custom_jvp_call(primitive, fun, jvp, tracers, **params)
        except BaseException as e:
            level.fail_step(index, primitive, params, e)
            raise
        level.end_step(index, primitive, params, out, True)
        return out

    def process_custom_vjp_call(self, primitive, fun, fwd, bwd, tracers, /, **params):
        level = self.level
        index = level.begin_step(primitive, tracers, params, "custom_vjp_call", (fun, fwd, bwd))
        fun = _record_rule(fun, level.rule_spec("custom_vjp_fun", fun))
        fwd = _record_rule(fwd, level.rule_spec("custom_vjp_fwd", fwd))
        bwd = _record_rule(bwd, level.rule_spec("custom_vjp_bwd", bwd))
        try:
            with set_current_trace(self.parent):
                out = self.parent.process_custom_vjp_call(primitive, fun, fwd, bwd, tracers,
                                                          **params)
        except BaseException as e:
            level.fail_step(index, primitive, params, e)
            raise
        level.end_step(index, primitive, params, out, True)
        return out

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
# tests/test_interpreters.py fails when the installed JAX's Trace has a name
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


def rewound(fun: Any) -> Any:
    """A custom_jvp/custom_vjp rule (a WrappedFun) ready to be called again.

    NB: jax._src.linear_util: a WrappedFun keeps what its transformations
    report (output trees) in Stores that may be filled once; the stage replay
    of a recorded custom_jvp_call binds the same WrappedFuns again, after the
    call that filled them is over.
    """
    for store in getattr(fun, "stores", ()) or ():
        inner = getattr(store, "_store", store)  # EqualStore wraps a Store
        reset = getattr(inner, "reset", None)
        if reset is not None:
            reset()
    return fun


def bind_with_rules(primitive: Any, rules: tuple, args: list, params: dict) -> Any:
    """Bind a custom_jvp_call/custom_vjp_call again with its rule functions.

    NB: jax._src.custom_derivatives binds them as `p.bind(*args, subfuns=(fun, jvp), **params)`;
    a trace receives them as `process_custom_jvp_call(p, fun, jvp, tracers, **params)`.
    """
    return primitive.bind(*args, subfuns=tuple(map(rewound, rules)), **params)


def rule_identity(fun: Any) -> tuple | None:
    """What makes two custom-rule functions (WrappedFuns) one program, or None.

    NB: jax._src.linear_util: a WrappedFun is its Python function, the
    transformations applied to it (with their static arguments: input trees)
    and params; JAX's own caches key it so. Not its stores or debug info, so
    `f(x)` called inside a rule is the body its outer custom call holds.
    """
    try:
        key = (fun.f, fun.transforms, fun.params, fun.in_type)
        hash(key)
    except Exception:  # not a WrappedFun, or unhashable static arguments
        return None
    return key


def wrapped_like(f: Callable, like: Any) -> Any:
    """`f` as a WrappedFun in place of the rule function `like` (same debug info)."""
    return lu.wrap_init(f, debug_info=getattr(like, "debug_info", None))


def custom_vjp_out_count(params: dict) -> int | None:
    """How many primal outputs a custom_vjp_call has (the last outputs of its fwd).

    NB: jax._src.custom_derivatives: `out_trees()` gives (out_tree, res_tree,
    input_fwds), read from the fwd's stores once it has run.
    """
    try:
        return params["out_trees"]()[0].num_leaves
    except Exception:  # the fwd's stores are empty, or another layout
        return None


def source_now() -> Any:
    """Where a primitive is being bound (traceback and name stack), to stage it there later."""
    return source_info_util.current()


def name_depth() -> int:
    """How many scopes the name stack has now: a level's scopes are the ones after these."""
    return len(source_info_util.current_name_stack().stack)


class staged_at:
    """Bind as if at `source`: its traceback, and the name scopes after `depth`.

    NB: jax._src.source_info_util: NameStack.stack holds Scope and Transform
    entries (each with a `name`); transformations staging the replay push
    their own names, the user's `named_scope`s are pushed again here.
    """
    __slots__ = ("_source", "_depth", "_contexts")

    def __init__(self, source: Any, depth: int):
        self._source, self._depth = source, depth

    def __enter__(self) -> None:
        contexts: list[Any] = [source_info_util.user_context(self._source.traceback)]
        for entry in getattr(self._source.name_stack, "stack", ())[self._depth:]:
            push = (source_info_util.transform_name_stack
                    if type(entry).__name__ == "Transform" else source_info_util.extend_name_stack)
            contexts.append(push(entry.name))
        for c in contexts:
            c.__enter__()
        self._contexts = contexts

    def __exit__(self, *exc: Any) -> None:
        for c in reversed(self._contexts):
            c.__exit__(*exc)


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


def is_inline_jit_params(params: dict) -> bool:
    """True for the params of a jnp wrapper: `jit(inline=True)`.

    NB: jax 0.12 made `inline` an enum (Inline.JAX_EARLY for inline=True; a
    user's plain jit gets another member, and enum members are all truthy).
    """
    inline = params.get("inline", False)
    return inline is True or getattr(inline, "name", None) == "JAX_EARLY"


def _is_inlinable_jit(primitive, params) -> bool:
    # The primitive was renamed pjit -> jit in 0.7.
    return primitive.name in ("jit", "pjit") and "jaxpr" in params and is_inline_jit_params(params)


def _record_rule_body(f, spec, *args, **kwargs):
    """Run a custom_jvp/custom_vjp rule body inside a recorded sub-level."""
    return spec.run(f, args, kwargs)


def _record_rule(fun, spec):
    """Wrap a linear_util WrappedFun so that its body runs in a recorded sub-level."""
    if spec is None or not isinstance(fun, lu.WrappedFun):
        return fun
    # NB: transformation2 is curried: the trailing () applies it.
    return lu.transformation2(_record_rule_body, fun, spec)()


def install(level) -> Any:
    """A context manager making a recorder for `level` the current trace."""
    return set_current_trace(RecordingTrace(level.jax_trace, level))



def jax_function_name(fun: Any) -> str:
    """The name JAX gives a function it traces (`my_function` for partial(my_function))."""
    return _jax_fun_name(fun)


# NB: a public JAX surface (jax.make_user_context, in 0.10.2 and 0.12): a value
# that JAX's tracing, lowering and compilation caches are keyed on, as they are
# on jax_enable_x64. Made once, at import (making one is not thread-safe).
_RECORDING_CACHE_KEY = jax.make_user_context(None)


def jit_cache_key(value: int | None) -> Any:
    """A context manager setting the value JAX's jit caches are keyed on (None: as outside)."""
    return _RECORDING_CACHE_KEY(value)


# --- JAX's own transformations, captured at import -----------------------------------------

class JaxTransforms:
    """JAX's own transformations, as `jax.*` held them when transforms was imported.

    `workbench run` replaces jax.grad (...) with ours while a script runs (workbench/runner.py
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


# --- what JAX's errors leave behind -------------------------------------------------------

class _MismatchSite(NamedTuple):
    function: str                      # the JAX function that compared the two trees
    left: str                          # its locals holding each side
    right: str
    names: tuple[str, str] | None = None  # its locals naming each side, if any


# NB: jax._src: JAX raises its pytree-structure mismatches with PyTreeDef strings or prose;
# the trees themselves are still locals of the frame that compared them, named here per
# mismatch kind (the kinds of transforms/_diagnose.py's MISMATCH_RULES).
_MISMATCH_SITES = {
    "custom_jvp": _MismatchSite("_flatten_jvp", "py_primals_out", "py_tangents_out"),
    "custom_vjp": _MismatchSite("_flatten_bwd", "in_tree", "py_cts_in"),
    "cond": _MismatchSite("_check_branch_outputs", "out_avals1", "out_avals2",
                          ("name1", "name2")),
    "scan": _MismatchSite("_check_carry_type", "in_carry", "out_carry"),
    "vmap_in_axes": _MismatchSite("flatten_axes", "axis_tree", "treedef"),
    "vmap_out_axes": _MismatchSite("flatten_axes", "axis_tree", "treedef"),
}
MISMATCH_KINDS = tuple(_MISMATCH_SITES)


class MismatchSides(NamedTuple):
    left: Any
    right: Any
    left_name: str | None = None       # how JAX names each side there ("true_fun"), if it does
    right_name: str | None = None


def _frames(error: BaseException):
    tb = error.__traceback__
    while tb is not None:
        yield tb.tb_frame
        tb = tb.tb_next


def mismatch_sides(error: BaseException, kind: str) -> MismatchSides | None:
    """The two live trees a structure-mismatch error of `kind` compared, from the traceback's
    frame of the JAX function that compared them; None when no frame holds them."""
    site = _MISMATCH_SITES[kind]
    for frame in _frames(error):
        if frame.f_code.co_name != site.function:
            continue
        f_locals = frame.f_locals
        if site.left not in f_locals or site.right not in f_locals:
            continue
        names: list[str | None] = [None, None]
        if site.names is not None:
            names = [str(f_locals[n]) if n in f_locals else None for n in site.names]
        return MismatchSides(f_locals[site.left], f_locals[site.right], *names)
    return None


def ended_tracer_in_traceback(error: BaseException) -> Any:
    """The tracer JAX refused (UnexpectedTracerError): a local of the frames that raised,
    whose trace has ended; None if none is found.

    NB: JAX checks a tracer's trace where it is used, a few frames from the raise.
    """
    frames = list(_frames(error))
    for frame in reversed(frames[-4:]):
        for value in list(frame.f_locals.values()):
            if isinstance(value, Tracer) and trace_has_ended(trace_of(value)):
                return value
    return None


def public_error_name(cls: type) -> str | None:
    """`jax.errors.Name` for an error class JAX defines privately and exports there, else None.

    NB: JAX defines its errors in jax._src modules; `jax.errors` is where users find them.
    """
    if not cls.__module__.startswith("jax._src"):
        return None
    return f"jax.errors.{cls.__name__}" if getattr(jax.errors, cls.__name__, None) is cls else None


# --- the functions jax.vjp and jax.linearize return ----------------------------------------

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


# --- jit's cache misses ---------------------------------------------------------------------

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


# --- primitives' parameters -----------------------------------------------------------------

def scan_groups(params: Any) -> tuple[int, int]:
    """How many of a scan equation's inputs are constants, then carries (the rest: xs).

    NB: jax 0.10 has num_consts / num_carry; jax 0.12 a flat tree of the three groups, ft_in.
    """
    if "num_consts" in params:
        return int(params["num_consts"]), int(params["num_carry"])
    consts, carry, _ = params["ft_in"].unpack()
    return len(consts.vals), len(carry.vals)


def while_consts(params: Any) -> tuple[int, int]:
    """How many constants a while equation's cond and body jaxprs take (they come first)."""
    return int(params["cond_nconsts"]), int(params["body_nconsts"])


def call_consts(params: Any) -> int:
    """How many leading inputs of a custom_jvp_call / custom_vjp_call jaxpr are constants."""
    return int(params.get("num_consts", 0))


def wrapped_python_function(fun: Any) -> Any:
    """The Python function inside a linear_util WrappedFun (a custom rule), or `fun` itself."""
    return getattr(fun, "f", fun)
