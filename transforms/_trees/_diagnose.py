"""Failure diagnostics: what an exception raised during a recorded call means.

`diagnose` fills an ErrorRecord from a table of rules, one per error kind, keyed
by exception type (most specific first); a structure mismatch is rebuilt as a
pair of trees; a leaked tracer is found among the steps. The pre-trace check of
custom pytree nodes, whose findings the rules read, is _precheck.py's.

Nothing here changes what the user sees: exceptions are JAX's own.
"""
from __future__ import annotations

import linecache
import re
from dataclasses import dataclass
from typing import Any, Callable

from jax import errors as jax_errors, tree_util

from .._common import message, safe_repr as safe_text
from .._jax import ended_tracer_in_traceback, mismatch_sides
from ..model import (
    TRACES_BY_TRACER,
    Diagnostic,
    Level,
    SourceLocation,
    Step,
    TreePair,
    TreeRecord,
    tracer_kind,
)

# NB: the check's entry point, long imported from here (tests do)
from ._precheck import check_inputs as check_inputs, innermost_user_location
from ._pytrees import TreeBuilder, treedef_tree
from ._tree_pairs import pair_trees

# --- structure mismatches ---------------------------------------------------------------
# JAX raises these with PyTreeDef strings or prose. The trees themselves are
# still alive in the frames of the traceback (the function that compared
# them, which transforms._jax.mismatch_sides knows per kind): rebuild
# both as TreeRecords there. One rule per mismatch kind.

@dataclass(frozen=True)
class MismatchRule:
    kind: str                 # one of _jax.MISMATCH_KINDS
    pattern: re.Pattern
    left_role: str            # TreeRecord roles
    right_role: str
    left_label: str           # where JAX names the sides (cond's branches), its names instead
    right_label: str


def _rx(text: str) -> re.Pattern:
    return re.compile(text, re.S)


MISMATCH_RULES = (
    MismatchRule("custom_jvp", _rx(r"Custom JVP rule .* must produce primal and tangent outputs "
                                   r"with equal container"),
                 "primal_out", "tangent_out", "primal output", "tangent output"),
    MismatchRule("custom_vjp", _rx(r"Custom VJP bwd rule must produce an output with the same "
                                   r"container"),
                 "primal_in", "cotangent_in", "primal inputs", "bwd output"),
    MismatchRule("cond", _rx(r"branch outputs must have the same pytree structure"),
                 "branch_out", "branch_out", "branch 0", "branch 1"),
    MismatchRule("scan", _rx(r"carry input and carry output must have the same pytree"),
                 "carry_in", "carry_out", "carry input", "carry output"),
    MismatchRule("vmap_in_axes", _rx(r"vmap in_axes specification must be a tree prefix"),
                 "in_axes", "input", "in_axes", "arguments"),
    MismatchRule("vmap_out_axes", _rx(r"vmap out_axes specification must be a tree prefix"),
                 "out_axes", "output", "out_axes", "outputs"),
)


def structure_mismatch(error: BaseException, builder: TreeBuilder) -> TreePair | None:
    text = message(error)
    for rule in MISMATCH_RULES:
        if rule.pattern.search(text):
            return _mismatch_pair(rule, error, builder)
    return None


def _mismatch_pair(rule: MismatchRule, error: BaseException,
                   builder: TreeBuilder) -> TreePair | None:
    sides = mismatch_sides(error, rule.kind)
    if sides is None:
        return None
    left_label = sides.left_name if sides.left_name is not None else rule.left_label
    right_label = sides.right_name if sides.right_name is not None else rule.right_label
    left = _side(sides.left, rule.left_role, left_label, builder)
    # A bwd rule may return a list where a tuple of cotangents is meant.
    right = _side(_as_tuple(sides.right) if rule.kind == "custom_vjp" else sides.right,
                  rule.right_role, right_label, builder)
    title = f"{left_label} vs {right_label}"
    return pair_trees(rule.kind, title, left, right, left_label, right_label)


def _as_tuple(x: Any) -> Any:
    return tuple(x) if isinstance(x, list) else x


def _side(value: Any, role: str, label: str, builder: TreeBuilder) -> TreeRecord:
    """A TreeRecord from a live value, a PyTreeDef, or JAX's avals-with-tree objects."""
    if isinstance(value, tree_util.PyTreeDef):
        return treedef_tree(value, role, label)
    tree = getattr(value, "tree", None)
    if isinstance(tree, tree_util.PyTreeDef):
        # cond's and scan's avals carry their tree: leaves are the avals.
        try:
            avals = [_aval_text(a) for a in value]
        except TypeError:  # not iterable after all: the tree's shape without its leaves
            avals = []
        return treedef_tree(tree, role, label, avals)
    return builder.build(value, role, label)


def _aval_text(aval: Any) -> str:
    try:
        return aval.str_short()
    except AttributeError:  # an aval kind without str_short: its text
        return safe_text(aval, 40)


# --- failure rules ---------------------------------------------------------------------

@dataclass
class FailureContext:
    """What a rule may read: the error and the call's records so far."""
    error: BaseException
    message: str
    levels: list[Level]
    steps: list[Step | None]
    level: int | None
    step: int | None
    source: SourceLocation | None
    parameters: tuple[str, ...]
    diagnostics: tuple[Diagnostic, ...]
    builder: TreeBuilder
    trees: tuple[TreeRecord, ...] = ()    # the call's input trees, then a forward call's
    leaked: tuple = ()                    # ValueRecords of leaked tracers met in the call


@dataclass(frozen=True)
class FailureRule:
    """One kind of failure: which exception, which message, and what to say."""
    name: str
    error_type: type
    pattern: re.Pattern | None
    hint: str
    fill: Callable[[FailureContext], dict] | None = None


_ARGUMENT = re.compile(r"depends on the value of the argument (\w+)")
_TRACING = re.compile(r"while tracing the function (\S+) at \S+ for (\w+)")
_LEAKED = re.compile(r"function being traced when the value leaked was (\S+) at (\S+) "
                     r"traced for (\w+)")


def _tracer_facts(ctx: FailureContext) -> dict:
    """The failing tracer: the last value the failing level made, and its level."""
    facts: dict = {}
    m = _ARGUMENT.search(ctx.message)
    if m:
        facts["argument"] = m.group(1)
    m = _TRACING.search(ctx.message)
    if m:
        facts["function"] = m.group(1)
    rec = _last_value(ctx)
    if rec is not None:
        facts["tracer"] = rec.describe()
        abstract = _abstract_part(rec)
        if abstract is not None:
            if abstract.batch_dim is not None:
                facts["batch_dim"] = abstract.batch_dim
            if abstract.level is not None and abstract.level < len(ctx.levels):
                level = ctx.levels[abstract.level]
                facts["level_label"], facts["transform"] = level.label, level.kind
    if "level_label" not in facts and ctx.level is not None and ctx.level < len(ctx.levels):
        level = ctx.levels[ctx.level]
        facts["level_label"], facts["transform"] = level.label, level.kind
    if "argument" not in facts:
        arg = _argument_on_line(ctx)
        if arg:
            facts["argument"] = arg
    return facts


def _last_value(ctx: FailureContext):
    if ctx.step is None or ctx.step >= len(ctx.steps):
        return None
    step = ctx.steps[ctx.step]
    if step is None:
        return None
    values = step.outputs or step.inputs
    return values[0] if values else None


def _abstract_part(rec):
    """The innermost part of a tracer that has no concrete value: batched or staged."""
    while rec is not None:
        kind = TRACES_BY_TRACER.get(rec.kind)
        if kind is None:  # a concrete value
            return None
        if kind.abstract:
            return rec
        rec = rec.child("primal") if "primal" in kind.children else None
    return None


def _argument_on_line(ctx: FailureContext) -> str:
    """A parameter of the traced function named on the failing line, if exactly one is."""
    if ctx.source is None or not ctx.parameters:
        return ""
    try:
        text = linecache.getline(ctx.source.file, ctx.source.line)
    except (OSError, ValueError, TypeError):  # an odd file name: no argument named
        return ""
    words = set(re.findall(r"[A-Za-z_]\w*", text))
    named = [p for p in ctx.parameters if p in words]
    return named[0] if len(named) == 1 else ""


def _leak_facts(ctx: FailureContext) -> dict:
    facts: dict = {}
    m = _LEAKED.search(ctx.message)
    if m:
        facts.update(function=m.group(1), transform=m.group(3))
    leak = first_leak(ctx.steps, ctx.leaked)
    if leak is not None:
        step, rec = leak
        facts["tracer"] = rec.describe()
        facts["hint"] = f"{_LEAK_HINT} {_leak_text(step, rec)}"
        return facts
    tracer = ended_tracer_in_traceback(ctx.error)
    if tracer is not None:  # JAX refused it before any recorder saw it
        facts["tracer"] = ctx.builder.describe(tracer).describe()
    return facts




def first_leak(steps, leaked) -> tuple[Step, Any] | None:
    """The first step given a leaked tracer (a tracer of an ended transformation)."""
    if not leaked:
        return None
    ids = {id(rec) for rec in leaked}
    for step in steps:
        if step is None:
            continue
        for rec in step.inputs:
            if id(rec) in ids:
                return step, rec
    return None


def _leak_text(step: Step, rec: Any) -> str:
    transform = tracer_kind(rec.kind).transformation  # the transformation it came from
    which = f"a {transform} transformation" if transform else "a transformation"
    where = f" at {step.source}" if step.source is not None else ""
    return (f"Step #{step.index} ({step.title}{where}) uses {rec.describe()}, a tracer of "
            f"{which} that had already ended.")


def leak_diagnostic(steps, leaked) -> Diagnostic | None:
    """A leaked tracer met while tracing: JAX raises when it meets it, maybe only later."""
    leak = first_leak(steps, leaked)
    if leak is None:
        return None
    step, rec = leak
    return Diagnostic("leaked_tracer", f"{_leak_text(step, rec)} {_LEAK_HINT}", rec.type_name,
                      "", step.source.function if step.source is not None else "", step.source)


def _pytree_function_facts(ctx: FailureContext) -> dict:
    """A NameError/TypeError raised in a custom node's flatten/unflatten function."""
    innermost = innermost_user_location(ctx.error.__traceback__)
    for d in ctx.diagnostics:
        same_function = innermost is not None and d.source is not None and \
            innermost.file == d.source.file and innermost.function == d.function
        named = isinstance(ctx.error, NameError) and any(f"'{n}'" in ctx.message for n in d.names)
        if same_function or named:
            return {"function": d.function,
                    "hint": f"Fix {d.function}, registered for {d.node_type} with "
                            f"jax.tree_util.register_pytree_node: {_finding(d)} "
                            "(found by the pre-trace check, before JAX raised)."}
    return {}


def _finding(d: Diagnostic) -> str:
    where = f"{d.source.file}:{d.source.line}" if d.source is not None else "its code"
    if d.kind == "undefined_name":
        names = ", ".join(f"`{n}`" for n in d.names)
        return f"at {where} it uses {names}, which is not defined"
    return f"at {where}: {d.message}"


def _cotangent_facts(ctx: FailureContext) -> dict:
    """A pullback given a cotangent unlike the primal output: both trees, paired."""
    primal_out = next((t for t in ctx.trees if t.role == "primal_out"), None)
    cotangent = next((t for t in ctx.trees if t.role == "cotangent"), None)
    if primal_out is None or cotangent is None:
        return {}
    pair = pair_trees("cotangent", "primal output vs its cotangent", primal_out, cotangent,
                      "the primal output", "the cotangent")
    facts: dict = {"mismatch": pair}
    if pair.first_difference is not None:
        facts["hint"] = (f"{pair.summary}. Give the pullback a cotangent with the primal "
                         "output's structure (e.g. jax.tree_util.tree_map(jnp.ones_like, "
                         "primal_out)).")
    return facts


_RULE_NAMES = re.compile(r"Custom (?:JVP|VJP) rule (\S+) for function (\S+)")


def _mismatch_facts(ctx: FailureContext) -> dict:
    facts: dict = {}
    m = _RULE_NAMES.search(ctx.message)
    if m:
        facts["function"] = m.group(1)
    pair = structure_mismatch(ctx.error, ctx.builder)
    if pair is not None:
        facts["mismatch"] = pair
        if pair.first_difference is not None:
            facts["hint"] = (f"{pair.summary}. The two sides must have the same pytree "
                             "structure: the same container types, keys and static data.")
    return facts


def _structure_facts(ctx: FailureContext) -> dict:
    for d in ctx.diagnostics:
        if d.kind in ("cycle", "too_deep"):
            return {"argument": d.path, "hint": f"{d.message} JAX cannot flatten it."}
    return {}


def _name_error_facts(ctx: FailureContext) -> dict:
    facts = _pytree_function_facts(ctx)
    if facts:
        facts["rule"] = "pytree_function"
    return facts


_ARGUMENT_PATH = re.compile(r"passed to the function at path (\S+?)\.?\s")
_PATH_ROOT = re.compile(r"^[^.\[]+")


def _non_array_facts(ctx: FailureContext) -> dict:
    """Which argument holds the leaf jit cannot trace, and for an equinox module the
    library's own answer: eqx.filter_jit traces its array leaves and keeps the rest static."""
    m = _ARGUMENT_PATH.search(ctx.message)
    if m is None:
        return {}
    path = m.group(1)
    root = _PATH_ROOT.match(path)
    name = root.group(0) if root is not None else path
    tree = next((t for t in ctx.trees if t.role == "input" and t.name == name), None)
    facts: dict = {"argument": path}
    kind = tree.root.type_name if tree is not None and tree.root is not None else ""
    static = (f"static_argnums=({tree.argnum},)" if tree is not None and tree.argnum is not None
              else f"static_argnames=('{name}',)")
    if kind.startswith("equinox."):
        short = kind.rsplit(".", 1)[-1]
        facts["hint"] = (f"`{name}` is an equinox module ({short}) whose leaf `{path}` is not "
                         f"an array: call the function under eqx.filter_jit (it traces the array "
                         f"leaves and keeps the others static), or mark `{name}` static with "
                         f"{static} (it is then hashed, and retraced for each new value).")
    else:
        facts["hint"] = (f"`{path}` is not an array, and jit traces every leaf of its "
                         f"arguments: mark `{name}` static with {static} (hashed, retraced for "
                         f"each new value), or pass only arrays and close over the rest.")
    return facts


def _rule(name, error_type, pattern, hint, fill=None) -> FailureRule:
    return FailureRule(name, error_type, re.compile(pattern, re.S) if pattern else None, hint,
                       fill)


_LEAK_HINT = ("A tracer escaped its transformation (kept in a global, a closure or an object "
              "attribute): return the value from the function instead; run under "
              "jax.checking_leaks() to find where it leaked.")

_WHERE_HINT = ("use jnp.where(cond, x, y) to choose element-wise, or lax.cond / lax.switch to "
               "branch on a traced value; under jit, mark the argument static "
               "(static_argnums / static_argnames) if it is not data; to look at a traced "
               "value use jax.debug.print")

# One rule per failure, most specific first; the first whose type and pattern match wins.
FAILURE_RULES: tuple[FailureRule, ...] = (
    _rule("bool_conversion", jax_errors.TracerBoolConversionError, None,
          "Python `if`/`while`/`and`/`or` needs one True or False, but this value is traced: "
          + _WHERE_HINT + ".", _tracer_facts),
    _rule("integer_conversion", jax_errors.TracerIntegerConversionError, None,
          "Python needs a concrete int here (an index, range(), a shape): use "
          "lax.dynamic_slice / jnp.take to index with a traced value, lax.fori_loop for a "
          "traced trip count, or static_argnums to make the argument a Python constant.",
          _tracer_facts),
    _rule("array_conversion", jax_errors.TracerArrayConversionError, None,
          "numpy cannot convert a tracer: use jax.numpy (jnp) instead of numpy inside "
          "transformed functions, or jax.pure_callback for code that must run on the host; "
          "use jax.debug.print to print traced values.", _tracer_facts),
    _rule("leaked_tracer", jax_errors.UnexpectedTracerError, None, _LEAK_HINT, _leak_facts),
    _rule("concretization", jax_errors.ConcretizationTypeError, None,
          "A concrete value was needed but this one is traced: make the argument static "
          "(static_argnums / static_argnames), or use lax.cond / lax.fori_loop / jnp.where "
          "instead of Python control flow; use jax.debug.print to print traced values.",
          _tracer_facts),
    _rule("non_array_argument", TypeError, r"Error interpreting argument to .* as an abstract array",
          "jit traces every leaf of its arguments as an array, and this one is not (a function, "
          "a string, an object): mark the argument static (static_argnums / static_argnames: "
          "hashed, retraced for each new value), or pass only arrays and close over the rest.",
          _non_array_facts),
    _rule("structure_mismatch", TypeError,
          r"equal container \(pytree\) structures|same container \(pytree\) structure|"
          r"must have the same pytree structure",
          "The two sides must have the same pytree structure: make both return the same "
          "containers (same types, keys and static data) - see the first difference.",
          _mismatch_facts),
    _rule("axes_mismatch", ValueError, r"(in|out)_axes specification must be a tree prefix",
          "in_axes/out_axes must be a tree prefix of the arguments/outputs: give one entry "
          "per argument (a tuple for several), with the same containers and keys, or a "
          "single int/None for a whole subtree.", _mismatch_facts),
    _rule("cotangent_mismatch", ValueError,
          r"argument to a VJP function returned by `jax.vjp` must match the pytree",
          "Give the pullback a cotangent with the primal output's structure (the same "
          "containers, keys and leaf shapes).", _cotangent_facts),
    _rule("axes_length", ValueError, r"vmap in_axes must be an int, None, or a tuple",
          "Give in_axes one entry per positional argument (a tuple), or a single int/None "
          "for all of them.", None),
    _rule("non_scalar_grad", TypeError, r"Gradient only defined for scalar-output functions",
          "grad needs a scalar output: reduce it (e.g. .sum() or a mean), use jax.jacrev / "
          "jax.jacfwd for a Jacobian, or jax.vmap(jax.grad(f)) for per-example gradients.",
          None),
    _rule("integer_input_grad", TypeError, r"grad requires real- or complex-valued inputs",
          "Differentiate with respect to float inputs (pass 1.0, not 1, or .astype(float)), "
          "or pass allow_int=True to get float0 gradients for integer inputs.", None),
    _rule("traced_shape", TypeError, r"Shapes must be 1D sequences of concrete values",
          "Shapes must be Python ints at trace time: pass the size as a static argument "
          "(static_argnums / static_argnames) or derive it from an array's .shape.",
          _tracer_facts),
    _rule("while_loop_reverse", ValueError, r"Reverse-mode differentiation does not work for "
          r"lax.while_loop",
          "Reverse mode needs a known trip count: use lax.scan or lax.fori_loop with static "
          "bounds, or jax.jvp / jacfwd (forward mode) through the while_loop.", None),
    _rule("pytree_function", NameError, None,
          "A name used here is not defined: check for a typo or a missing import.",
          _name_error_facts),
    _rule("unflattenable_input", SystemError, r"returned a result with an exception set",
          "JAX could not flatten an argument: it is cyclic (contains itself) or nested too "
          "deeply for its flatten. Pass a tree without cycles and of moderate depth (keep "
          "linked structures as arrays).", _structure_facts),
    # Any other error raised inside a custom node's flatten/unflatten function.
    _rule("pytree_function", Exception, None, "", _pytree_function_facts),
)


def diagnose(ctx: FailureContext) -> dict:
    """The ErrorRecord fields the first matching rule gives; {} when none matches."""
    for rule in FAILURE_RULES:
        if not isinstance(ctx.error, rule.error_type):
            continue
        if rule.pattern is not None and not rule.pattern.search(ctx.message):
            continue
        facts = {"rule": rule.name, "hint": rule.hint}
        if rule.fill is not None:
            try:
                extra = rule.fill(ctx)
            except Exception as e:  # a diagnosis never fails the call it explains
                extra = {"hint": f"{rule.hint} (diagnosis incomplete: {type(e).__name__})"}
            facts.update({k: v for k, v in extra.items() if v not in (None, "")})
        if not facts.get("hint"):
            continue  # a catch-all rule with nothing to say: keep looking
        if "level_label" not in facts and ctx.level is not None and ctx.level < len(ctx.levels):
            level = ctx.levels[ctx.level]  # the level that was running when it was raised
            facts["level_label"], facts["transform"] = level.label, level.kind
        return facts
    return {}
