"""What each transformation is, and what each of JAX's traces is: one entry per kind.

In the style of Autodidax's rule tables: every module that treats one kind
differently from another reads its entry here, instead of comparing names.
Adding a transformation is one `TransformKind` entry below plus its wrapper
in `_api.py` (see ARCHITECTURE.md, "Transformation kinds").

NB: no JAX here, and nothing of ours but this: the readers (the TUI, the
exporter, `show`) import these tables, and read-only commands never import JAX.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

__all__ = [
    "CONCRETE_VALUE_KINDS", "KINDS", "PUBLIC_KINDS", "TRACES", "TRACES_BY_CLASS",
    "TRACES_BY_TRACER", "Derivative", "TraceKind", "TransformKind", "kind_of", "tracer_kind",
]


# --- transformations ----------------------------------------------------------------

@dataclass(frozen=True)
class Derivative:
    """Where a transformation's derivative sits in its output, and what it is."""
    role: str              # the derivative tree's role: "gradient", "jacobian", "hessian"
    at: int | None = None  # its index in the output; None: the whole output (out[0] with has_aux)
    nesting: int = 0       # how often the inputs' structure nests in it: a Jacobian 1, a Hessian 2

    def path(self, has_aux: bool) -> tuple[int, ...]:
        """The derivative's index path in the output: () for the whole output."""
        if self.at is not None:
            return (self.at,)
        return (0,) if has_aux else ()

    def key_prefix(self, has_aux: bool) -> str:
        """The same path as a pytree key path prefix: "[1]", "[0]" or ""."""
        return "".join(f"[{i}]" for i in self.path(has_aux))


@dataclass(frozen=True)
class TransformKind:
    """One transformation kind: what recording, stages, trees and readers need to know.

    `form` says how JAX is handed the function:
      "wrapper"   jax.<name>(f, **options), called later (grad, vmap, jit...);
      "called"    jax.<name>(f, *args, **kwargs) at once (jvp, vjp, linearize), whose
                  keyword arguments configure the transformation (has_aux), not f;
      "returned"  a call of the function a vjp or linearize returned (its pullback or
                  pushforward), recorded as a call whose parent is the forward call.
    """
    name: str
    form: str
    # Its backward pass runs at the enclosing level after the user's function returns.
    backward_at_enclosing: bool = False
    # The whole call is a backward pass (a pullback's): its outer level's steps are.
    backward_call: bool = False
    # The autodiff stages of its pipeline, in order (grad = transpose of the linearized JVP).
    ad_stages: tuple[str, ...] = ()
    derivative: Derivative | None = None
    # Fixed (name, role) of its positional arguments' trees; None: f's parameter names,
    # each with `input_role`.
    inputs: tuple[tuple[str, str], ...] | None = None
    input_role: str = "input"
    # The trees its output holds besides "out" (see _derivatives.OUTPUT_TREES):
    # "" none, "derivative", "primal_tangent" (jvp), "primal_first" (vjp, linearize),
    # "cotangents" (a pullback's), "pushforward" (a linearized function's).
    outputs: str = ""
    # An eager call executes its transformation's program, primitive for primitive as
    # jax.make_jaxpr(jax.<name>(f)) stages it: its stage is staged from what ran.
    executes_program: bool = False
    # Compiled: StableHLO, HLO, cost and memory stages; a top-level call is JAX's own
    # trace, read once it is over.
    compiles: bool = False
    # Its outputs are its function's (a jit of grad holds grad's gradients), and its
    # function may be a library's wrapper that repacked the user's arguments.
    transparent: bool = False
    # Its transformed stage's outputs are its function's outputs, leaf for leaf.
    keeps_output_leaves: bool = False
    # What JAX compiles of a jit called inside it (JAX never compiles that jit alone
    # there), in the words that end "it compiles ...".
    compiles_a_jit_inside: str = "the program it makes of that jit, inside its own"
    # It returns a pullback that runs the backward pass later, in a call of its own: a
    # custom_vjp bwd rule runs there, after this call's stages were captured.
    returns_pullback: bool = False

    @property
    def public(self) -> bool:
        """A transformation a user applies (transforms.<name>), not an internal call kind."""
        return self.form != "returned"

    @property
    def wrapper(self) -> bool:
        return self.form == "wrapper"

    @property
    def called(self) -> bool:
        return self.form == "called"

    @property
    def shares_forward_stages(self) -> bool:
        """A pullback or pushforward: the forward call's stages, at the primal's types."""
        return self.form == "returned"

    @property
    def packs_primals(self) -> bool:
        """Its function's arguments are its first argument, a tuple (jvp's primals)."""
        return self.called and self.inputs is not None

    @property
    def config_kwargs(self) -> bool:
        """Its keyword arguments configure the transformation; they are not f's."""
        return self.form == "called"

    @property
    def nested_trees(self) -> bool:
        """Called inside another call, its gradient trees are kept by that call."""
        d = self.derivative
        return d is not None and d.role == "gradient"

    @property
    def output_is_gradient(self) -> bool:
        """Its whole output (without aux) is the gradient of its inputs: grad's."""
        d = self.derivative
        return d is not None and d.role == "gradient" and d.at is None

    @property
    def jacobian(self) -> bool:
        """Its derivative nests the inputs in its function's output (jacfwd, jacrev, hessian)."""
        return self.derivative is not None and self.derivative.nesting > 0

    def gradient_prefix(self, has_aux: bool) -> str | None:
        """Where the derivative sits in the output as a key path prefix; None: no derivative."""
        return self.derivative.key_prefix(has_aux) if self.derivative is not None else None


_REVERSE = ("jvp", "linearized", "linear", "transposed")
_GRADIENT = Derivative("gradient")
_FORWARD_BACKWARD = "its forward and backward parts (in the linearize and transpose stages)"
_ITS_JVP = "its JVP (in the jvp stage)"

KINDS: Mapping[str, TransformKind] = {k.name: k for k in (
    TransformKind("grad", "wrapper", backward_at_enclosing=True, ad_stages=_REVERSE,
                  derivative=_GRADIENT, outputs="derivative", executes_program=True,
                  compiles_a_jit_inside=_FORWARD_BACKWARD),
    TransformKind("value_and_grad", "wrapper", backward_at_enclosing=True, ad_stages=_REVERSE,
                  derivative=Derivative("gradient", at=1), outputs="derivative",
                  executes_program=True, compiles_a_jit_inside=_FORWARD_BACKWARD),
    TransformKind("vmap", "wrapper", executes_program=True, keeps_output_leaves=True,
                  compiles_a_jit_inside="its batched version (in the vmap stage)"),
    TransformKind("jit", "wrapper", compiles=True, transparent=True, keeps_output_leaves=True,
                  compiles_a_jit_inside="it as a part of the enclosing jit's program (in that "
                                        "jit's StableHLO and HLO stages)"),
    TransformKind("jvp", "called", inputs=(("primals", "input"), ("tangents", "tangent")),
                  outputs="primal_tangent", compiles_a_jit_inside=_ITS_JVP),
    TransformKind("vjp", "called", backward_at_enclosing=True, ad_stages=_REVERSE,
                  outputs="primal_first", compiles_a_jit_inside=_FORWARD_BACKWARD,
                  returns_pullback=True),
    # linearize's own stage is the linearized one.
    TransformKind("linearize", "called", ad_stages=("jvp", "linear"), outputs="primal_first",
                  compiles_a_jit_inside="its primal part (in the linearize stage)"),
    TransformKind("jacfwd", "wrapper", ad_stages=("jvp",),
                  derivative=Derivative("jacobian", nesting=1), outputs="derivative",
                  executes_program=True, compiles_a_jit_inside=_ITS_JVP),
    TransformKind("jacrev", "wrapper", backward_at_enclosing=True, ad_stages=_REVERSE,
                  derivative=Derivative("jacobian", nesting=1), outputs="derivative",
                  executes_program=True, compiles_a_jit_inside=_FORWARD_BACKWARD),
    # hessian is jacfwd(jacrev(f)): its reverse part is f's.
    TransformKind("hessian", "wrapper", backward_at_enclosing=True, ad_stages=_REVERSE,
                  derivative=Derivative("hessian", nesting=2), outputs="derivative",
                  executes_program=True, compiles_a_jit_inside=_FORWARD_BACKWARD),
    TransformKind("vjp_backward", "returned", backward_call=True,
                  inputs=(("cotangent", "cotangent"),), outputs="cotangents"),
    # One tangent per primal, named as the primal.
    TransformKind("linearize_jvp", "returned", input_role="tangent", outputs="pushforward"),
)}

# The transformations users apply, in the order the API lists them.
PUBLIC_KINDS: tuple[str, ...] = tuple(name for name, k in KINDS.items() if k.public)

# Neither a transformation of ours nor a JAX trace we know: what `kind_of` gives.
_NONE = TransformKind("", "wrapper")


def kind_of(name: str) -> TransformKind:
    """The entry of a transformation kind; a kind it does not know is treated as plain."""
    return KINDS.get(name, _NONE)


# --- JAX's traces and their tracers -----------------------------------------------

@dataclass(frozen=True)
class TraceKind:
    """One kind of JAX trace: the level it is recorded as and the tracers it makes.

    `tracer` is the kind its tracers are recorded with (ValueRecord.kind).
    """
    level: str              # a level on this trace is named so: "vmap#1"
    trace_class: str        # JAX's class for it
    tracer: str = ""        # "" for a trace whose values are concrete (eval)
    display: str = ""       # its tracers as JAX prints them; "" for their class name
    transformation: str = ""  # the transformation a user calls that makes them
    children: tuple[str, ...] = ()  # what a tracer wraps, in ValueRecord.children order
    holds: str = ""         # what a tracer holds, in the words a user knows
    style: str = "green"    # its tracers' colour in the step view
    abstract: bool = False  # its tracers have no concrete value at their level


TRACES: tuple[TraceKind, ...] = (
    TraceKind("eval", "EvalTrace"),
    TraceKind("vmap", "BatchTrace", "batched", "VmapTracer", "vmap", ("val",),
              "batched value", "magenta", abstract=True),
    TraceKind("jvp", "JVPTrace", "jvp", "JVPTracer", "jvp", ("primal", "tangent"),
              "primal and tangent", "cyan"),
    # A linearize trace stages its tangents into a jaxpr trace of its own: grad's.
    TraceKind("grad", "LinearizeTrace", "linearize", "GradTracer", "grad", ("primal", "tangent"),
              "primal and tangent", "cyan"),
    TraceKind("jaxpr", "DynamicJaxprTrace", "jaxpr", "JitTracer", "jit",
              holds="a staged variable (no value)", style="yellow", abstract=True),
    TraceKind("partial_eval", "JaxprTrace"),
    # Any other tracer: only its type and aval are known.
    TraceKind("", "", "tracer", abstract=True),
)

TRACES_BY_CLASS: Mapping[str, TraceKind] = {t.trace_class: t for t in TRACES if t.trace_class}
TRACES_BY_TRACER: Mapping[str, TraceKind] = {t.tracer: t for t in TRACES if t.tracer}

# Value kinds of concrete values (not tracers).
CONCRETE_VALUE_KINDS = frozenset({"array", "python"})
_UNKNOWN_TRACER = TRACES_BY_TRACER["tracer"]


def tracer_kind(kind: str) -> TraceKind:
    """The entry for a recorded tracer kind (ValueRecord.kind); unknown kinds as `tracer`."""
    return TRACES_BY_TRACER.get(kind, _UNKNOWN_TRACER)
