"""Stages of a transformation pipeline, captured after a recorded call.

The chain is rebuilt from the outermost wrapper inwards (`spec_of`). Each
transformation is applied again, by JAX, to a probe that stands in for the
function it wraps. When JAX calls the probe, the probe captures the inner
stages at the very arguments the transformation passes (per-example avals
under vmap, static values under jit), then evaluates the inner stage's jaxpr
where that gives exactly what the function would (`_stand_in`), so user
Python is not re-run for every stage. `vmap(grad(f))` gives f -> jvp(f) ->
linearize(f) -> linear(f) -> transpose(linear(f)) -> grad(f) -> vmap(grad(f)),
each a jaxpr that JAX produced, with the recorded options. jvp(f) is the JVP
of f's captured jaxpr; linearize(f) and linear(f) come from one
jax.linearize, the backward pass from jax.vjp, grad(f) from jax.grad: each of
these runs the user's function, as differentiating a captured jaxpr can order
equations otherwise (tests compare every stage with JAX's make_jaxpr).

A stage JAX cannot produce for these inputs is recorded as unavailable with
JAX's error; a failing stage never stops the others.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import jax
from jax.extend import source_info_util
from jax.extend.core import DropVar, Literal, jaxpr_as_fun, valid_jaxtype

from . import _api, _recorder, _sharding  # NB: _api and _recorder import this module
from ._rules import summarize_params
from ._snapshot import aval_text, jaxpr_record
from ._trees import literal
from .record import (
    EqnRecord,
    Growth,
    GrowthPoint,
    GrowthSeries,
    Metric,
    PrimitiveCount,
    Stage,
    SubJaxprRecord,
)

# Autodiff stages per transformation, in pipeline order (grad = transpose of
# the linearized JVP). hessian is jacfwd(jacrev(f)): its reverse part is f's.
_REVERSE = ("jvp", "linearized", "linear", "transposed")
AD_STAGES: dict[str, tuple[str, ...]] = {
    "grad": _REVERSE,
    "value_and_grad": _REVERSE,
    "vjp": _REVERSE,
    "jacrev": _REVERSE,
    "hessian": _REVERSE,
    "jacfwd": ("jvp",),
    "linearize": ("jvp", "linear"),  # its own stage is the linearized one
}

# Wrappers built as jax.<kind>(fun, **options); the others are called as
# jax.<kind>(fun, *args, **kwargs), with kwargs that configure the transform.
_WRAPPERS = frozenset({"grad", "value_and_grad", "vmap", "jacfwd", "jacrev", "hessian", "jit"})
_CALLED = frozenset({"jvp", "vjp", "linearize"})

# cost_analysis() keys shown first, in this order; the rest follow sorted.
_COST_FIRST = ("flops", "transcendentals", "bytes accessed")
_MEMORY_FIRST = ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes",
                 "alias_size_in_bytes", "generated_code_size_in_bytes", "peak_memory_in_bytes")


def capture_stages(spec: Any, args: tuple, kwargs: dict) -> tuple[Stage, ...]:
    """The stages of one recorded call, from the user's function outwards."""
    global _source_texts
    outer, _source_texts = _source_texts, {}
    try:
        with _young_garbage_collected_once():
            return tuple(_capture_spec(spec, args, kwargs, in_probe=False).stages)
    except Exception as e:  # a fault of ours must not fail the user's call: record it
        label = _Label("capture", f"stage capture of {spec.kind}", "")
        return (_failed(label, "capture_stages", f"stage capture failed: {_reason(e)}"),)
    finally:
        _source_texts = outer


@contextlib.contextmanager
def _young_garbage_collected_once() -> Iterator[None]:
    """Cyclic GC paused while tracing, then one collection of what it allocated.

    Tracing allocates millions of objects while the jaxprs it builds stay
    alive, so the collector's automatic passes re-scan them again and again
    (a quarter of the CPU time of a 10,000-equation capture). One young
    collection at the end frees the same cycles, and is counted in the
    capture's time. NB: the GC is process-wide, so other threads see it
    paused too; a GC the user disabled stays disabled.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect(0)


# --- stage records -------------------------------------------------------------

@dataclass(frozen=True)
class _Label:
    """Who a stage is: its unique name (an expression of f) and how to show it."""
    name: str
    title: str
    role: str
    transform: str = ""


def _reason(error: BaseException) -> str:
    try:
        message = str(error)
    except Exception as e:  # a message that cannot be printed still names its type
        message = f"<message unavailable: {type(e).__name__}>"
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def _failed(label: _Label, method: str, reason: str, seconds: float = 0.0) -> Stage:
    return Stage(label.name, label.title, available=False, reason=reason, role=label.role,
                 transform=label.transform, method=method, seconds=seconds)


def _built(label: _Label, closed: Any, method: str, seconds: float) -> Stage:
    """A jaxpr stage; `seconds` is what JAX took to make it, recording time is added."""
    start = time.perf_counter()
    namer = _Namer()
    jaxpr = getattr(closed, "jaxpr", closed)
    const_vars = namer.names(jaxpr.constvars)
    in_vars = namer.names(jaxpr.invars)
    eqns = eqn_records(closed, namer)
    return Stage(label.name, label.title, jaxpr=jaxpr_record(label.name, closed), role=label.role,
                 transform=label.transform, method=method, eqns=eqns,
                 histogram=histogram(e.primitive for e in eqns),
                 seconds=seconds + time.perf_counter() - start,
                 in_vars=in_vars, out_vars=namer.names(jaxpr.outvars), const_vars=const_vars)


def _stage_of(label: _Label, method: str, make: Callable[[], Any]) -> Stage:
    """Run `make` (returning a jaxpr) and record it, or its failure."""
    start = time.perf_counter()
    try:
        closed = make()
    except Exception as e:  # this stage failed for these inputs; the others go on
        return _failed(label, method, _reason(e), time.perf_counter() - start)
    return _built(label, closed, method, time.perf_counter() - start)


def eqn_records(closed: Any, namer: _Namer | None = None) -> tuple[EqnRecord, ...]:
    """Each top-level equation: primitive, params, avals, source line, name stack, dataflow."""
    jaxpr = getattr(closed, "jaxpr", closed)
    if namer is None:
        namer = _Namer()
        namer.names(jaxpr.constvars)
        namer.names(jaxpr.invars)
    stacks: dict[Any, str] = {}
    records = []
    # JAX prints an output nothing reads as `_` and gives it no name: so do we.
    used = {v for eqn in jaxpr.eqns for v in eqn.invars if not isinstance(v, Literal)}
    used.update(v for v in jaxpr.outvars if not isinstance(v, Literal))
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        params, found = summarize_params(name, eqn.params)
        info = eqn.source_info
        stack = stacks.get(info.name_stack)
        if stack is None:
            stack = stacks[info.name_stack] = str(info.name_stack)
        # Named in the order JAX prints them: inputs, outputs, then the sub-jaxprs
        # in the order of their params' names (printed sorted), so names match the text.
        in_vars, out_vars = namer.names(eqn.invars), namer.out_names(eqn.outvars, used)
        if len(found) > 1:
            found = sorted(found, key=lambda item: item[0].partition("[")[0])
        subjaxprs = tuple(namer.subjaxpr(name, label, sub, eqn) for label, sub in found)
        records.append(EqnRecord(
            name, params,
            tuple(aval_text(v.aval) for v in eqn.invars),
            tuple(aval_text(v.aval) for v in eqn.outvars),
            _source_text(info), stack, in_vars, out_vars, subjaxprs))
    return tuple(records)


# --- dataflow: variable names and sub-jaxprs ---------------------------------------

_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_var_names: list[str] = []  # the n-th name, as JAX prints it: a ... z, ba, bb ...


def _var_name(n: int) -> str:
    while len(_var_names) <= n:
        k, text = len(_var_names), ""
        while True:
            text = _LETTERS[k % 26] + text
            k //= 26
            if not k:
                break
        _var_names.append(sys.intern(text))
    return _var_names[n]


# Nested jaxprs deeper than this are kept as figures (eqn_count) without equations.
MAX_SUBJAXPR_DEPTH = 6


class _Namer:
    """Names a stage's variables by identity, in order of appearance, as JAX prints them.

    One namer per stage: names are unique across the stage, sub-jaxprs included.
    A jaxpr object met twice (a jnp function's cached body) is recorded once and shared.
    """

    def __init__(self) -> None:
        self._names: dict[Any, str] = {}
        self._subs: dict[int, tuple[Any, SubJaxprRecord]] = {}
        self._depth = 0

    def name(self, v: Any) -> str:
        if isinstance(v, Literal):
            return "=" + _literal_text(v)
        if isinstance(v, DropVar):
            return "_"
        text = self._names.get(v)
        if text is None:
            text = self._names[v] = _var_name(len(self._names))
        return text

    def names(self, vs: Sequence[Any]) -> tuple[str, ...]:
        return tuple([self.name(v) for v in vs])

    def out_names(self, vs: Sequence[Any], used: set) -> tuple[str, ...]:
        return tuple([self.name(v) if v in used else "_" for v in vs])

    def subjaxpr(self, primitive: str, label: str, closed: Any, eqn: Any) -> SubJaxprRecord:
        hit = self._subs.get(id(closed))
        if hit is not None and hit[0] is closed:
            return hit[1]
        jaxpr = getattr(closed, "jaxpr", closed)
        n_in = len(jaxpr.constvars) + len(jaxpr.invars)
        in_roles, out_roles, operands = _sub_roles(primitive, label, eqn.params, n_in,
                                                   len(jaxpr.outvars), len(eqn.invars))
        in_vars = self.names(jaxpr.constvars) + self.names(jaxpr.invars)
        eqns: tuple[EqnRecord, ...] = ()
        if self._depth < MAX_SUBJAXPR_DEPTH:
            self._depth += 1
            try:
                eqns = eqn_records(jaxpr, self)
            finally:
                self._depth -= 1
        record = SubJaxprRecord(
            label, in_vars, self.names(jaxpr.outvars),
            tuple(aval_text(v.aval) for v in (*jaxpr.constvars, *jaxpr.invars)),
            tuple(aval_text(v.aval) for v in jaxpr.outvars),
            in_roles, out_roles, operands, eqns, len(jaxpr.eqns))
        self._subs[id(closed)] = (closed, record)  # keeps closed alive only for this stage
        return record


# Texts of scalar literals by (type, value): a loop's constants repeat.
# NB: not zeros and NaNs, which compare equal to (or unequal to) another text.
_literal_texts: dict[tuple[type, Any], str] = {}


def _literal_text(v: Any) -> str:
    val = getattr(v, "val", v)
    if isinstance(val, (bool, int)) or (isinstance(val, (float, complex)) and val == val and val):
        key = (type(val), val)
        text = _literal_texts.get(key)
        if text is None:
            if len(_literal_texts) > 10_000:
                _literal_texts.clear()
            text = _literal_texts[key] = _literal_text_uncached(val)
        return text
    return _literal_text_uncached(val)


def _literal_text_uncached(val: Any) -> str:
    try:  # NB: jax >= 0.10 wraps literals (TypedFloat, TypedInt): print the number
        base = next((t for t in (bool, int, float, complex) if isinstance(val, t)), None)
        if base is not None:
            text = str(base(val))
        elif getattr(val, "shape", None) == ():
            text = str(val.item())
        else:
            text = str(val)
    except Exception:  # an exotic literal: its type still says something
        text = f"<{type(val).__name__}>"
    return text if len(text) <= 24 else text[:23] + "…"


# How each primitive's sub-jaxpr inputs relate to the equation's inputs, one rule
# per primitive: (in_roles, out_roles, operands), operands[i] the equation input
# feeding the sub-jaxpr's input i (-1 for none).
_Roles = tuple[tuple[str, ...], tuple[str, ...], tuple[int, ...]]


def _sub_roles(primitive: str, label: str, params: Any, n_in: int, n_out: int,
               n_eqn_in: int) -> _Roles:
    rule = _ROLE_RULES.get(primitive)
    if rule is not None:
        try:
            roles = rule(label, params, n_in, n_out)
        except Exception:  # params of another JAX version: roles unknown, edges still drawn
            roles = None
        if roles is not None and len(roles[0]) == n_in and len(roles[2]) == n_in:
            return roles
    same = n_in == n_eqn_in  # a call-like primitive: inputs pass straight through
    return (("arg" if same else "",) * n_in, ("out" if same else "",) * n_out,
            tuple(range(n_in)) if same else (-1,) * n_in)


def _cond_roles(label: str, params: Any, n_in: int, n_out: int) -> _Roles:
    return ("operand",) * n_in, ("out",) * n_out, tuple(range(1, n_in + 1))


def _scan_groups(params: Any) -> tuple[int, int]:
    if "num_consts" in params:
        return int(params["num_consts"]), int(params["num_carry"])
    consts, carry, _ = params["ft_in"].unpack()  # jax >= 0.12: a flat tree of the three groups
    return len(consts.vals), len(carry.vals)


def _scan_roles(label: str, params: Any, n_in: int, n_out: int) -> _Roles:
    n_consts, n_carry = _scan_groups(params)
    n_xs = n_in - n_consts - n_carry
    ins = ("const",) * n_consts + ("carry",) * n_carry + ("xs",) * n_xs
    return ins, ("carry",) * n_carry + ("ys",) * (n_out - n_carry), tuple(range(n_in))


def _while_roles(label: str, params: Any, n_in: int, n_out: int) -> _Roles | None:
    cond_n, body_n = int(params["cond_nconsts"]), int(params["body_nconsts"])
    if label == "cond_jaxpr":
        n_carry = n_in - cond_n
        operands = tuple(range(cond_n)) + tuple(range(cond_n + body_n, cond_n + body_n + n_carry))
        return ("const",) * cond_n + ("carry",) * n_carry, ("pred",) * n_out, operands
    if label == "body_jaxpr":
        n_carry = n_in - body_n
        operands = tuple(range(cond_n, cond_n + body_n + n_carry))
        return ("const",) * body_n + ("carry",) * n_carry, ("carry",) * n_out, operands
    return None


def _consts_roles(label: str, params: Any, n_in: int, n_out: int) -> _Roles | None:
    if label not in ("call_jaxpr", "fun_jaxpr"):
        return None
    n_consts = int(params.get("num_consts", 0))
    return (("const",) * n_consts + ("arg",) * (n_in - n_consts), ("out",) * n_out,
            tuple(range(n_in)))


_ROLE_RULES: dict[str, Callable[[str, Any, int, int], _Roles | None]] = {
    "cond": _cond_roles,
    "scan": _scan_roles,
    "while": _while_roles,
    "custom_jvp_call": _consts_roles,
    "custom_vjp_call": _consts_roles,
    "custom_vjp_call_jaxpr": _consts_roles,
}


# Summaries of tracebacks during one capture, keyed by the traceback: JAX's
# tracebacks hash and compare by their frames, so the equations a loop made on
# one line, and a derived stage's equations, are summarized once. None between
# captures (the keys keep their frames' code alive).
_source_texts: dict[Any, str] | None = None


def _source_text(source_info: Any) -> str:
    tb, cache = source_info.traceback, _source_texts
    if cache is None or tb is None:
        return sys.intern(source_info_util.summarize(source_info))
    text = cache.get(tb)
    if text is None:
        text = cache[tb] = sys.intern(source_info_util.summarize(source_info))
    return text


def histogram(primitives: Any) -> tuple[PrimitiveCount, ...]:
    """Primitive counts, most frequent first (ties by name)."""
    ordered = sorted(Counter(primitives).items(), key=lambda kv: (-kv[1], kv[0]))
    return tuple(PrimitiveCount(p, n) for p, n in ordered)


# --- arguments -----------------------------------------------------------------

@dataclass(frozen=True)
class _Split:
    """Which arguments are traced; the others stay as given (static).

    At the outermost call every JAX value is traced, as `jax.make_jaxpr` does.
    Inside a probe only tracers are: what the transformation left concrete
    (static jit arguments) stays concrete for the inner stages too.
    """
    static_argnums: tuple[int, ...]
    static_kwargs: tuple[str, ...]
    tree: Any  # of the traced part, which a later call must match

    @classmethod
    def of(cls, args: tuple, kwargs: dict, in_probe: bool) -> _Split:
        traced = _is_tracer if in_probe else _is_jax_value
        split = cls(tuple(i for i, a in enumerate(args) if _all_static(a, traced)),
                    tuple(k for k, v in kwargs.items() if _all_static(v, traced)), None)
        tree = jax.tree_util.tree_structure(split.traced_part(args, kwargs))
        return cls(split.static_argnums, split.static_kwargs, tree)

    def traced_part(self, args: tuple, kwargs: dict) -> tuple[list, dict]:
        return ([a for i, a in enumerate(args) if i not in self.static_argnums],
                {k: v for k, v in kwargs.items() if k not in self.static_kwargs})

    def make_jaxpr(self, fun: Callable, args: tuple, kwargs: dict) -> tuple[Any, Any]:
        """(jaxpr, output shapes) of fun at these arguments, statics left concrete."""
        statics = {k: kwargs[k] for k in self.static_kwargs}
        target = functools.partial(fun, **statics) if statics else fun
        _, traced_kwargs = self.traced_part((), kwargs)
        return jax.make_jaxpr(target, static_argnums=self.static_argnums,
                              return_shape=True)(*args, **traced_kwargs)


def _all_static(x: Any, traced: Callable[[Any], bool]) -> bool:
    leaves = jax.tree_util.tree_leaves(x)
    return bool(leaves) and not any(traced(leaf) for leaf in leaves)


def _is_tracer(x: Any) -> bool:
    return isinstance(x, jax.core.Tracer)


def _is_jax_value(x: Any) -> bool:
    return isinstance(x, jax.core.Tracer) or valid_jaxtype(x)


def _name_like(f: Any, fun: Any) -> None:
    # JAX names jit modules and pjit equations after __name__, and its errors
    # point at the function found through __wrapped__: the user's, not ours.
    f.__name__ = f.__qualname__ = _recorder.function_name(fun)
    f.__wrapped__ = fun


def _call_key(args: tuple, kwargs: dict) -> tuple:
    """What must match for a probe's captured jaxpr to stand in for the function."""
    leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
    return tree, tuple(_leaf_key(x) for x in leaves)


def _leaf_key(x: Any) -> Any:
    if isinstance(x, jax.core.Tracer) or hasattr(x, "aval"):
        aval = x.aval
        return ("aval", aval.shape, str(aval.dtype), getattr(aval, "weak_type", False))
    return ("static", id(x))


def _evaluator(closed: Any, shape: Any, split: _Split, fallback: Callable) -> Callable:
    """A function computing what the jaxpr computes, with the original pytrees."""
    run = jaxpr_as_fun(closed)
    out_tree = jax.tree_util.tree_structure(shape)

    def evaluate(*args, **kwargs):
        leaves, tree = jax.tree_util.tree_flatten(split.traced_part(args, kwargs))
        if tree != split.tree:
            return fallback(*args, **kwargs)
        return jax.tree_util.tree_unflatten(out_tree, run(*leaves))
    _name_like(evaluate, fallback)
    return evaluate


def _literal_options(options: tuple) -> dict | None:
    """The options a wrapper recorded (as reprs), or None if one is not a literal."""
    try:
        return {key: literal(text) for key, text in options}
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


# --- the chain -----------------------------------------------------------------

@dataclass
class _Captured:
    stages: list[Stage]
    final: Callable        # computes this level: evaluates its jaxpr, or the real function
    derived: bool = False  # final evaluates a captured jaxpr


# Transformations that stage a captured jaxpr equation by equation, exactly as
# they stage the function it came from.
_EQUATION_WISE = frozenset({"vmap", "jit"})


def _stand_in(captured: _Captured, fun: Callable, outer_kind: str) -> tuple[Callable, bool]:
    """What the outer transformation is applied to, and whether it is a captured jaxpr.

    vmap and jit get the captured jaxpr: what they make of it is what they
    make of the function, and user Python is not run again. Autodiff gets
    the function itself: on jax 0.12 differentiating a jaxpr can order
    residuals and accumulations unlike differentiating the function
    (jax.vjp's residuals; grad(grad(f))'s add_any).
    """
    if captured.derived and outer_kind in _EQUATION_WISE:
        return captured.final, True
    return fun, False


class _Probe:
    """Stands in for the function a transformation wraps; captures its stages on the first call."""

    def __init__(self, fun: Callable, outer_kind: str):
        self.fun = fun
        self.outer_kind = outer_kind
        self.captured: _Captured | None = None
        self.key: tuple | None = None
        self.derived = False
        self.raised = False
        self.seconds = 0.0
        _name_like(self, fun)

    def __call__(self, *args, **kwargs):
        key = _call_key(args, kwargs)
        if self.captured is None:
            start = time.perf_counter()
            self.captured = _capture(self.fun, args, kwargs, in_probe=True)
            self.key = key
            self.seconds += time.perf_counter() - start
        fun = self.fun  # a later call at other types (a retrace) runs the real function
        if key == self.key:
            fun, self.derived = _stand_in(self.captured, self.fun, self.outer_kind)
        try:
            return fun(*args, **kwargs)
        except BaseException:
            self.raised = True
            raise


def _exprs(fun: Any) -> tuple[str, str]:
    """The chain as an expression of `f`, and with the function's real name."""
    spec = _api.spec_of(fun)
    if spec is None:
        return "f", _recorder.function_name(fun)
    expr, named = _exprs(spec.fun)
    return f"{spec.kind}({expr})", f"{spec.kind}({named})"


def _capture(fun: Callable, args: tuple, kwargs: dict, in_probe: bool) -> _Captured:
    spec = _api.spec_of(fun)
    if spec is None:
        return _capture_function(fun, args, kwargs, in_probe)
    return _capture_spec(spec, args, kwargs, in_probe)


def _capture_spec(spec: Any, args: tuple, kwargs: dict, in_probe: bool) -> _Captured:
    if spec.kind == "jit":
        return _capture_jit(spec, args, kwargs, in_probe)
    return _capture_transform(spec, args, kwargs, in_probe)


def _capture_function(fun: Callable, args: tuple, kwargs: dict, in_probe: bool) -> _Captured:
    """The jaxpr of the user's function."""
    label = _Label("f", _recorder.function_name(fun), "f")
    method = "jax.make_jaxpr(f)"
    split = _Split.of(args, kwargs, in_probe)
    start = time.perf_counter()
    try:
        closed, shape = split.make_jaxpr(fun, args, kwargs)
    except Exception as e:  # e.g. Python control flow on a traced value
        return _Captured([_failed(label, method, _reason(e), time.perf_counter() - start)], fun)
    stage = _built(label, closed, method, time.perf_counter() - start)
    return _Captured([stage], _evaluator(closed, shape, split, fun), derived=True)


def _data_args(spec: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict, dict]:
    """(args, kwargs) to trace, and kwargs that configure jax.jvp/vjp/linearize."""
    if spec.kind in _CALLED:
        return args, {}, kwargs
    return args, kwargs, {}


def _f_args(spec: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
    """The arguments the wrapped function sees, where they are the call's own."""
    if spec.kind == "vmap":
        return None  # per-example values: only a probe inside vmap sees them
    if spec.kind == "jvp":
        return tuple(args[0]), {}
    if spec.kind in _CALLED:
        return args, {}
    return args, kwargs


def _rebuilder(spec: Any) -> tuple[Callable[[Callable], Callable], str] | None:
    """jax.<kind> around another function, with the recorded options, and how it reads."""
    jax_transform = getattr(jax, spec.kind, None)
    if jax_transform is None:
        return None
    if spec.kind in _CALLED:
        return (lambda h: functools.partial(jax_transform, h)), f"jax.{spec.kind}(<{{inner}}>, ...)"
    options = _literal_options(spec.options)
    if spec.kind not in _WRAPPERS or options is None:
        return None
    shown = "".join(f", {key}={text}" for key, text in spec.options)
    return (lambda h: jax_transform(h, **options)), f"jax.{spec.kind}(<{{inner}}>{shown})"


def _capture_transform(spec: Any, args: tuple, kwargs: dict, in_probe: bool) -> _Captured:
    """Inner stages (via the probe), this transformation's autodiff stages, its own jaxpr."""
    expr_in, named_in = _exprs(spec.fun)
    label = _Label(f"{spec.kind}({expr_in})", f"{spec.kind}({named_in})", "transformed", spec.kind)
    data_args, data_kwargs, config = _data_args(spec, args, kwargs)
    split = _Split.of(data_args, data_kwargs, in_probe)
    probe = _Probe(spec.fun, spec.kind)
    start = time.perf_counter()
    closed, shape, method, error = _trace_transform(spec, probe, split, data_args, data_kwargs,
                                                    config)
    seconds = time.perf_counter() - start - probe.seconds
    inner = probe.captured or _not_reached_inner(spec, args, kwargs, in_probe, expr_in, error)
    stages = list(inner.stages)
    h, _ = _stand_in(inner, spec.fun, spec.kind)
    stages += _ad_stages(spec, h, _jaxpr_stand_in(spec, inner, probe, args, kwargs), args, kwargs,
                         expr_in, named_in)
    method = method.replace("{inner}", f"jaxpr of {expr_in}" if probe.derived else expr_in)
    if closed is None:
        stages.append(_failed(label, method, error, seconds))
        return _Captured(stages, spec.transformed)
    stages.append(_built(label, closed, method, seconds))
    return _Captured(stages, _evaluator(closed, shape, split, spec.transformed), derived=True)


def _jaxpr_stand_in(spec: Any, inner: _Captured, probe: _Probe, args: tuple,
                    kwargs: dict) -> Callable | None:
    """The captured jaxpr of the wrapped function, where it was captured at these arguments."""
    f_args = _f_args(spec, args, kwargs)
    plain = _api.spec_of(spec.fun) is None
    if not (plain and inner.derived) or probe.key is None or f_args is None:
        return None
    return inner.final if _call_key(*f_args) == probe.key else None


def _trace_transform(spec: Any, probe: _Probe, split: _Split, args: tuple, kwargs: dict,
                     config: dict) -> tuple:
    """make_jaxpr of the rebuilt transformation; if it cannot be rebuilt, of the recorded one."""
    rebuilt = _rebuilder(spec)
    if rebuilt is not None:
        build, shown = rebuilt
        method = f"jax.make_jaxpr({shown})"
        try:
            closed, shape = split.make_jaxpr(_configured(build(probe), config), args, kwargs)
            return closed, shape, method, ""
        except Exception as e:
            if probe.raised:  # the user's function failed: tracing it again would too
                return None, None, method, _reason(e)
    # Options we cannot rebuild (or that rebuilt differently): the recorded function itself.
    method = f"jax.make_jaxpr(<the recorded {spec.kind}>)"
    try:
        closed, shape = split.make_jaxpr(_configured(spec.transformed, config), args, kwargs)
        return closed, shape, method, ""
    except Exception as e:
        return None, None, method, _reason(e)


def _configured(fun: Callable, config: dict) -> Callable:
    """fun with the keyword options of jax.jvp/vjp/linearize, which are not data."""
    if not config:
        return fun

    def with_config(*args, **kwargs):
        return fun(*args, **kwargs, **config)
    _name_like(with_config, fun)
    return with_config


def _not_reached_inner(spec: Any, args: tuple, kwargs: dict, in_probe: bool, expr_in: str,
                       error: str) -> _Captured:
    """The transformation failed before calling its function: capture it directly if we can."""
    f_args = _f_args(spec, args, kwargs)
    if f_args is not None:
        return _capture(spec.fun, *f_args, in_probe=in_probe)
    role = "f" if expr_in == "f" else "transformed"
    label = _Label(expr_in, _exprs(spec.fun)[1], role)
    if error:
        reason = f"not reached: {spec.kind} failed before calling the function ({error})"
    else:  # traced as recorded, without a probe: the per-example arguments stayed inside
        reason = (f"not captured: {spec.kind}'s recorded options are not literals, so the "
                  f"arguments it passes to the function are unknown")
    return _Captured([_failed(label, "", reason)], spec.fun)


# --- autodiff stages -----------------------------------------------------------

def _ad_stages(spec: Any, h: Callable, captured: Callable | None, args: tuple, kwargs: dict,
               expr_in: str, named_in: str) -> list[Stage]:
    roles = AD_STAGES.get(spec.kind, ())
    if not roles:
        return []
    labels = {
        "jvp": _Label(f"jvp({expr_in})", f"JVP of {named_in}: primal and tangent outputs",
                      "jvp", spec.kind),
        "linearized": _Label(f"linearize({expr_in})",
                             f"linearized {named_in}: primal outputs and residuals",
                             "linearized", spec.kind),
        "linear": _Label(f"linear({expr_in})", f"linear tangent map of {named_in}",
                         "linear", spec.kind),
        "transposed": _Label(f"transpose(linear({expr_in}))",
                             f"backward pass of {named_in}: the transposed linear map",
                             "transposed", spec.kind),
    }
    try:
        point = _Point.of(spec, h, args, kwargs)
        # JVP of the user's function, applied equation by equation, is JVP of its
        # captured jaxpr: user Python is not run again. NB: only for the user's
        # function; a transform's jaxpr may differentiate otherwise (see _stand_in).
        jvp_point = point if captured is None else _Point.of(spec, captured, args, kwargs, True)
    except Exception as e:  # e.g. argnums out of range: every autodiff stage says so
        return [_failed(labels[r], "", _reason(e)) for r in roles]
    stages = [jvp_point.jvp_stage(labels["jvp"])] if "jvp" in roles else []
    if "linear" in roles:
        stages += point.linearize_stages(labels, roles)
    if "transposed" in roles:
        stages.append(point.transposed_stage(labels["transposed"]))
    return stages


@dataclass(frozen=True)
class _Point:
    """The function being differentiated, as a function of its differentiated arguments."""
    fun: Callable
    primals: tuple
    has_aux: bool
    derived: bool = False  # fun evaluates the captured jaxpr of the function

    @classmethod
    def of(cls, spec: Any, h: Callable, args: tuple, kwargs: dict, derived: bool = False) -> _Point:
        if spec.kind in _CALLED:
            f_args, f_kwargs, has_aux = args, {}, bool(kwargs.get("has_aux", False))
            positions: tuple[int, ...] = tuple(range(len(args)))
        else:
            options = _literal_options(spec.options) or {}
            argnums = options.get("argnums", 0)
            positions = (argnums,) if isinstance(argnums, int) else tuple(argnums)
            f_args, f_kwargs, has_aux = args, kwargs, bool(options.get("has_aux", False))
        primals = tuple(f_args[i] for i in positions)

        def of_primals(*xs):
            full = list(f_args)
            for i, x in zip(positions, xs):
                full[i] = x
            return h(*full, **f_kwargs)
        _name_like(of_primals, h)
        return cls(of_primals, primals, has_aux, derived)

    def jvp_stage(self, label: _Label) -> Stage:
        def jvp(primals, tangents):
            return jax.jvp(self.fun, primals, tangents, has_aux=self.has_aux)
        _name_like(jvp, self.fun)
        shown = "<jaxpr of f>" if self.derived else "f"
        return _stage_of(label, f"jax.make_jaxpr(jax.jvp({shown}, primals, tangents))",
                         lambda: jax.make_jaxpr(jvp)(self.primals, self.primals))

    def linearize_stages(self, labels: dict[str, _Label], roles: tuple[str, ...]) -> list[Stage]:
        """One jax.linearize gives the primal-with-residuals and the linear jaxprs."""
        inside: dict[str, Stage] = {}

        def linearized(*primals):
            out = jax.linearize(self.fun, *primals, has_aux=self.has_aux)
            inside["linear"] = _stage_of(labels["linear"],
                                         "jax.make_jaxpr(jax.linearize(f, *primals)[1])",
                                         lambda: jax.make_jaxpr(out[1])(*primals))
            return out
        _name_like(linearized, self.fun)

        method = "jax.make_jaxpr(jax.linearize(f, *primals))"
        start = time.perf_counter()
        try:
            closed = jax.make_jaxpr(linearized)(*self.primals)
        except Exception as e:
            first = _failed(labels["linearized"], method, _reason(e), time.perf_counter() - start)
        else:
            seconds = time.perf_counter() - start - sum(s.seconds for s in inside.values())
            first = _built(labels["linearized"], closed, method, seconds)
        linear = inside.get("linear") or _failed(
            labels["linear"], "", f"not reached: jax.linearize failed ({first.reason})")
        return [first, linear] if "linearized" in roles else [linear]

    def transposed_stage(self, label: _Label) -> Stage:
        """The backward pass as `jax.vjp(f, *primals)[1]` stages it.

        NB: its own linearization, not a transpose of linearize's linear map:
        jax 0.12's vjp orders the residuals differently, and
        `jax.linear_transpose` of that map stages work on residuals alone
        (a cond's) that vjp's backward pass does not have.
        """
        method = "jax.make_jaxpr(jax.vjp(f, *primals)[1])"
        inside: dict[str, Stage] = {}

        def forward(*primals):
            out = jax.vjp(self.fun, *primals, has_aux=self.has_aux)
            inside["stage"] = _stage_of(label, method, lambda: jax.make_jaxpr(out[1])(out[0]))
            return out[0]
        _name_like(forward, self.fun)

        start = time.perf_counter()
        try:
            jax.make_jaxpr(forward)(*self.primals)
        except Exception as e:  # the forward pass failed: the backward one is not reached
            if "stage" not in inside:
                return _failed(label, method, _reason(e), time.perf_counter() - start)
        return dataclasses.replace(inside["stage"], seconds=time.perf_counter() - start)


# --- jit: the compiled views ---------------------------------------------------

def _capture_jit(spec: Any, args: tuple, kwargs: dict, in_probe: bool) -> _Captured:
    """The jaxpr jit traces, then StableHLO, optimised HLO, cost and memory."""
    expr_in, named_in = _exprs(spec.fun)
    expr, named = f"jit({expr_in})", f"jit({named_in})"
    plain = _api.spec_of(spec.fun) is None
    probe = None if plain else _Probe(spec.fun, "jit")
    jitted = spec.transformed
    if probe is not None:
        options = _literal_options(spec.options)
        if options is not None:
            jitted = jax.jit(probe, **options)
    start = time.perf_counter()
    traced, error = None, ""
    try:
        traced = jitted.trace(*args, **kwargs)
    except Exception as e:
        error = _reason(e)
    seconds = time.perf_counter() - start - (probe.seconds if probe is not None else 0.0)
    if plain:
        label = _Label("f", named_in, "f")
        method = "jax.jit(f).trace(*args).jaxpr"
        stages = [_failed(label, method, error, seconds) if traced is None
                  else _built(label, traced.jaxpr, method, seconds)]
    elif probe is not None and probe.captured is not None:
        stages = list(probe.captured.stages)
    else:
        stages = list(_capture(spec.fun, args, kwargs, in_probe).stages)
    stages += _compiled_stages(traced, error, expr, named)
    return _Captured(stages, jitted)


def _compiled_stages(traced: Any, error: str, expr: str, named: str) -> list[Stage]:
    labels = [
        _Label(f"stablehlo({expr})", f"StableHLO of {named}", "stablehlo", "jit"),
        _Label(f"hlo({expr})", f"optimised HLO of {named}", "hlo", "jit"),
        _Label(f"cost({expr})", f"cost analysis of {named}", "cost", "jit"),
        _Label(f"memory({expr})", f"memory analysis of {named}", "memory", "jit"),
    ]
    if traced is None:
        return [_failed(label, "", f"not reached: jit tracing failed ({error})") for label in labels]
    stablehlo, hlo, cost, memory = labels
    start = time.perf_counter()
    try:
        lowered = traced.lower()
        text = lowered.as_text()
    except Exception as e:
        first = _failed(stablehlo, "jax.jit(f).lower(*args).as_text()", _reason(e),
                        time.perf_counter() - start)
        return [first] + [_failed(label, "", f"not reached: lowering failed ({first.reason})")
                          for label in (hlo, cost, memory)]
    stages = [_text_stage(stablehlo, "jax.jit(f).lower(*args).as_text()", text, start)]
    start = time.perf_counter()
    try:
        compiled = lowered.compile()
        text = compiled.as_text()
    except Exception as e:
        failed = _failed(hlo, "jax.jit(f).lower(*args).compile().as_text()", _reason(e),
                         time.perf_counter() - start)
        not_reached = f"not reached: compilation failed ({failed.reason})"
        return stages + [failed] + [_failed(label, "", not_reached) for label in (cost, memory)]
    stages.append(_sharding.with_compiled_view(
        _text_stage(hlo, "jax.jit(f).lower(*args).compile().as_text()", text, start), compiled))
    stages.append(_metrics_stage(cost, "compiled.cost_analysis()",
                                 lambda: _cost_metrics(compiled.cost_analysis())))
    stages.append(_metrics_stage(memory, "compiled.memory_analysis()",
                                 lambda: _memory_metrics(compiled.memory_analysis())))
    return stages


def _text_stage(label: _Label, method: str, text: Any, start: float) -> Stage:
    if not isinstance(text, str):
        return _failed(label, method, f"{method} gave {type(text).__name__}, not text",
                       time.perf_counter() - start)
    return Stage(label.name, label.title, text=text, role=label.role, transform=label.transform,
                 method=method, seconds=time.perf_counter() - start)


def _metrics_stage(label: _Label, method: str, metrics: Callable[[], tuple[Metric, ...]]) -> Stage:
    start = time.perf_counter()
    try:
        found = metrics()
    except Exception as e:  # a backend without this analysis
        return _failed(label, method, _reason(e), time.perf_counter() - start)
    return Stage(label.name, label.title, role=label.role, transform=label.transform,
                 method=method, metrics=found, seconds=time.perf_counter() - start)


def _cost_metrics(cost: Any) -> tuple[Metric, ...]:
    if isinstance(cost, (list, tuple)):  # older jax: a list, one dict per computation
        cost = cost[0] if cost else None
    if not isinstance(cost, Mapping):
        raise TypeError(f"cost_analysis() returned {type(cost).__name__}, not a mapping")
    numbers = {str(k): v for k, v in cost.items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return _ordered(numbers, _COST_FIRST)


def _memory_metrics(stats: Any) -> tuple[Metric, ...]:
    if stats is None:
        raise TypeError("memory_analysis() returned None on this backend")
    numbers = {}
    for name in dir(stats):
        if not name.startswith("_"):
            value = getattr(stats, name)
            if isinstance(value, int) and not isinstance(value, bool):
                numbers[name] = value
    return _ordered(numbers, _MEMORY_FIRST)


def _ordered(numbers: dict, first: Sequence[str]) -> tuple[Metric, ...]:
    keys = [k for k in first if k in numbers] + sorted(k for k in numbers if k not in first)
    return tuple(Metric(k, numbers[k]) for k in keys)


# --- growth: program size against batch size -------------------------------------

def growth(funs: Mapping[str, Callable], make_args: Callable[[int], tuple],
           sizes: Sequence[int] = (1, 2, 3, 4), title: str = "") -> Growth:
    """Equation counts of each function's staged program at each batch size.

    `make_args(n)` gives the arguments for batch size n (arrays or
    jax.ShapeDtypeStruct). Staging records nothing. Inside a `record()` block
    the result is also kept on the call recorded last (`Call.growth`): call
    it right after the call it measures.
    """
    if not funs:
        raise ValueError("growth() needs at least one function, e.g. {'loop': f, 'vmap': g}")
    sizes = tuple(sizes)
    if not sizes or any(not isinstance(n, int) or isinstance(n, bool) or n < 1 for n in sizes):
        raise ValueError(f"growth() sizes must be positive ints, got {sizes!r}")
    with _recorder.recording_off():
        series = tuple(GrowthSeries(label, tuple(_growth_point(fun, make_args, n) for n in sizes))
                       for label, fun in funs.items())
    result = Growth(title or "equations per batch size", series)
    session = _recorder.active_session()
    if session is not None:
        session.add_growth(result)
    return result


def _growth_point(fun: Callable, make_args: Callable[[int], tuple], size: int) -> GrowthPoint:
    try:
        closed = jax.make_jaxpr(fun)(*make_args(size))
    except Exception as e:  # this size cannot be staged; the other sizes still count
        return GrowthPoint(size, error=_reason(e))
    eqns = closed.jaxpr.eqns
    return GrowthPoint(size, len(eqns), histogram(e.primitive.name for e in eqns))
