"""The recorded data model: plain, frozen, typed, JSON-able; the model only.

Session -> Call (one outermost transformed invocation) -> Level (one recorder:
a transformation applied, such as `vmap#1/grad#2`) -> Step (a primitive, or an
event, as one level saw it). Nothing here holds a live tracer or array, and
loading a file never executes anything: it only builds these records.

This module holds a call's records (values, jaxprs, stages, steps, levels, errors, the
call); the pytree records are `_tree_records.py`, the device and process records
`_device_records.py`, the Session and the codec's registry `_session.py`.
Reading and writing dumps is `transforms.model._load` (load, loads, SessionLoadError) and
`transforms.model._layout` (the text's layout, which Session.save and to_json_* use).
NB: the module is `model`, not `record`: `transforms.record` is the record() function.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, NamedTuple

from ._device_records import CollectiveRecord, ShardingRecord
from ._display import Displayed
from ._kinds import CONCRETE_VALUE_KINDS, tracer_kind
from ._source_location import SourceLocation
from ._tree_records import Diagnostic, TreePair, TreeRecord, ValueSummary


class ValueRecord(NamedTuple):
    """A tracer or concrete value as one level saw it, described by its attributes.

    NB: Step and ValueRecord are NamedTuples, not dataclasses: they are made
    once per traced primitive, and a NamedTuple is several times cheaper to make.

    `children` holds what the tracer wraps: ("val", ...) for a batched value,
    ("primal", ...) and ("tangent", ...) for autodiff tracers.
    """
    kind: str                 # array | python | batched | jvp | linearize | jaxpr | tracer
    type_name: str            # the class JAX used, e.g. BatchTracer, LinearizeTracer
    aval: str                 # e.g. "float32[3]"
    level: int | None = None  # index of the Level that owns this tracer
    batch_dim: int | None = None
    value: str | None = None  # small concrete values, summarised
    children: tuple[tuple[str, ValueRecord], ...] = ()

    @property
    def is_tracer(self) -> bool:
        return self.kind not in CONCRETE_VALUE_KINDS

    def child(self, name: str) -> ValueRecord | None:
        for key, rec in self.children:
            if key == name:
                return rec
        return None

    def describe(self) -> str:
        """A one-line nesting such as `GradTracer(primal=VmapTracer(...), tangent=...)`."""
        if not self.is_tracer:
            return self.value if self.value is not None else self.aval
        kind = tracer_kind(self.kind)
        name = kind.display or self.type_name  # as JAX prints its tracers
        if kind.children == ("val",):  # a batched value
            val = self.child("val")
            batched = val.aval if val is not None else "?"
            return f"{name}(aval={self.aval}, batched={batched}, batch_dim={self.batch_dim})"
        if kind.children:
            parts = [f"{k}={v.describe()}" for k, v in self.children]
            return f"{name}({', '.join(parts)})"
        return f"{name}({self.aval})"


@dataclass(frozen=True, slots=True)
class JaxprRecord:
    """A jaxpr kept as text plus the figures views need without re-parsing it."""
    name: str                 # where it came from: a param name such as "branches[1]"
    text: str                 # as JAX prints it; "" where not kept (jnp wrappers at default detail)
    eqn_count: int            # top-level equations, as len(jaxpr.eqns)
    in_avals: tuple[str, ...] = ()
    out_avals: tuple[str, ...] = ()
    primitives: tuple[str, ...] = ()  # the top-level equations' primitives, in order


class EqnRecord(NamedTuple):
    """One top-level equation of a stage's jaxpr: what diffs and stats read.

    NB: a NamedTuple like Step: stages of large programs make one per equation.
    """
    primitive: str
    params: tuple[tuple[str, str], ...] = ()
    in_avals: tuple[str, ...] = ()
    out_avals: tuple[str, ...] = ()
    source: str = ""          # the user's line, as source_info_util.summarize prints it
    name_stack: str = ""      # the transformations it came through, e.g. "transpose(jvp())"
    in_vars: tuple[str, ...] = ()   # names as JAX prints them (a ... z, ba), unique in the stage;
                                    # a literal is "=" + its value: "=2.0"
    out_vars: tuple[str, ...] = ()  # "_" for an output nothing reads
    subjaxprs: tuple[SubJaxprRecord, ...] = ()  # cond branches, scan/while bodies, inner jit
    location: SourceLocation | None = None  # `source` as a record: the file, line, function
    scope: str = ""           # its modules and named scopes, as Step.scope: "MLP/attn/query"


@dataclass(frozen=True, slots=True)
class SubJaxprRecord:
    """A jaxpr held in an equation's params (`branches[1]`, `body_jaxpr`), with its dataflow."""
    label: str                # the param it came from: "branches[0]", "jaxpr", "body_jaxpr"
    in_vars: tuple[str, ...] = ()   # consts first where the primitive has any
    out_vars: tuple[str, ...] = ()
    in_avals: tuple[str, ...] = ()
    out_avals: tuple[str, ...] = ()
    in_roles: tuple[str, ...] = ()  # per input: const | carry | xs | operand | arg | "" unknown
    out_roles: tuple[str, ...] = ()  # per output: carry | ys | pred | out | ""
    operands: tuple[int, ...] = ()  # per input: the equation input feeding it, -1 for none
    eqns: tuple[EqnRecord, ...] = ()
    eqn_count: int = 0        # may exceed len(eqns) when capture stopped early


@dataclass(frozen=True, slots=True)
class PrimitiveCount:
    """One bar of a primitive histogram."""
    primitive: str
    count: int


@dataclass(frozen=True, slots=True)
class Metric:
    """One figure of a compiled stage: cost_analysis() or memory_analysis()."""
    name: str                 # e.g. "flops", "bytes accessed", "temp_size_in_bytes"
    value: int | float


@dataclass(frozen=True, slots=True)
class Stage(Displayed):
    """One stage of a transformation pipeline: a jaxpr or compiled text, or why it is missing.

    A call's stages run from the user's function outwards, so `vmap(grad(f))`
    gives f, jvp(f), linearize(f), linear(f), transpose(linear(f)), grad(f),
    vmap(grad(f)); a jit adds its StableHLO, optimised HLO, cost and memory.
    """
    name: str                 # unique in its call, as an expression: "f", "jvp(f)", "hlo(jit(f))"
    title: str = ""
    jaxpr: JaxprRecord | None = None
    text: str | None = None   # StableHLO / optimised HLO text for compiled stages
    available: bool = True
    reason: str = ""          # why a stage is unavailable, or the error that stopped it
    role: str = ""            # f | transformed | jvp | linearized | linear | transposed
                              # | stablehlo | hlo | cost | memory
    transform: str = ""       # the transformation it belongs to ("grad", "vmap", "jit"); "" for f
    method: str = ""          # the JAX call that produced it
    eqns: tuple[EqnRecord, ...] = ()
    histogram: tuple[PrimitiveCount, ...] = ()  # most frequent first
    metrics: tuple[Metric, ...] = ()            # cost and memory stages
    seconds: float = 0.0      # time JAX and the capture took for this stage
    in_vars: tuple[str, ...] = ()   # the jaxpr's inputs and outputs, named as in `eqns`
    out_vars: tuple[str, ...] = ()
    const_vars: tuple[str, ...] = ()
    # Optimised HLO stages of a program on several devices (transforms/_devices/_sharding.py):
    collectives: tuple[CollectiveRecord, ...] = ()  # as the SPMD partitioner inserted them
    shardings: tuple[ShardingRecord, ...] = ()      # the executable's input/output shardings
    note: str = ""            # how to read an available stage (e.g. "the branch taken at x=2.0")
    # Per top-level equation (as in `eqns`), its first and last line in jaxpr.text (0-based);
    # () where they cannot be told for certain (see transforms/model/_jaxpr_text.py).
    eqn_spans: tuple[tuple[int, int], ...] = ()
    # Per top-level equation, the index of the step of the capturing call it was staged from
    # (the step a replay bound it for: in f, the step it became; in grad(f), also its
    # derivative's equations), -1 for none; () where not recorded (jit's own trace,
    # compiled stages, dumps from before it).
    eqn_steps: tuple[int, ...] = ()

    @property
    def eqn_count(self) -> int | None:
        return self.jaxpr.eqn_count if self.jaxpr is not None else None

    def metric(self, name: str) -> int | float | None:
        for m in self.metrics:
            if m.name == name:
                return m.value
        return None

    def count(self, primitive: str) -> int:
        return histogram_count(self.histogram, primitive)


def histogram_count(histogram: tuple[PrimitiveCount, ...], primitive: str) -> int:
    """How many equations of `primitive` a histogram counts (0 when absent)."""
    for bar in histogram:
        if bar.primitive == primitive:
            return bar.count
    return 0


@dataclass(frozen=True, slots=True)
class GrowthPoint:
    """The staged program of one function at one batch size."""
    size: int
    eqn_count: int | None = None
    histogram: tuple[PrimitiveCount, ...] = ()
    error: str = ""           # why the function could not be staged at this size

    def count(self, primitive: str) -> int:
        return histogram_count(self.histogram, primitive)


@dataclass(frozen=True, slots=True)
class GrowthSeries:
    """Equation counts of one function as the batch size grows."""
    label: str
    points: tuple[GrowthPoint, ...] = ()

    @property
    def per_element(self) -> float | None:
        """Equations added per batch element between the two largest staged sizes.

        The largest sizes, as small batches can stage smaller (indexing a
        size-1 axis needs no slice)."""
        ok = sorted((p for p in self.points if p.eqn_count is not None), key=lambda p: p.size)
        if len(ok) < 2 or ok[-1].size == ok[-2].size:
            return None
        last, before = ok[-1].eqn_count, ok[-2].eqn_count
        assert last is not None and before is not None  # filtered above
        return (last - before) / (ok[-1].size - ok[-2].size)


@dataclass(frozen=True, slots=True)
class Growth:
    """Program size against batch size, e.g. a Python loop against vmap."""
    title: str
    series: tuple[GrowthSeries, ...] = ()


class Step(NamedTuple):
    """One primitive (or event) as one level saw it."""
    # NB: the field `index` shadows tuple.index, which mypy reports; the name stays.
    index: int  # type: ignore[assignment]
    level: int
    primitive: str
    kind: str = "primitive"   # primitive | call | custom_jvp_call | custom_vjp_call | error
    phase: str = "forward"    # forward | backward | rule
    params: tuple[tuple[str, str], ...] = ()
    inputs: tuple[ValueRecord, ...] = ()
    outputs: tuple[ValueRecord, ...] = ()
    source: SourceLocation | None = None
    name_stack: str = ""
    subjaxprs: tuple[JaxprRecord, ...] = ()
    error: str | None = None  # set when the primitive itself raised
    cause: int | None = None  # the step at an inner level whose processing bound this one
    # A jnp wrapper (a jit JAX inlines when staging): a staged jaxpr holds its body's
    # equations, not a jit equation. Recorded from the live params, whatever the JAX
    # version prints for them (`True` on 0.10, `Inline.JAX_EARLY` on 0.12).
    inline: bool = False
    # A jit of JAX's own function (jnp.take's `_take`, jnp.mean), not the user's code: read
    # as one operation at the user's line (`library_step_name`). Recorded from the jitted
    # function's file, whatever its params say; a jit the user wrote of such a function
    # (transforms.jit(jnp.sin)) is not one.
    library: bool = False
    # The modules and named scopes it ran in, the transformations left out: flax's
    # `MLP/attn/query` where name_stack is `transpose(jvp(MLP))/attn/query`; "" for none.
    # Recorded from JAX's NameStack; a dump written before it gets it once, when loaded
    # (_load's migration, from the name stack's text), so readers only read this field.
    scope: str = ""
    # The module instances it ran in, read from the Python stack (a flax nnx or equinox model:
    # their methods' `self`): the outermost's class, then each one's attribute in its
    # caller, `NnxMLP/linear1`, `CNN/layers[0]`; "" for none (linen's are in `scope`), and in
    # dumps written before it was recorded.
    module: str = ""

    @property
    def title(self) -> str:
        """The primitive as jaxprs print it, naming call-like ones: `jit[name=tanh]`."""
        for key, value in self.params:
            if key == "name":
                return f"{self.primitive}[name={value.strip(chr(39))}]"
        return self.primitive


def operation_name(jit_name: str) -> str:
    """The operation a jit of JAX's own function stands for, as the user called it (`take` for
    jnp.take's `_take`, `mean` for jnp.mean's): how readers and the journal's progress frames
    name a library step."""
    return jit_name.lstrip("_") or jit_name


@dataclass(frozen=True, slots=True)
class Level:
    """One recorder in the stack: a transformation applied, or the level around it."""
    index: int
    kind: str                 # grad | vmap | jit | jvp | ... | outer | custom_jvp_rule ...
    label: str                # e.g. "vmap#1/grad#2"
    depth: int
    parent: int | None
    trace_type: str           # JAX's Trace class recorded under, e.g. BatchTrace
    function: str = ""
    options: tuple[tuple[str, str], ...] = ()
    # A custom rule's level whose body ran once inside another level opened for that same
    # run (a custom call forwarded by one trace to the trace below it is wrapped by both):
    # the index of the level holding its steps. None for a level that holds its own.
    ran_as: int | None = None


@dataclass(frozen=True, slots=True)
class ErrorRecord(Displayed):
    """A failure during a recorded call: what JAX raised and where."""
    type_name: str            # qualified, e.g. jax.errors.TracerBoolConversionError
    message: str
    level: int | None         # the level that was running when it was raised
    step: int | None          # the failing step, or the last step recorded before it
    source: SourceLocation | None = None
    # What transforms._trees._diagnose made of it (one rule per error kind):
    rule: str = ""            # the rule that matched, e.g. "bool_conversion"; "" for none
    hint: str = ""            # the fix, named: jnp.where, lax.cond, static_argnums ...
    level_label: str = ""     # the transformation whose tracer could not be used: "vmap#1"
    transform: str = ""       # that level's kind: vmap, jit, grad ...
    argument: str = ""        # the argument the failing value depends on
    batch_dim: int | None = None
    tracer: str = ""          # the failing tracer, described: "VmapTracer(aval=..., ...)"
    function: str = ""        # the function being traced, or the pytree function that failed
    mismatch: TreePair | None = None  # a structure mismatch, with both trees


@dataclass(frozen=True, slots=True)
class NonFiniteRecord:
    """Where a call's NaN or Inf came from (record(find_nans=True)): found by replaying a stage
    of the call equation by equation on host copies of its inputs, after the call."""
    kind: str                 # first: the first equation making a NaN/Inf from finite inputs
                              # first_nan: the first making a NaN (what jax_debug_nans names)
                              # inputs: the call's inputs already held one
    stage: str = ""           # the stage replayed, e.g. "grad(f)"; "" for kind inputs
    eqn: int = -1             # its top-level equation in that stage (Stage.eqns), -1 for none
    path: tuple[str, ...] = ()  # inner jaxprs descended into: ("jit[name=inner]",)
    primitive: str = ""
    phase: str = ""           # forward | backward (the transpose)
    name_stack: str = ""      # the transformations it came through: "transpose(jvp())"
    level: str = ""           # the transformation level that bound it, e.g. "grad#1"
    source: SourceLocation | None = None  # the user's line
    inputs: tuple[ValueSummary | None, ...] = ()
    outputs: tuple[ValueSummary | None, ...] = ()
    rule: str = ""            # the known cause that matched (_trees' NONFINITE_RULES)
    hint: str = ""
    note: str = ""            # e.g. why the replay stopped short
    scope: str = ""           # its modules and named scopes, as Step.scope: "MLP/attn/query"

    @property
    def headline(self) -> str:
        """`first NaN/Inf: div in grad(f) eqn 2 (forward, grad#1) at loss.py:3 (f)`."""
        if self.kind == "inputs":
            return f"NaN/Inf in the inputs: {self.note}"
        what = {"first": "first NaN/Inf", "first_nan": "first NaN"}.get(self.kind, self.kind)
        if not self.primitive:
            return f"{what}: {self.note or 'not found'}"
        inner = "".join(f" in {p}" for p in self.path)
        where = ", ".join(x for x in (self.phase, self.level) if x)
        at = f" at {self.source}" if self.source is not None else ""
        return (f"{what}: {self.primitive}{inner} in {self.stage} eqn {self.eqn}"
                f"{f' ({where})' if where else ''}{at}")

    def lines(self) -> list[str]:
        """The finding as text: its headline, its inputs' and outputs' values, its hint."""
        out = [self.headline]
        for name, values in (("in", self.inputs), ("out", self.outputs)):
            for i, v in enumerate(values):
                out.append(f"  {name}[{i}] = {v.describe() if v is not None else '?'}")
        if self.hint:
            out.append(f"  hint ({self.rule}): {self.hint}")
        return out


@dataclass(frozen=True, slots=True)
class StageValues:
    """One stage of a call evaluated again after the call (record(values=True)), on host
    copies of the call's inputs: each top-level equation's outputs, summarised."""
    stage: str                # the stage's name, e.g. "grad(f)"
    outputs: tuple[tuple[ValueSummary | None, ...], ...] = ()  # per equation (Stage.eqns)
    note: str = ""            # e.g. why it stopped short


class NonFiniteFound(FloatingPointError):
    """Raised into the program after the first call whose outputs held a NaN or Inf, when
    recording with record(find_nans=True, stop_at_nan=True) (`workbench run --find-nans`):
    where it came from is in `findings` (and on the recorded call)."""

    def __init__(self, call: int, function: str, findings: tuple[NonFiniteRecord, ...]):
        self.call, self.function, self.findings = call, function, findings
        lines = [line for f in findings for line in f.lines()]
        super().__init__(f"call {call} ({function}) returned a NaN or Inf\n" + "\n".join(lines))


@dataclass(frozen=True, slots=True)
class Call(Displayed):
    """One outermost transformed invocation, with every level nested inside it."""
    index: int
    transform: str
    function: str
    source: SourceLocation | None
    options: tuple[tuple[str, str], ...] = ()
    levels: tuple[Level, ...] = ()
    steps: tuple[Step, ...] = ()
    errors: tuple[ErrorRecord, ...] = ()
    in_tree: str = ""
    out_tree: str = ""
    inputs: tuple[ValueRecord, ...] = ()
    outputs: tuple[ValueRecord, ...] = ()
    parent: int | None = None  # e.g. a vjp's backward call points at its forward call
    stages: tuple[Stage, ...] = ()
    trees: tuple[TreeRecord, ...] = ()        # inputs per argnum, outputs, derivatives
    pairs: tuple[TreePair, ...] = ()          # e.g. each input paired with its gradient
    diagnostics: tuple[Diagnostic, ...] = ()  # the pre-trace check of custom pytree nodes
    shardings: tuple[ShardingRecord, ...] = ()  # inputs/outputs/gradients on several devices
    growth: tuple[Growth, ...] = ()  # program size against batch size, measured for this call
    nonfinite: tuple[NonFiniteRecord, ...] = ()  # where its NaN/Inf came from (find_nans)
    values: tuple[StageValues, ...] = ()  # its stages' equations evaluated (values=True)
    thread: str = ""  # the name of the thread that made it ("": recorded before threads were)

    @property
    def ok(self) -> bool:
        return not self.errors

    def steps_at(self, level: int) -> Iterator[Step]:
        return (s for s in self.steps if s.level == level)
