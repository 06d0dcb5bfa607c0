"""The one module that touches JAX internals: the recording Trace.

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

import operator
import os
from typing import Any, Callable

import jax
from jax import core as jax_core

# NB: jax._src: traceback filtering has no public registration; without it our
# wrapper frames would show in the tracebacks JAX filters for users.
from jax._src import source_info_util as _source_info
from jax._src import traceback_util as _traceback_util
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
api_boundary = _traceback_util.api_boundary


def current_trace() -> Trace:
    with take_current_trace() as trace:
        return trace


# NB: a tracer's owning trace has no public accessor. attrgetter: this runs
# once per recorded tracer, and a C-level getter is the cheapest call there is.
trace_of = operator.attrgetter("_trace")


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


def name_stack() -> str:
    """The current name stack, e.g. `vmap(transpose(jvp()))`, printed once per value."""
    stack = source_info_util.current_name_stack()
    hit = _name_stacks_seen.get(id(stack))
    if hit is not None and hit[0] is stack:
        return hit[1]
    text = _name_stack_texts.get(stack)
    if text is None:
        if len(_name_stack_texts) > 10_000:
            _name_stack_texts.clear()
        text = _name_stack_texts[stack] = str(stack)
    if len(_name_stacks_seen) >= 64:  # the few current lately: few kept alive
        _name_stacks_seen.clear()
    _name_stacks_seen[id(stack)] = (stack, text)  # keeps the stack alive: its id stays its own
    return text


# NB: jax._src: the source context has no public reader. eval_jaxpr and the
# backward pass bind a staged jaxpr's equations inside
# user_context(eqn.source_info.traceback): the traceback of where they were written.
_source_context = _source_info._source_info_context


def context_traceback() -> Any:
    """The traceback JAX binds the current equation under (a staged jaxpr being
    evaluated again), or None when primitives are bound by live code."""
    return _source_context.context.traceback


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
        pending = level.begin_step(primitive, tracers, params, "primitive")
        try:
            if self.parent_current:
                with set_current_trace(self.parent):
                    out = self.parent.process_primitive(primitive, tracers, params)
            else:
                out = self.parent.process_primitive(primitive, tracers, params)
        except BaseException as e:
            level.fail_step(pending, e)
            raise
        level.end_step(pending, out, primitive.multiple_results)
        return out

    def stage_value(self, val):
        return self.parent.stage_value(val)

    def process_custom_jvp_call(self, primitive, fun, jvp, tracers, /, **params):
        level = self.level
        pending = level.begin_step(primitive, tracers, params, "custom_jvp_call", (fun, jvp))
        fun = _record_rule(fun, level.rule_spec("custom_jvp_fun", fun))
        jvp = _record_rule(jvp, level.rule_spec("custom_jvp_rule", jvp))
        try:
            with set_current_trace(self.parent):
                out = self.parent.process_custom_jvp_call(primitive, fun, jvp, tracers, **params)
        except BaseException as e:
            level.fail_step(pending, e)
            raise
        level.end_step(pending, out, True)
        return out

    def process_custom_vjp_call(self, primitive, fun, fwd, bwd, tracers, /, **params):
        level = self.level
        pending = level.begin_step(primitive, tracers, params, "custom_vjp_call", (fun, fwd, bwd))
        fun = _record_rule(fun, level.rule_spec("custom_vjp_fun", fun))
        fwd = _record_rule(fwd, level.rule_spec("custom_vjp_fwd", fwd))
        bwd = _record_rule(bwd, level.rule_spec("custom_vjp_bwd", bwd))
        try:
            with set_current_trace(self.parent):
                out = self.parent.process_custom_vjp_call(primitive, fun, fwd, bwd, tracers,
                                                          **params)
        except BaseException as e:
            level.fail_step(pending, e)
            raise
        level.end_step(pending, out, True)
        return out

    def __getattr__(self, name: str):
        # Forward every method we do not override (stage_value appeared in
        # 0.10.1, process_call left in 0.12, more will come); record the
        # process_* family as call steps so nothing passes unseen.
        parent = object.__getattribute__(self, "parent")
        attr = getattr(parent, name)
        if name.startswith("process_") and callable(attr):
            return self._recording_forwarder(name, attr)
        return attr

    def _recording_forwarder(self, name: str, method: Callable):
        level = self.level

        def forward(primitive, *args, **params):
            tracers = args[-1] if args and isinstance(args[-1], (list, tuple)) else ()
            pending = level.begin_step(primitive, tracers, params, "call")
            try:
                with set_current_trace(self.parent):
                    out = method(primitive, *args, **params)
            except BaseException as e:
                level.fail_step(pending, e)
                raise
            level.end_step(pending, out, True)
            return out
        forward.__name__ = name
        return forward


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
