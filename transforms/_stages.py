"""Stages of a transformation pipeline, from what the call itself traced.

Nothing here runs the user's Python again. While the first call of each
signature runs, the recorder keeps a `_tape.Tape` of what the user's
function bound (the program that ran, at these values) and the argument
types each wrapper was entered with (`StagePlan`). After the call the chain
is rebuilt from the innermost function outwards: f is the tape replayed
under `jax.make_jaxpr`; each transformation is JAX's own, with the recorded
options, applied to the replay. `vmap(grad(f))` gives f -> jvp(f) ->
linearize(f) -> linear(f) -> transpose(linear(f)) -> grad(f) ->
vmap(grad(f)): the replay binds exactly the primitives f bound, with the
same params, so each stage is the jaxpr JAX makes of that transformation of f
(tests compare every one with JAX's make_jaxpr). Under grad, Python control
flow on values is the branch that ran, and the stage says so.

A top-level jit is JAX's own trace: our entry runs inside it, so its jaxpr,
StableHLO, HLO, cost and memory are read once the trace is over
(`DeferredJit`), from JAX's caches, at the arguments' shardings and mesh.

A stage JAX cannot produce is recorded as unavailable with the reason; a
failing stage never stops the others.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import inspect
import sys
import threading
import time
import warnings
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import jax
import numpy as np
from jax.extend import source_info_util
from jax.extend.core import DropVar, Literal

from . import _api, _recorder, _sharding  # NB: _api and _recorder import this module
from . import _interpreters as _i
from ._interpreters import jax_own
from ._jaxpr_text import eqn_line_spans
from ._rules import summarize_params
from ._snapshot import aval_text, jaxpr_record
from ._tape import RuleTapes, Tape, abstract, closures_bound, is_array_like
from ._trees import literal
from .model import (
    EqnRecord,
    Growth,
    GrowthPoint,
    GrowthSeries,
    Metric,
    PrimitiveCount,
    SourceLocation,
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
# Calls of the function a vjp/linearize returned: the forward call's stages are theirs.
BACKWARD_CALLS = frozenset({"vjp_backward", "linearize_jvp"})

# cost_analysis() keys shown first, in this order; the rest follow sorted.
_COST_FIRST = ("flops", "transcendentals", "bytes accessed")
_MEMORY_FIRST = ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes",
                 "alias_size_in_bytes", "generated_code_size_in_bytes", "peak_memory_in_bytes")


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
    record = jaxpr_record(label.name, closed)
    return Stage(label.name, label.title, jaxpr=record, role=label.role,
                 transform=label.transform, method=method, eqns=eqns,
                 eqn_spans=eqn_line_spans(record.text, record.eqn_count),
                 histogram=histogram(e.primitive for e in eqns),
                 seconds=seconds + time.perf_counter() - start,
                 in_vars=in_vars, out_vars=namer.names(jaxpr.outvars), const_vars=const_vars)


def _stage_of(label: _Label, method: str, make: Callable[[], Any]) -> Stage:
    """Run `make` (returning a jaxpr) and record it, or its failure."""
    start = time.perf_counter()
    with _rule_notes() as notes:
        try:
            closed = make()
        except Exception as e:  # this stage failed for these inputs; the others go on
            return _failed(label, method, _reason(e), time.perf_counter() - start)
    return _noted(_built(label, closed, method, time.perf_counter() - start), notes)


# What the group being captured notes while its rules are replayed (a custom
# body staged as its rule's primal part): RuleTapes.notes, read per stage.
_group_notes: list[str] = []


@contextlib.contextmanager
def _rule_notes() -> Iterator[list[str]]:
    """The notes made while staging inside the block (a nested stage takes its own)."""
    notes = _group_notes
    found: list[str] = []
    mark = len(notes)
    try:
        yield found
    finally:
        found.extend(dict.fromkeys(notes[mark:]))
        del notes[mark:]


def _noted(stage: Stage, notes: list[str]) -> Stage:
    if not notes or not stage.available:
        return stage
    return dataclasses.replace(stage, note=joined_notes(stage.note, *notes))


def joined_notes(*notes: str) -> str:
    """Sentences one after the other (a note without a full stop gets one when followed)."""
    found = [n for n in notes if n]
    return " ".join([n if n.endswith(".") or i == len(found) - 1 else n + "."
                     for i, n in enumerate(found)])


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
        source, location = _source_of(info)
        records.append(EqnRecord(
            name, params,
            tuple(aval_text(v.aval) for v in eqn.invars),
            tuple(aval_text(v.aval) for v in eqn.outvars),
            source, stack, in_vars, out_vars, subjaxprs, location))
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


def _scan_roles(label: str, params: Any, n_in: int, n_out: int) -> _Roles:
    n_consts, n_carry = _i.scan_groups(params)
    n_xs = n_in - n_consts - n_carry
    ins = ("const",) * n_consts + ("carry",) * n_carry + ("xs",) * n_xs
    return ins, ("carry",) * n_carry + ("ys",) * (n_out - n_carry), tuple(range(n_in))


def _while_roles(label: str, params: Any, n_in: int, n_out: int) -> _Roles | None:
    cond_n, body_n = _i.while_consts(params)
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
    n_consts = _i.call_consts(params)
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


# Sources of tracebacks during one capture, keyed by the traceback: JAX's
# tracebacks hash and compare by their frames, so the equations a loop made on
# one line, and a derived stage's equations, are summarized once. None between
# captures (the keys keep their frames' code alive).
_source_texts: dict[Any, tuple[str, SourceLocation | None]] | None = None


def _source_of(source_info: Any) -> tuple[str, SourceLocation | None]:
    """An equation's source: as JAX prints it, and as a location (one record per line)."""
    tb, cache = source_info.traceback, _source_texts
    if cache is None or tb is None:
        return _source_uncached(source_info)
    found = cache.get(tb)
    if found is None:
        found = cache[tb] = _source_uncached(source_info)
    return found


_source_locations: dict[tuple[str, int, str], SourceLocation] = {}


def _source_uncached(source_info: Any) -> tuple[str, SourceLocation | None]:
    frame = _i.source_frame(source_info)
    location = None
    if frame is not None:
        location = _source_locations.get(frame)
        if location is None:
            if len(_source_locations) > 10_000:
                _source_locations.clear()
            location = _source_locations[frame] = SourceLocation(*frame)
    return sys.intern(source_info_util.summarize(source_info)), location


def histogram(primitives: Any) -> tuple[PrimitiveCount, ...]:
    """Primitive counts, most frequent first (ties by name)."""
    ordered = sorted(Counter(primitives).items(), key=lambda kv: (-kv[1], kv[0]))
    return tuple(PrimitiveCount(p, n) for p, n in ordered)



# --- what a call's capture needs, gathered while the call runs -----------------------

def chain_of(spec: Any) -> list:
    """The wrappers of a call, outermost first: vmap(grad(f)) -> [vmap, grad]."""
    chain = [spec]
    while len(chain) < 64:
        inner = _api.spec_of(chain[-1].fun)
        if inner is None:
            break
        chain.append(inner)
    return chain


def abstract_point(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """(args, kwargs) with every array and tracer replaced by its type (other leaves kept)."""
    leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
    return jax.tree_util.tree_unflatten(tree, [abstract(x) if is_array_like(x) else x
                                               for x in leaves])


def _point_text(fun: Any, args: tuple) -> str:
    """`x=2.0, n=3`: the call's small concrete arguments, for a branch's note."""
    from ._snapshot import describe_concrete
    names = _parameter_names(fun)
    parts = []
    for i, a in enumerate(args[:6]):
        if isinstance(a, _i.Tracer):
            return ""
        leaves = jax.tree_util.tree_leaves(a)
        value = describe_concrete(a).value if len(leaves) == 1 and leaves[0] is a else None
        if value is None:
            return ""
        parts.append(f"{names[i] if i < len(names) else f'args[{i}]'}={value}")
    return ", ".join(parts)


# Eager calls whose executed primitives are their transformation's program, as
# jax.make_jaxpr(jax.<kind>(f)) stages it (each primitive bound in the same order).
_EXECUTED = frozenset({"grad", "value_and_grad", "vmap", "jacfwd", "jacrev", "hessian"})

# The most transformations inside one call that get stages of their own.
MAX_NESTED_GROUPS = 16


@dataclass
class _Group:
    """One transformation with its own stages: the call's, or one called inside it."""
    spec: Any
    point: tuple        # the (args, kwargs) it was called with, arrays as their types
    nested: bool = False
    tape: Tape | None = None
    point_text: str = ""
    mesh: Callable[[], Any] | None = None  # a top-level jit's mesh context
    live: tuple | None = None  # the concrete (args, kwargs) of an eager call, until captured
    outer_tape: Tape | None = None  # what an eager call executed: its transformed program


class StagePlan:
    """What stage capture reads, gathered while a call runs (its signature's first call).

    The tape of each transformed user function (what it bound), and the types of
    the arguments each wrapper was entered with. Nothing here runs user code.
    """

    def __init__(self, spec: Any, args: tuple, kwargs: dict):
        self.main = _Group(spec, abstract_point(args, kwargs), point_text=_point_text(
            chain_of(spec)[-1].fun, args if spec.kind not in _CALLED else _f_args_of(spec, args)))
        if not any(isinstance(x, _i.Tracer) for x in jax.tree_util.tree_leaves((args, kwargs))):
            # autodiff stages hold the other arguments fixed at their values, as JAX would
            self.main.live = (args, kwargs)
        self.groups = [self.main]
        self.rules = RuleTapes()  # what the custom rules that ran bound: replayed, not re-run
        self.points: dict[int, tuple] = {}
        self._funs: list[Any] = []  # alive while the plan is: their ids stay unique
        self._waiting: dict[int, list[_Group]] = {}
        self._nested_keys: set = set()
        self._in_chains: set[int] = set()
        chain = chain_of(spec)
        if not (len(chain) == 1 and spec.kind == "jit"):  # a plain jit's f is jit's own trace
            self._wait(self.main)

    def _wait(self, group: _Group) -> None:
        chain = chain_of(group.spec)
        self._in_chains.update(id(s.transformed) for s in chain)
        f = chain[-1].fun
        self._funs.append(f)
        self._waiting.setdefault(id(f), []).append(group)

    def nested_call(self, spec: Any, args: tuple, kwargs: dict) -> None:
        """A transformation called while the call runs (a value_and_grad inside a jitted step)."""
        if len(self.groups) > MAX_NESTED_GROUPS or id(spec.transformed) in self._in_chains:
            return  # a wrapper of a chain already captured: vmap(grad(f))'s grad
        point = abstract_point(args, kwargs)
        try:
            key = (chain_key(spec.fun), spec.kind, spec.options,
                   tuple(map(_leaf_signature, jax.tree_util.tree_leaves(point))))
            if key in self._nested_keys:
                return
            self._nested_keys.add(key)
        except TypeError:  # an unhashable static value: keep every such call
            pass
        self._funs.append(spec)
        group = _Group(spec, point, nested=True)
        self.groups.append(group)
        self._wait(group)

    def enter(self, fun: Any, args: tuple, kwargs: dict) -> Tape | None:
        """A wrapper's function is entered: keep its argument types; a tape when one is wanted."""
        key = id(fun)
        if key not in self.points:
            self.points[key] = abstract_point(args, kwargs)
            self._funs.append(fun)
        waiting = self._waiting.get(key)
        if not waiting:
            return None
        group = waiting.pop(0)
        try:
            group.tape = Tape(_recorder.function_name(fun), args, kwargs, rules=self.rules)
        except Exception:  # arguments that will not flatten: JAX reports it, f has no stage
            return None
        return group.tape

    def enter_outer(self, trace: Any, args: tuple, kwargs: dict) -> Tape | None:
        """An eager call's own level: its tape is the whole transformed program that ran.

        NB: not when a Python scalar is an argument: eager dispatch bakes it into
        the program as a literal, where make_jaxpr of the transformation traces it.
        """
        spec = self.main.spec
        if spec.kind not in _EXECUTED or type(trace).__name__ != "EvalTrace":
            return None
        if any(isinstance(x, (bool, int, float, complex))
               for x in jax.tree_util.tree_leaves((args, kwargs))):
            return None
        try:
            self.main.outer_tape = Tape(_recorder.function_name(spec.fun), args, kwargs,
                                       rules=self.rules)
        except Exception:  # arguments that will not flatten: no such stage
            return None
        return self.main.outer_tape

    def release(self) -> None:
        for group in self.groups:
            group.live = None
            if group.tape is not None:
                group.tape.release()
        self.rules.release()


def _f_args_of(spec: Any, args: tuple) -> tuple:
    return tuple(args[0]) if spec.kind == "jvp" and args else tuple(args)


# --- signatures: which calls share their stages ---------------------------------

def chain_key(fun: Any) -> tuple:
    """A wrapper chain as data, down to the user's function.

    A Python function is its code and what it closes over (arrays by type), so a
    `lambda p: loss(p, batch)` made afresh each step is the same function.
    """
    spec = _api.spec_of(fun)
    if spec is not None:
        return (spec.kind, spec.options, chain_key(spec.fun))
    code = getattr(fun, "__code__", None)
    if code is None:
        return ("id", id(fun))
    cells = tuple(_leaf_signature(_cell_value(c)) for c in (getattr(fun, "__closure__", None) or ()))
    defaults = tuple(map(_leaf_signature, getattr(fun, "__defaults__", None) or ()))
    return ("code", code, cells, defaults)


def _cell_value(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


def _leaf_signature(x: Any) -> Any:
    if isinstance(x, _i.Tracer):
        return ("traced", x.aval)
    if isinstance(x, jax.ShapeDtypeStruct):
        return ("type", x.shape, str(x.dtype), x.weak_type, x.sharding)
    if isinstance(x, jax.Array):
        aval = jax.typeof(x)
        return ("array", aval.shape, str(aval.dtype), aval.weak_type,
                x.sharding if x.committed else None)
    if isinstance(x, (np.ndarray, np.generic)):
        return ("numpy", x.shape, str(x.dtype))
    if isinstance(x, (float, complex)):  # traced as a weak type wherever it is traced
        return ("python", type(x))
    if x is None or isinstance(x, (bool, int, str, bytes)):
        return ("value", type(x), x)
    if callable(x) or isinstance(x, type):
        return chain_key(x) if callable(x) else ("id", id(x))
    return ("id", id(x))


def signature(spec: Any, args: tuple, kwargs: dict) -> tuple | None:
    """What must match for a later call to share this call's stages, or None (never)."""
    try:
        leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
        key = (chain_key(spec.fun), spec.kind, spec.options, tree,
               tuple(map(_leaf_signature, leaves)))
        hash(key)
    except Exception:  # an unhashable or unflattenable argument: captured on its own
        return None
    return key


# --- the chain -----------------------------------------------------------------

def _name_like(f: Any, fun: Any) -> None:
    # JAX names jit modules and pjit equations after __name__, and its errors
    # point at the function found through __wrapped__: the user's, not ours.
    f.__name__ = f.__qualname__ = _recorder.function_name(fun)
    f.__wrapped__ = fun


def _literal_options(options: tuple) -> dict | None:
    """The options a wrapper recorded (as reprs), or None if one is not a literal."""
    try:
        return {key: literal(text) for key, text in options}
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _settings(spec: Any) -> dict | None:
    """The wrapper's options as it was given them, else as read back from their text."""
    settings = getattr(spec, "settings", None)
    if settings is not None:
        return dict(settings)
    return _literal_options(spec.options)


def _exprs(fun: Any) -> tuple[str, str]:
    """The chain as an expression of `f`, and with the function's real name."""
    spec = _api.spec_of(fun)
    if spec is None:
        return "f", _recorder.function_name(fun)
    expr, named = _exprs(spec.fun)
    return f"{spec.kind}({expr})", f"{spec.kind}({named})"


def _data_args(spec: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict, dict]:
    """(args, kwargs) to trace, and kwargs that configure jax.jvp/vjp/linearize."""
    if spec.kind in _CALLED:
        return args, {}, kwargs
    return args, kwargs, {}


def _rebuilder(spec: Any) -> tuple[Callable[[Callable], Callable], str] | None:
    """jax.<kind> around another function, with the recorded options, and how it reads."""
    jax_transform = getattr(jax_own, spec.kind, None)
    if jax_transform is None:
        return None
    if spec.kind in _CALLED:
        return (lambda h: functools.partial(jax_transform, h)), f"jax.{spec.kind}(<{{inner}}>, ...)"
    options = _settings(spec)
    if spec.kind not in _WRAPPERS or options is None:
        return None
    shown = "".join(f", {key}={text}" for key, text in spec.options)
    return (lambda h: jax_transform(h, **options)), f"jax.{spec.kind}(<{{inner}}>{shown})"


def _configured(fun: Callable, config: dict) -> Callable:
    """fun with the keyword options of jax.jvp/vjp/linearize, which are not data."""
    if not config:
        return fun

    def with_config(*args, **kwargs):
        return fun(*args, **kwargs, **config)
    _name_like(with_config, fun)
    return with_config


# Closed-over values of the group being captured: the replayed function reads
# them (see _tape.closures_bound); every jaxpr of the group takes them as inputs.
_group_closures: tuple = ()
# Arguments an autodiff stage holds fixed whose values are not known (only
# their types): inputs of the stage's jaxpr, read by the function being
# differentiated (see _Point).
_held = threading.local()


def _held_values() -> tuple:
    return getattr(_held, "values", ())


def _with_extras(fun: Callable, n_closures: int, n_held: int) -> Callable:
    """fun(*args) as a function of (*args, *closures, *held): the extras become invars."""
    n_extra = n_closures + n_held

    def staged(*all_args, **kwargs):
        k = len(all_args) - n_extra
        prev, _held.values = _held_values(), tuple(all_args[k + n_closures:])
        try:
            with closures_bound(all_args[k:k + n_closures]):
                return fun(*all_args[:k], **kwargs)
        finally:
            _held.values = prev
    _name_like(staged, fun)
    return staged


def _make_jaxpr(fun: Callable, held: tuple = ()) -> Callable:
    """jax.make_jaxpr(fun), with the group's closures and `held` types as trailing inputs."""
    closures = _group_closures

    def make(*args, **kwargs):
        if not closures and not held:
            return jax.make_jaxpr(fun)(*args, **kwargs)
        staged = _with_extras(fun, len(closures), len(held))
        return jax.make_jaxpr(staged)(*args, *closures, *held, **kwargs)
    return make


@dataclass
class Captured:
    """A call's stages; for a top-level jit, the compiled part still to come (`later`)."""
    stages: list[Stage]
    later: DeferredJit | None = None
    nested: list[Stage] = dataclasses.field(default_factory=list)  # transformations inside

    def all_stages(self) -> tuple[Stage, ...]:
        return tuple(self.stages) + tuple(self.nested)


def capture(plan: StagePlan, call_error: str = "") -> Captured:
    """Every group's stages: the call's own chain, then each transformation inside it."""
    global _source_texts
    outer, _source_texts = _source_texts, {}
    try:
        with _young_garbage_collected_once():
            captured = _capture_group(plan.main, plan, call_error, set())
            names = {s.name for s in captured.stages}
            for group in plan.groups[1:]:
                found = _capture_group(group, plan, "", names).stages
                names.update(s.name for s in found)
                captured.nested.extend(found)
            return captured
    except Exception as e:  # a fault of ours must not fail the user's call: record it
        return Captured([failed_capture(plan.main.spec, e)])
    finally:
        _source_texts = outer


def _unique(base: str, names: set) -> str:
    name, n = base, 1
    while any(s == name or s.endswith(f"({name})") for s in names):
        n += 1
        name = f"{base}#{n}"
    return name


def _capture_group(group: _Group, plan: StagePlan, call_error: str, names: set) -> Captured:
    global _group_closures, _group_notes
    chain = chain_of(group.spec)
    f = chain[-1].fun
    named = named_f = _recorder.function_name(f)
    expr = _unique(_short_name(named), names) if group.nested else "f"
    tape = group.tape
    prev, _group_closures = _group_closures, tuple(tape.closure_types) if tape else ()
    prev_notes, _group_notes = _group_notes, plan.rules.notes
    try:
        stages: list[Stage] = []
        plain_jit = len(chain) == 1 and group.spec.kind == "jit" and not group.nested
        h = None
        if not plain_jit:
            f_stage, h = _function_stage(tape, tape.point if tape else None, expr, f, group,
                                         chain[-1], call_error)
            stages.append(f_stage)
        blocked = "" if h is not None or plain_jit else f"not reached: {_stage_reason(stages[0])}"
        for i in range(len(chain) - 1, -1, -1):
            spec = chain[i]
            point = group.point if i == 0 else plan.points.get(id(chain[i - 1].fun))
            outer_expr, outer_named = f"{spec.kind}({expr})", f"{spec.kind}({named})"
            if spec.kind == "jit" and i == 0 and not group.nested:
                later = DeferredJit(spec, group.point, expr, named, plain_jit, call_error,
                                    mesh=group.mesh)
                return Captured(stages, later)
            if point is None:
                blocked = blocked or f"not reached: {spec.kind} did not call its function"
            if spec.kind == "jit":
                jit_stages, h = _nested_jit_stages(spec, h, point, expr, named, blocked)
                stages += jit_stages
            else:
                at = group.live if i == 0 and group.live is not None else point
                stages += _ad_stages(spec, h, at, expr, named, blocked,
                                     at_values=bool(tape is not None and tape.branches()))
                stage, h = _transform_stage(spec, h, point, outer_expr, outer_named, blocked,
                                            call_error if i == 0 else "",
                                            group.outer_tape if i == 0 else None)
                stages.append(stage)
            if stages and stages[-1].available is False and h is None:
                blocked = blocked or f"not reached: {_stage_reason(stages[-1])}"
            expr, named = outer_expr, outer_named
        note = joined_notes(_branch_note(tape, group, named_f),
                            _constant_float_note(tape, f, chain[-1].kind)) if tape else ""
        if note:  # every jaxpr of the group is of the branch taken
            stages = [dataclasses.replace(s, note=joined_notes(note, s.note))
                      if s.available and s.jaxpr is not None and not s.note.startswith(note)
                      else s for s in stages]
        return Captured(stages)
    finally:
        _group_closures, _group_notes = prev, prev_notes


def _short_name(name: str) -> str:
    return name.rpartition(".")[2].replace("<", "").replace(">", "") or "f"


def _stage_reason(stage: Stage) -> str:
    reason = stage.reason
    return reason[len("not reached: "):] if reason.startswith("not reached: ") else reason


def _function_stage(tape: Tape | None, point: tuple | None, expr: str, f: Any,
                    group: _Group, inner_spec: Any, call_error: str
                    ) -> tuple[Stage, Callable | None]:
    """The user's function as it ran: its tape, replayed under make_jaxpr."""
    named = _recorder.function_name(f)
    label = _Label(expr, named, "f")
    if tape is None or point is None:
        if call_error:
            reason = (f"not reached: {inner_spec.kind} failed before calling the function "
                      f"({call_error})")
        else:
            reason = f"not reached: {inner_spec.kind} did not call {named}"
        return _failed(label, "", reason), None
    if not tape.replayable:
        return _failed(label, "", tape.problem or f"{named} did not return"), None

    def replay(*args, **kwargs):
        return tape.replay(*args, **kwargs)
    _name_like(replay, f)
    args, kwargs = point
    stage = _stage_of(label, "jax.make_jaxpr(<the primitives f bound at this call>)",
                      lambda: _make_jaxpr(replay)(*args, **kwargs))
    return stage, replay


def _constant_float_note(tape: Tape, f: Any, kind: str) -> str:
    """When a Python float argument that `kind` does not trace is a literal in the stages."""
    found = tape.constant_floats()
    if not found:
        return ""
    args, names = tape.point[0], _parameter_names(f)
    starts, at = {}, 0
    for i, a in enumerate(args):  # the leaf each positional argument starts at
        starts[at] = names[i] if i < len(names) else f"args[{i}]"
        at += len(jax.tree_util.tree_leaves(a))
    shown = ", ".join(f"{starts.get(i, 'an argument')}={value!r}" for i, value in found)
    named = _recorder.function_name(f)
    return (f"{shown} is a Python float that {kind} does not trace: {named} ran with it as a "
            f"constant, so these stages hold it as a literal, not an input (jax.make_jaxpr "
            f"traces a float argument as an input)")


def _parameter_names(fun: Any) -> list[str]:
    try:
        return list(inspect.signature(fun).parameters)
    except (TypeError, ValueError):  # a builtin or a callable object without a signature
        return []


def _branch_note(tape: Tape, group: _Group, named: str) -> str:
    """When f branched in Python on a traced value: which branch its stages are."""
    branches = tape.branches()
    if not branches:
        return ""
    first = branches[0]
    where = f" (`{first.primitive}` at {first.source})" if first.source else ""
    at = f" at {group.point_text}" if group.point_text else " at this call's values"
    return (f"{named} branches in Python on a traced value{where}, so it has no jaxpr for all "
            f"inputs; this is the jaxpr of the branch taken{at}")


def _transform_stage(spec: Any, h: Callable | None, point: tuple | None, expr: str, named: str,
                     blocked: str, call_error: str, executed: Tape | None = None
                     ) -> tuple[Stage, Callable | None]:
    """jax.<kind> with the recorded options, applied to the replayed function.

    For an eager call, `executed` is what the call itself ran: the same
    primitives, in the same order, as make_jaxpr of the transformation binds,
    staged without transforming anything again.
    """
    label = _Label(expr, named, "transformed", spec.kind)
    rebuilt = _rebuilder(spec)
    if h is None or point is None:
        return _failed(label, "", call_error or blocked), None
    if executed is not None and executed.replayable and not executed.ambiguous \
            and rebuilt is not None:
        def ran(*args, **kwargs):
            return executed.replay(*args, **kwargs)
        _name_like(ran, h)
        args, kwargs = point
        stage = _stage_of(label, "jax.make_jaxpr(<the primitives this call executed>)",
                          lambda: jax.make_jaxpr(ran)(*args, **kwargs))
        if stage.available:
            return stage, rebuilt[0](h)
    if rebuilt is None:
        return _failed(label, "", f"not captured: {spec.kind}'s recorded options are not "
                       f"literals, and the workbench does not run the user's function again "
                       f"to trace it"), None
    build, shown = rebuilt
    data_args, data_kwargs, config = _data_args(spec, *point)
    g = _configured(build(h), config)
    _name_like(g, h)
    method = f"jax.make_jaxpr({shown.replace('{inner}', 'recorded ' + _inner_expr(expr))})"
    stage = _stage_of(label, method, lambda: _make_jaxpr(g)(*data_args, **data_kwargs))
    return stage, (build(h) if spec.kind in _WRAPPERS else None)


def _inner_expr(expr: str) -> str:
    return expr[expr.index("(") + 1:-1] if "(" in expr else expr


def _nested_jit_stages(spec: Any, h: Callable | None, point: tuple | None, expr: str,
                       named: str, blocked: str) -> tuple[list[Stage], Callable | None]:
    """A jit inside another transformation: JAX traced it at these types; lower and compile."""
    outer, outer_named = f"jit({expr})", f"jit({named})"
    if h is None or point is None:
        return _compiled_stages(None, blocked or "not reached", outer, outer_named), None
    options = _settings(spec) or {}
    jitted = jax_own.jit(h, **options)
    args, kwargs = point
    traced, error = None, ""
    try:
        if _group_closures:
            traced = jax_own.jit(_with_extras(h, len(_group_closures), 0)).trace(
                *args, *_group_closures, **kwargs)
        else:
            traced = jitted.trace(*args, **kwargs)
    except Exception as e:
        error = _reason(e)
    return _compiled_stages(traced, error, outer, outer_named), jitted


# --- a jit called at top level: compiled after JAX's trace ends --------------------

@dataclass
class DeferredJit:
    """A top-level jit call's compiled stages, made once JAX has finished its trace.

    JAX calls our entry inside its trace, so the jaxpr does not exist yet when
    the call ends. Afterwards `jitted.trace` at the call's argument types (with
    the arguments' shardings and the mesh context of the call) is a hit in
    JAX's tracing cache, and lowering and compiling hit jit's own caches: the
    user's Python is not run again (a miss is refused, see `_api`).
    """
    spec: Any
    point: tuple
    expr: str
    named: str
    plain: bool
    error: str = ""
    mesh: Callable[[], Any] | None = None  # re-enters the call's mesh context
    inner: tuple[Stage, ...] = ()          # the stages captured when the call ended
    nested: tuple[Stage, ...] = ()         # of the transformations called inside

    def with_inner(self, captured: Captured) -> DeferredJit:
        return dataclasses.replace(self, inner=tuple(captured.stages),
                                   nested=tuple(captured.nested))

    def finish(self) -> tuple[Stage, ...]:
        """The call's stages, now that JAX's trace is over. Never raises."""
        global _source_texts
        outer, _source_texts = _source_texts, {}
        try:
            with _young_garbage_collected_once():
                return self.inner + tuple(self.stages()) + self.nested
        except Exception as e:  # a fault of ours: recorded on the call
            return self.inner + (failed_capture(self.spec, e),) + self.nested
        finally:
            _source_texts = outer

    def stages(self) -> list[Stage]:
        outer, outer_named = f"jit({self.expr})", f"jit({self.named})"
        f_label = _Label("f", self.named, "f")
        method = "jax.jit(f).trace(*args).jaxpr (JAX's own trace of this call)"
        if self.error:
            stages = [_failed(f_label, method, f"jit tracing failed ({self.error})")] \
                if self.plain else []
            return stages + _compiled_stages(None, self.error, outer, outer_named)
        args, kwargs = self.point
        start = time.perf_counter()
        traced, error = None, ""
        try:
            with self.mesh() if self.mesh is not None else contextlib.nullcontext():
                with _recorder.refusing_retrace():
                    traced = self.spec.transformed.trace(*args, **kwargs)
        except Exception as e:
            error = _reason(e)
        seconds = time.perf_counter() - start
        stages = []
        if self.plain:
            stages.append(_failed(f_label, method, error, seconds) if traced is None
                          else _built(f_label, traced.jaxpr, method, seconds))
        with self.mesh() if self.mesh is not None else contextlib.nullcontext():
            stages += _compiled_stages(traced, error, outer, outer_named)
        return stages


def failed_capture(spec: Any, error: BaseException) -> Stage:
    label = _Label("capture", f"stage capture of {spec.kind}", "")
    return _failed(label, "capture", f"stage capture failed: {_reason(error)}")


@dataclass(frozen=True)
class _Placed:
    """Where a committed array argument lives (kept instead of the array)."""
    shape: tuple
    sharding: Any


_NOT_PLACED = object()


def concrete_shardings(args: tuple, kwargs: dict) -> tuple[list, dict] | None:
    """Per argument, its leaves' placements (committed arrays only): no arrays are kept.

    NB: leaves only (a flatten, as the recorder does for every call), never
    an unflatten; None when the arguments do not flatten.
    """
    def placed(x: Any) -> Any:
        if isinstance(x, jax.Array) and not isinstance(x, _i.Tracer) and x.committed:
            return _Placed(tuple(x.shape), x.sharding)
        return _NOT_PLACED
    try:
        leaves = jax.tree_util.tree_leaves
        return ([[placed(x) for x in leaves(a)] for a in args],
                {k: [placed(x) for x in leaves(v)] for k, v in kwargs.items()})
    except Exception:  # a node whose flatten raises: JAX reports it itself
        return None


def sharded_point(point: tuple, bound: tuple | None) -> tuple:
    """The call's argument types with the shardings of the arrays jit was given.

    `bound` is what jit bound its signature with (per argument, its leaves'
    placements): each committed array's sharding goes on the type at the same
    place in the same argument.
    """
    if bound is None:
        return point
    (args, kwargs), (bargs, bkwargs) = point, bound
    new_args = [_with_shardings(a, bargs[i]) if i < len(bargs) else a for i, a in enumerate(args)]
    new_kwargs = {k: _with_shardings(v, bkwargs[k]) if k in bkwargs else v
                  for k, v in kwargs.items()}
    return tuple(new_args), new_kwargs


def _with_shardings(typed: Any, placements: list) -> Any:
    t_leaves, tree = jax.tree_util.tree_flatten(typed)
    if len(t_leaves) != len(placements):
        return typed
    out = []
    for t, c in zip(t_leaves, placements):
        if isinstance(t, jax.ShapeDtypeStruct) and isinstance(c, _Placed) and c.shape == t.shape:
            t = jax.ShapeDtypeStruct(t.shape, t.dtype, sharding=c.sharding, weak_type=t.weak_type)
        out.append(t)
    return jax.tree_util.tree_unflatten(tree, out)


def mesh_context() -> Callable[[], Any] | None:
    """A factory re-entering the mesh context active now (jit's cache is keyed on it)."""
    try:
        legacy = _i.legacy_mesh()
        found: Any = jax.sharding.get_mesh()
    except Exception:  # inside a trace, or no mesh context on this JAX
        return None
    mesh = None if found is None or getattr(found, "empty", True) else found
    if legacy is None and mesh is None:
        return None

    @contextlib.contextmanager
    def entered() -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            if legacy is not None:  # the user entered it; re-entering it is ours: no warning
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)
                    stack.enter_context(legacy)
            if mesh is not None:
                stack.enter_context(jax.set_mesh(mesh))
            yield
    return entered


# --- autodiff stages -----------------------------------------------------------

def _ad_stages(spec: Any, h: Callable | None, point: tuple | None, expr_in: str, named_in: str,
               blocked: str, at_values: bool = False) -> list[Stage]:
    """jvp, linearize, linear and transpose stages of h at the point.

    `at_values`: f branched in Python, so its program is the branch taken at
    the call's values: the linear and backward maps are JAX's at those values
    (`jax.linearize(f, x)[1]`, run eagerly). Otherwise they are traced.
    """
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
    if h is None or point is None:
        return [_failed(labels[r], "", blocked or "not reached") for r in roles]
    try:
        args, kwargs = point
        p = _Point.of(spec, h, args, kwargs, at_values=at_values)
    except Exception as e:  # e.g. argnums out of range: every autodiff stage says so
        return [_failed(labels[r], "", _reason(e)) for r in roles]
    stages = [p.jvp_stage(labels["jvp"])] if "jvp" in roles else []
    if "linear" in roles:
        stages += p.linearize_stages(labels, roles)
    if "transposed" in roles:
        stages.append(p.transposed_stage(labels["transposed"]))
    return stages



_DIFFERENTIATED = object()  # a differentiated argument's place among the fixed ones


@dataclass(frozen=True)
class _Point:
    """The function being differentiated, as a function of its differentiated arguments."""
    fun: Callable
    primals: tuple
    has_aux: bool
    held: tuple = ()  # types of the fixed arguments known only by type: extra inputs
    at_values: bool = False  # linear maps at the call's values (see _ad_stages)

    def make_jaxpr(self, fun: Callable) -> Callable:
        return _make_jaxpr(fun, self.held)

    @property
    def aux(self) -> Any:  # NB: Any: jax.linearize/vjp overload on a literal has_aux
        return self.has_aux

    @classmethod
    def of(cls, spec: Any, h: Callable, args: tuple, kwargs: dict,
           at_values: bool = False) -> _Point:
        if spec.kind in _CALLED:
            f_args, f_kwargs, has_aux = args, {}, bool(kwargs.get("has_aux", False))
            positions: tuple[int, ...] = tuple(range(len(args)))
        else:
            options = _settings(spec) or {}
            argnums = options.get("argnums", 0)
            positions = (argnums,) if isinstance(argnums, int) else tuple(argnums)
            f_args, f_kwargs, has_aux = args, kwargs, bool(options.get("has_aux", False))
        primals = tuple(f_args[i] for i in positions)
        fixed = [_DIFFERENTIATED if i in positions else a for i, a in enumerate(f_args)]
        leaves, tree = jax.tree_util.tree_flatten((fixed, f_kwargs))
        typed = [isinstance(x, jax.ShapeDtypeStruct) for x in leaves]

        def of_primals(*xs):
            values = iter(_held_values())
            a, k = jax.tree_util.tree_unflatten(
                tree, [next(values) if t else x for x, t in zip(leaves, typed)])
            for i, x in zip(positions, xs):
                a[i] = x
            return h(*a, **k)
        _name_like(of_primals, h)
        held = tuple(x for x, t in zip(leaves, typed) if t)
        return cls(of_primals, primals, has_aux, held, at_values)

    def jvp_stage(self, label: _Label) -> Stage:
        def jvp(primals, tangents):
            return jax_own.jvp(self.fun, primals, tangents, has_aux=self.has_aux)
        _name_like(jvp, self.fun)
        return _stage_of(label, "jax.make_jaxpr(jax.jvp(<recorded f>, primals, tangents))",
                         lambda: self.make_jaxpr(jvp)(self.primals, self.primals))

    @property
    def concrete(self) -> bool:
        """Linear maps at the call's values (scalar residuals inlined, as JAX does there)."""
        return self.at_values and not self.held and not _group_closures and not any(
            isinstance(x, (jax.ShapeDtypeStruct, _i.Tracer))
            for x in jax.tree_util.tree_leaves(self.primals))

    def linearize_stages(self, labels: dict[str, _Label], roles: tuple[str, ...]) -> list[Stage]:
        """linearize(f) (primal outputs and residuals) and linear(f), the tangent map.

        At known values the linear map is `jax.linearize(f, *primals)[1]` at
        those values, as a user would get it; otherwise both come from one
        traced jax.linearize.
        """
        inside: dict[str, Stage] = {}
        concrete = self.concrete
        linear_method = "jax.make_jaxpr(jax.linearize(<recorded f>, *primals)[1])"

        def linearized(*primals):
            out = jax_own.linearize(self.fun, *primals, has_aux=self.has_aux)
            if not concrete:
                inside["linear"] = _stage_of(labels["linear"], linear_method,
                                             lambda: jax.make_jaxpr(out[1])(*primals))
            return out
        _name_like(linearized, self.fun)

        method = "jax.make_jaxpr(jax.linearize(<recorded f>, *primals))"
        start = time.perf_counter()
        with _rule_notes() as notes:
            try:
                closed = self.make_jaxpr(linearized)(*self.primals)
            except Exception as e:
                first = _failed(labels["linearized"], method, _reason(e),
                                time.perf_counter() - start)
            else:
                seconds = time.perf_counter() - start - sum(s.seconds for s in inside.values())
                first = _built(labels["linearized"], closed, method, seconds)
        first = _noted(first, notes)
        if concrete and first.available:
            inside["linear"] = _stage_of(labels["linear"], linear_method, lambda: jax.make_jaxpr(
                jax_own.linearize(self.fun, *self.primals, has_aux=self.aux)[1])(*self.primals))
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
        method = "jax.make_jaxpr(jax.vjp(<recorded f>, *primals)[1])"
        if self.concrete:
            def backward() -> Any:
                out = jax_own.vjp(self.fun, *self.primals, has_aux=self.aux)
                return jax.make_jaxpr(out[1])(out[0])
            return _stage_of(label, method, backward)
        inside: dict[str, Stage] = {}

        def forward(*primals):
            out = jax_own.vjp(self.fun, *primals, has_aux=self.has_aux)
            inside["stage"] = _stage_of(label, method, lambda: jax.make_jaxpr(out[1])(out[0]))
            return out[0]
        _name_like(forward, self.fun)

        start = time.perf_counter()
        try:
            self.make_jaxpr(forward)(*self.primals)
        except Exception as e:  # the forward pass failed: the backward one is not reached
            if "stage" not in inside:
                return _failed(label, method, _reason(e), time.perf_counter() - start)
        return dataclasses.replace(inside["stage"], seconds=time.perf_counter() - start)


# --- compiled views: StableHLO, optimised HLO, cost, memory ----------------------

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
