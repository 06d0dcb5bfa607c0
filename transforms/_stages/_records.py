"""Stage records: a jaxpr made into a Stage (its equations, dataflow names, sub-jaxprs'
roles, histogram), a stage that failed, and what capture keeps per capture (source texts,
notes made while rules are replayed, the cyclic GC paused).
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from jax.extend import source_info_util
from jax.extend.core import DropVar, Literal

from .. import _jax as _i
from .._capture import aval_text, jaxpr_record, summarize_params
from .._common import BoundedCache, cut, message
from ..model import EqnRecord, PrimitiveCount, SourceLocation, Stage, SubJaxprRecord, eqn_line_spans


@contextlib.contextmanager
def young_garbage_collected_once() -> Iterator[None]:
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
class Label:
    """Who a stage is: its unique name (an expression of f) and how to show it."""
    name: str
    title: str
    role: str
    transform: str = ""


def reason(error: BaseException) -> str:
    text = message(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def failed(label: Label, method: str, reason: str, seconds: float = 0.0) -> Stage:
    return Stage(label.name, label.title, available=False, reason=reason, role=label.role,
                 transform=label.transform, method=method, seconds=seconds)


# Live jaxprs by stage name while a capture keeps them (keeping_jaxprs): a call whose outputs
# hold a NaN or Inf replays one (record(find_nans=True)); None: none kept.
_kept: dict[str, Any] | None = None


@contextlib.contextmanager
def keeping_jaxprs() -> Iterator[dict[str, Any]]:
    """The live (closed) jaxprs of the stages built inside, by stage name."""
    global _kept
    outer, _kept = _kept, {}
    try:
        yield _kept
    finally:
        _kept = outer


def forward_name(stage: str) -> str:
    """Under what name a backward stage's forward pass is kept: the trace its residuals
    (the backward jaxpr's consts) are values of."""
    return f"{stage} forward"


def keep(name: str, closed: Any) -> None:
    """Keep a live jaxpr by name while a capture keeps them (keeping_jaxprs)."""
    if _kept is not None:
        _kept[name] = closed


def built(label: Label, closed: Any, method: str, seconds: float) -> Stage:
    """A jaxpr stage; `seconds` is what JAX took to make it, recording time is added."""
    keep(label.name, closed)
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
                 eqn_steps=_eqn_steps(jaxpr),
                 histogram=histogram(e.primitive for e in eqns),
                 seconds=seconds + time.perf_counter() - start,
                 in_vars=in_vars, out_vars=namer.names(jaxpr.outvars), const_vars=const_vars)


def stage_of(label: Label, method: str, make: Callable[[], Any]) -> Stage:
    """Run `make` (returning a jaxpr) and record it, or its failure."""
    if not wanted(label.name):
        return failed(label, method, "not made again")
    start = time.perf_counter()
    with rule_notes() as notes:
        try:
            closed = make()
        except Exception as e:  # this stage failed for these inputs; the others go on
            return failed(label, method, reason(e), time.perf_counter() - start)
    return noted(built(label, closed, method, time.perf_counter() - start), notes)


# The names of the stages a capture makes again (PendingStages); None: every stage.
_wanted: frozenset[str] | None = None


def wanted(name: str) -> bool:
    return _wanted is None or name in _wanted


@contextlib.contextmanager
def only_stages(names: frozenset[str]) -> Iterator[None]:
    """A capture makes only these stages; the others are placeholders, never kept."""
    global _wanted
    prev, _wanted = _wanted, names
    try:
        yield
    finally:
        _wanted = prev


# What the group being captured notes while its rules are replayed (a custom
# body staged as its rule's primal part): RuleTapes.notes, read per stage.
_group_notes: list[str] = []


@contextlib.contextmanager
def rule_notes() -> Iterator[list[str]]:
    """The notes made while staging inside the block (a nested stage takes its own)."""
    notes = _group_notes
    found: list[str] = []
    mark = len(notes)
    try:
        yield found
    finally:
        found.extend(dict.fromkeys(notes[mark:]))
        del notes[mark:]


def noted(stage: Stage, notes: list[str]) -> Stage:
    if not notes or not stage.available:
        return stage
    return dataclasses.replace(stage, note=joined_notes(stage.note, *notes))


def joined_notes(*notes: str) -> str:
    """Sentences one after the other (a note without a full stop gets one when followed)."""
    found = [n for n in notes if n]
    return " ".join([n if n.endswith(".") or i == len(found) - 1 else n + "."
                     for i, n in enumerate(found)])


def eqn_records(closed: Any, namer: _Namer | None = None) -> tuple[EqnRecord, ...]:
    """Each top-level equation: primitive, params, avals, source line, name stack (and its
    scope path), dataflow."""
    jaxpr = getattr(closed, "jaxpr", closed)
    if namer is None:
        namer = _Namer()
        namer.names(jaxpr.constvars)
        namer.names(jaxpr.invars)
    records = []
    # JAX prints an output nothing reads as `_` and gives it no name: so do we.
    used = {v for eqn in jaxpr.eqns for v in eqn.invars if not isinstance(v, Literal)}
    used.update(v for v in jaxpr.outvars if not isinstance(v, Literal))
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        params, found = summarize_params(name, eqn.params)
        info = eqn.source_info
        stack, scope = _i.name_stack_facts(info.name_stack)
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
            source, stack, in_vars, out_vars, subjaxprs, location, scope))
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
_literal_texts: BoundedCache = BoundedCache(10_000)


def _literal_text(v: Any) -> str:
    val = getattr(v, "val", v)
    if isinstance(val, (bool, int)) or (isinstance(val, (float, complex)) and val == val and val):
        key = (type(val), val)
        text = _literal_texts.get(key)
        if text is None:
            text = _literal_texts.put(key, _literal_text_uncached(val))
        return text
    return _literal_text_uncached(val)


def _literal_text_uncached(val: Any) -> str:
    try:  # NB: jax >= 0.10 wraps literals (TypedFloat, TypedInt): print the number
        base = next((t for t in (bool, int, float, complex) if isinstance(val, t)), None)
        if base is not None:
            text = str(base(val))
        elif getattr(val, "shape", None) == ():
            # the scalar of its own dtype prints as that dtype reads: 0.1, not the
            # float64 of a float32's bits (0.10000000149011612)
            text = str(val[()])
        else:
            text = str(val)
    except Exception:  # an exotic literal: its type still says something
        text = f"<{type(val).__name__}>"
    return cut(text, 24)


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


_source_locations: BoundedCache = BoundedCache(10_000)


def _source_uncached(source_info: Any) -> tuple[str, SourceLocation | None]:
    frame = _i.source_frame(source_info)
    location = None
    if frame is not None:
        location = _source_locations.get(frame)
        if location is None:
            location = _source_locations.put(frame, SourceLocation(*frame))
    return sys.intern(source_info_util.summarize(source_info)), location


def histogram(primitives: Any) -> tuple[PrimitiveCount, ...]:
    """Primitive counts, most frequent first (ties by name)."""
    ordered = sorted(Counter(primitives).items(), key=lambda kv: (-kv[1], kv[0]))
    return tuple(PrimitiveCount(p, n) for p, n in ordered)


def failed_capture(kind: str, error: BaseException) -> Stage:
    label = Label("capture", f"stage capture of {kind}", "")
    return failed(label, "capture", f"stage capture failed: {reason(error)}")


@contextlib.contextmanager
def capturing() -> Iterator[None]:
    """One capture: its own summaries of source lines, the cyclic GC paused meanwhile."""
    global _source_texts
    outer, _source_texts = _source_texts, {}
    try:
        with young_garbage_collected_once():
            yield
    finally:
        _source_texts = outer


# The step each replayed binding was, by the traceback it is bound under (see steps_of_group).
_group_steps: dict[int, tuple[Any, int]] = {}


@contextlib.contextmanager
def steps_of_group(sources: Sequence[tuple[Any, int]]) -> Iterator[None]:
    """While a group's stages are made: (traceback or variable, step) of each tape entry
    (`Tape.step_sources`).

    A replay binds each entry under the traceback the step was bound at (`_i.staged_at`),
    and JAX stages every equation it makes for that binding with that traceback, in every
    stage made of the replay (f, jvp(f), grad(f)'s backward equations, vmap(grad(f))): so
    each equation names the step it came from. A traceback two steps share names neither.
    A top-level jit's jaxpr is JAX's own trace, made while the call ran: there each step's
    outputs are the variables of the equations JAX staged for it.
    """
    global _group_steps
    found: dict[int, tuple[Any, int]] = {}
    for source, step in sources:
        if source is None or step < 0:
            continue
        hit = found.get(id(source))
        found[id(source)] = (source, step if hit is None or hit[1] == step else -1)
    prev, _group_steps = _group_steps, found
    try:
        yield
    finally:
        _group_steps = prev


def _eqn_steps(jaxpr: Any) -> tuple[int, ...]:
    """The step each top-level equation was staged from (-1: none, e.g. JAX's own), or ()
    when no step is known for any (a stage not made of the call's binds: compiled ones)."""
    steps = _group_steps
    if not steps:
        return ()
    found = []
    by_var = []  # equations linked by the variable they write (a jit trace's)
    for eqn in jaxpr.eqns:
        tb = eqn.source_info.traceback
        hit = steps.get(id(tb))
        if hit is not None and hit[0] is tb:
            found.append(hit[1])
            by_var.append(False)
            continue
        step = -1
        for v in eqn.outvars:
            hit = steps.get(id(v))
            if hit is not None and hit[0] is v:
                step = hit[1]
                break
        found.append(step)
        by_var.append(step >= 0)
    # In a jit trace the steps bind one after another: an equation staged before a step's
    # output and after the previous step's (the body of jnp.mean before its last equation)
    # was staged by that step.
    following = -1
    for i in range(len(found) - 1, -1, -1):
        if by_var[i]:
            following = found[i]
        elif found[i] < 0:
            found[i] = following
        else:
            following = -1
    return tuple(found) if any(s >= 0 for s in found) else ()


@contextlib.contextmanager
def group_notes(notes: list[str]) -> Iterator[None]:
    """The notes the group being captured makes while its rules are replayed go to `notes`."""
    global _group_notes
    prev, _group_notes = _group_notes, notes
    try:
        yield
    finally:
        _group_notes = prev
