"""Failure diagnostics: the pre-trace check of custom pytree nodes, and what
an exception raised during a recorded call means.

`check_inputs` runs before JAX traces: each custom node met in the inputs is
flattened and unflattened once, and the code of its flatten/unflatten
functions is searched for names that are not defined (seed 000's `repack_NTC`
returns `value`). `diagnose` fills an ErrorRecord from a table of rules, one
per error kind, keyed by exception type (most specific first).

Nothing here changes what the user sees: exceptions are JAX's own.
"""
from __future__ import annotations

import builtins
import dis
import linecache
import re
import sys
import types
from dataclasses import dataclass
from typing import Any, Callable

import jax
from jax import errors as jax_errors
from jax import tree_util

from ._interpreters import JAX_DIR, PACKAGE_DIR, ended_tracer_in_traceback, mismatch_sides
from ._snapshot import location_of
from ._trees import (
    _LEAF_TYPES,
    TreeBuilder,
    _builtin_children,
    flatten_one,
    is_custom_node,
    pair_trees,
    qualified_name,
    safe_text,
    treedef_tree,
)
from .model import Diagnostic, Level, SourceLocation, Step, TreePair, TreeRecord

MAX_CHECKED_NODES = 200   # custom nodes checked per call (one per type is enough)
_MAX_CODE_DEPTH = 8       # nested code objects searched (lambdas, comprehensions)


# --- the pre-trace check ------------------------------------------------------------

def check_inputs(args: tuple, kwargs: dict, names: list[str],
                 raised: list[BaseException] | None = None) -> tuple[Diagnostic, ...]:
    """Round-trip each custom pytree node type met in the inputs once; never raises.

    `raised` collects the exceptions an unflatten raised in the round trip:
    JAX's own unflatten of the same node will raise them too.
    """
    try:
        treedef = tree_util.tree_structure((args, kwargs))
        if treedef in _plain_structures:
            return ()  # only lists, tuples, dicts and leaves: nothing to check
    except Exception:  # cyclic, too deep, a raising flatten, unhashable aux: walk it below
        treedef = None
    found: list[Diagnostic] = []
    checked: set[type] = set()
    roots = list(zip(names, args)) + [(str(k), v) for k, v in kwargs.items()]
    # An explicit stack: inputs may be deep or cyclic.
    stack = [(obj, name, 0) for name, obj in reversed(roots)]
    seen_ids: set[int] = set()
    visits = 0
    while stack and visits < 10_000:
        x, path, depth = stack.pop()
        visits += 1
        if isinstance(x, _LEAF_TYPES) or id(x) in seen_ids or depth > 100:
            continue
        builtin = _builtin_children(x)
        if builtin is not None:  # a plain container: nothing to check, no flatten needed
            seen_ids.add(id(x))
            stack.extend((child, path + key, depth + 1) for key, child in reversed(builtin))
            continue
        try:
            keyed, td = flatten_one(x)
        except Exception as e:
            if type(x) not in checked:
                checked.add(type(x))
                found.append(_flatten_failure(x, path, e))
            continue
        if td.num_nodes == 1 and td.num_leaves == 1:
            continue  # a leaf
        seen_ids.add(id(x))
        try:
            node_type, aux = td.node_data()
        except Exception:  # no node data: a None, or a future node kind
            node_type, aux = type(x), None
        if is_custom_node(node_type, aux) and node_type not in checked \
                and len(checked) < MAX_CHECKED_NODES:
            checked.add(node_type)
            found.extend(_check_node(x, path, node_type, aux, keyed, td, raised))
        for key_path, child in reversed(keyed):
            stack.append((child, path + _keystr(key_path), depth + 1))
    if treedef is not None and not found and not checked and not stack:
        _remember_plain(treedef)
    return tuple(found)


def non_array_argument_error(jit_again: Callable[[], Any], args: tuple,
                             kwargs: dict) -> BaseException | None:
    """JAX's own TypeError for a jit argument holding a leaf that is not an array, or None.

    `args` are what jit binds (static arguments are plain `object()` stand-ins).
    A leaf `jax.typeof` refuses (a function, a string: an equinox module's
    activation) makes jit raise before tracing; `jit_again()`, the same jitted
    function, is asked to trace these arguments, which raises that exception
    itself, word for word, before any user code runs.
    """
    try:
        leaves = tree_util.tree_leaves((args, kwargs))
    except Exception:  # JAX's flatten raises its own error: nothing to add here
        return None
    if not any(_refused_leaf(x) for x in leaves):
        return None
    try:
        jit_again().trace(*args, **kwargs)
    except TypeError as e:
        return e
    except Exception:  # another check of JAX's refused them: not this failure
        return None
    return None


def _refused_leaf(x: Any) -> bool:
    if isinstance(x, _LEAF_TYPES) or type(x) is object:  # arrays, scalars, static stand-ins
        return False
    try:
        jax.typeof(x)
    except TypeError:
        return True
    except Exception:
        return False
    return False


# Input structures with no custom node: the check has nothing to do for them.
_plain_structures: set = set()


def _remember_plain(treedef: Any) -> None:
    if len(_plain_structures) >= 512:
        _plain_structures.clear()
    try:
        _plain_structures.add(treedef)
    except (TypeError, ValueError):  # unhashable aux data: checked every time
        return


def _keystr(key_path: tuple) -> str:
    try:
        return tree_util.keystr(tuple(key_path))
    except Exception:
        return "[?]"


class _CallCatcher:
    """Notes the first user-code frame entered while it is installed (sys.setprofile).

    NB: JAX calls a node's flatten/unflatten from C++, with no Python frame of
    its own in between: the first frame outside JAX and this package is the
    user's function, and its globals are the ones its names resolve in.
    """

    def __init__(self):
        self.code: types.CodeType | None = None
        self.globals: dict = {}
        self.builtins: dict = {}
        self.free: dict[str, bool] = {}
        self._prev: Any = None

    def __enter__(self):
        self._prev = sys.getprofile()
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc):
        sys.setprofile(self._prev)
        return False

    def _profile(self, frame, event, arg):
        if event != "call" or self.code is not None:
            return
        code = frame.f_code
        if code.co_filename.startswith((JAX_DIR, PACKAGE_DIR)):
            return
        self.code = code
        self.globals = frame.f_globals
        self.builtins = getattr(frame, "f_builtins", None) or vars(builtins)
        # Free variables bound at entry are in f_locals; an unbound cell is not.
        try:
            local_names = set(frame.f_locals)
        except Exception:
            local_names = set()
        self.free = {name: name in local_names for name in code.co_freevars}


def _check_node(x: Any, path: str, node_type: type, aux: Any, keyed: list,
                td: Any, raised: list[BaseException] | None = None) -> list[Diagnostic]:
    type_name = qualified_name(node_type)
    found: list[Diagnostic] = []
    try:
        hash(aux)
    except Exception as e:
        found.append(Diagnostic(
            "unhashable_aux",
            f"{type_name} at {path}: its aux data {safe_text(aux, 60)} is not hashable "
            f"({type(e).__name__}); jax.jit hashes aux data to cache traces. Return a tuple "
            "of hashable values as the static part of the flatten function.",
            type_name, path))
    children = [child for _, child in keyed]
    catcher = _CallCatcher()
    try:
        with catcher:
            rebuilt = td.unflatten(children)
    except Exception as e:
        found.extend(_unflatten_failure(catcher, type_name, path, e))
        if raised is not None:
            raised.append(e)
        return found
    undefined = _undefined_names(catcher)
    if undefined:
        found.append(_undefined_diagnostic(catcher, type_name, path, undefined, None))
    try:
        _, td2 = flatten_one(rebuilt)
        same = type(rebuilt) is type(x) and bool(td2 == td)
    except Exception as e:  # aux data whose == raises (arrays in aux)
        found.append(Diagnostic(
            "roundtrip", f"{type_name} at {path}: comparing the rebuilt node raised "
            f"{type(e).__name__}: {_first_line(e)}", type_name, path, _function(catcher),
            _def_location(catcher)))
        return found
    if not same:
        found.append(Diagnostic(
            "roundtrip",
            f"{type_name} at {path}: unflatten(flatten(x)) is not the same structure: "
            f"{safe_text(td, 80)} became {safe_text(td2, 80)}"
            + ("" if type(rebuilt) is type(x) else
               f" (a {qualified_name(type(rebuilt))}, not a {type_name})"),
            type_name, path, _function(catcher), _def_location(catcher)))
    return found


def _flatten_failure(x: Any, path: str, error: BaseException) -> Diagnostic:
    type_name = qualified_name(type(x))
    source = _innermost_user_location(error.__traceback__)
    return Diagnostic(
        "flatten_error",
        f"{type_name} at {path}: flattening raised {type(error).__name__}: {_first_line(error)}",
        type_name, path, source.function if source else "", source)


def _unflatten_failure(catcher: _CallCatcher, type_name: str, path: str,
                       error: BaseException) -> list[Diagnostic]:
    undefined = _undefined_names(catcher)
    if undefined:
        return [_undefined_diagnostic(catcher, type_name, path, undefined, error)]
    source = _innermost_user_location(error.__traceback__) or _def_location(catcher)
    return [Diagnostic(
        "unflatten_error",
        f"{type_name} at {path}: unflattening raised {type(error).__name__}: "
        f"{_first_line(error)}", type_name, path, _function(catcher), source)]


def _undefined_diagnostic(catcher: _CallCatcher, type_name: str, path: str,
                          undefined: list[tuple[str, int]], error: BaseException | None
                          ) -> Diagnostic:
    code = catcher.code
    assert code is not None, "undefined names come from a caught code object"
    name, line = undefined[0]
    quoted = ", ".join(f"`{n}`" for n, _ in undefined)
    what = "the name" if len(undefined) == 1 else "the names"
    raised = f" (the round trip raised {type(error).__name__}: {_first_line(error)})" \
        if error is not None else ""
    return Diagnostic(
        "undefined_name",
        f"{code.co_name} ({code.co_filename}:{line}), the unflatten function of {type_name}, "
        f"uses {what} {quoted}, which is not defined{raised}.",
        type_name, path, code.co_name, location_of(code, line),
        tuple(n for n, _ in undefined))


def _undefined_names(catcher: _CallCatcher) -> list[tuple[str, int]]:
    """(name, line) for each global the caught function loads that does not exist."""
    code = catcher.code
    if code is None:
        return []
    out: list[tuple[str, int]] = []
    for name, bound in catcher.free.items():
        if not bound:
            out.append((name, code.co_firstlineno))
    seen = {n for n, _ in out}
    for name, line in _global_loads(code, 0):
        if name in seen or name in catcher.globals or name in catcher.builtins:
            continue
        seen.add(name)
        out.append((name, line))
    return out


_GLOBAL_OPS = frozenset({"LOAD_GLOBAL", "LOAD_NAME"})


def _global_loads(code: types.CodeType, depth: int):
    line = code.co_firstlineno
    for ins in dis.get_instructions(code):
        positions = getattr(ins, "positions", None)
        if positions is not None and positions.lineno is not None:
            line = positions.lineno
        elif ins.starts_line:
            line = ins.starts_line
        if ins.opname in _GLOBAL_OPS and isinstance(ins.argval, str):
            yield ins.argval, line
    if depth < _MAX_CODE_DEPTH:
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                yield from _global_loads(const, depth + 1)


def _function(catcher: _CallCatcher) -> str:
    return catcher.code.co_name if catcher.code is not None else ""


def _def_location(catcher: _CallCatcher) -> SourceLocation | None:
    code = catcher.code
    return location_of(code, code.co_firstlineno) if code is not None else None


def _innermost_user_location(tb) -> SourceLocation | None:
    found = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if not code.co_filename.startswith((JAX_DIR, PACKAGE_DIR)):
            found = location_of(code, tb.tb_lineno)
        tb = tb.tb_next
    return found


def _first_line(e: BaseException) -> str:
    try:
        text = str(e)
    except Exception:
        return "<message unavailable>"
    return text.splitlines()[0] if text else ""


# --- structure mismatches ---------------------------------------------------------------
# JAX raises these with PyTreeDef strings or prose. The trees themselves are
# still alive in the frames of the traceback (the function that compared
# them, which transforms._interpreters.mismatch_sides knows per kind): rebuild
# both as TreeRecords there. One rule per mismatch kind.

@dataclass(frozen=True)
class MismatchRule:
    kind: str                 # one of _interpreters.MISMATCH_KINDS
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
    try:
        message = str(error)
    except Exception:
        return None
    for rule in MISMATCH_RULES:
        if rule.pattern.search(message):
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
        except Exception:
            avals = []
        return treedef_tree(tree, role, label, avals)
    return builder.build(value, role, label)


def _aval_text(aval: Any) -> str:
    try:
        return aval.str_short()
    except Exception:
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
        if rec.kind in ("batched", "jaxpr", "tracer"):
            return rec
        if rec.kind in ("linearize", "jvp"):
            rec = rec.child("primal")
            continue
        return None
    return None


def _argument_on_line(ctx: FailureContext) -> str:
    """A parameter of the traced function named on the failing line, if exactly one is."""
    if ctx.source is None or not ctx.parameters:
        return ""
    try:
        text = linecache.getline(ctx.source.file, ctx.source.line)
    except Exception:
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


# What a leaked tracer's kind says about the transformation it came from.
_TRACER_TRANSFORMS = {"linearize": "grad", "jvp": "jvp", "batched": "vmap", "jaxpr": "jit"}


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
    transform = _TRACER_TRANSFORMS.get(rec.kind, "")
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
    innermost = _innermost_user_location(ctx.error.__traceback__)
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
