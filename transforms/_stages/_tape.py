"""What a user's function bound at one level, kept live for one call, replayable.

A `Tape` is filled while the user's function runs under the recorder (the
first call of each signature, with stages on): every primitive bound at that
level with its live params, inputs and outputs. `Tape.replay` binds the same
primitives, with the same params, on whatever trace is current: under
`jax.make_jaxpr` it gives the jaxpr of the program that ran, and under
`jax.linearize` / `jax.vjp` / `jax.vmap` JAX transforms exactly what the
user's function bound, without the user's Python running again.

Values are named by identity while the call runs (the objects are kept alive
until the tape is dropped, so ids are not reused): an input of the level, an
output of an earlier entry, a value traced by an enclosing transformation (a
closure: an input of the replay after the level's own), or a constant.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from .. import _jax as _i
from .._common import ByObject

# Kinds of recorded steps a tape can bind again; "call" steps (a process_* of a
# future JAX) carry functions we cannot re-run.
_REPLAYABLE = frozenset({"primitive", "custom_jvp_call", "custom_vjp_call"})
_COMPARISONS = frozenset({"gt", "ge", "lt", "le", "eq", "ne"})


def is_array_like(x: Any) -> bool:
    """A value JAX traces as an input: tracers, arrays and Python floats.

    NB: not Python ints and bools: small ints are shared objects in CPython, so
    an argument `n=2` and a literal `2` in the function would be one value.
    """
    return isinstance(x, (_i.Tracer, jax.Array, np.ndarray, np.generic, float, complex))


def abstract(x: Any) -> jax.ShapeDtypeStruct:
    """The value's type as make_jaxpr takes it (weak types kept)."""
    aval: Any = x.aval if isinstance(x, _i.Tracer) else jax.typeof(x)  # a float: weak float32
    return jax.ShapeDtypeStruct(aval.shape, aval.dtype, weak_type=getattr(aval, "weak_type", False))


# NumPy constants up to this size are kept as the tape's own copy, so the
# program's object is freed when JAX frees it (a custom_vjp bwd returning
# np.zeros: JAX drops each cotangent as its backward pass goes on).
_COPIED_CONSTANT_BYTES = 1 << 20
_COPIES = 4096  # the most copies a tape remembers by object


# The functions a custom call binds with, in order (the recorder's rule levels are named so).
RULE_KINDS: dict[str, tuple[str, ...]] = {
    "custom_jvp_call": ("custom_jvp_fun", "custom_jvp_rule"),
    "custom_vjp_call": ("custom_vjp_fun", "custom_vjp_fwd", "custom_vjp_bwd"),
}

@dataclass(frozen=True)
class Entry:
    primitive: Any
    kind: str
    params: dict
    ins: tuple          # refs: ("var", n) or ("const", value)
    outs: tuple[int, ...]  # var numbers
    multiple: bool
    rules: tuple        # custom_jvp (fun, jvp) / custom_vjp (fun, fwd, bwd) WrappedFuns
    source: str         # where the user bound it (for messages)
    where: Any          # JAX's source info at the bind: traceback and name stack
    step: int = -1      # the recorded step it is (Step.index in its call)
    staged: tuple = ()  # at a jit trace's level: the variables of the equations it staged

    @property
    def rule_kinds(self) -> tuple[str, ...]:
        return RULE_KINDS.get(self.kind, ())


@dataclass(frozen=True)
class Branch:
    """A comparison whose result the user's Python read (no equation used it)."""
    primitive: str
    source: str


class Tape:
    """The primitives one level bound, in order, while its function ran."""

    def __init__(self, function: str, args: tuple, kwargs: dict,
                 rules: Any = None):
        self.function = function
        self.rules = rules  # the call's RuleTapes (_rule_tapes, which imports this): rules replayed
        leaves, self.in_tree = jax.tree_util.tree_flatten((args, kwargs))
        self._var: dict[int, int] = {}
        self._keep: list[Any] = []
        self._copies: ByObject[np.ndarray] = ByObject(_COPIES)
        self.n_vars = 0
        self.in_positions: list[int] = []   # leaf index of each traced input
        self.in_types: list[Any] = []
        self.closure_types: list[Any] = []  # values of enclosing traces the function used
        self._closure_vars: list[int] = []
        # One object stood for two values, so which one an entry read is unknown: an array
        # that a step returned itself, or (`shared_inputs`) one passed as two arguments.
        self.returned_itself = False
        self.returned_itself_by = ""  # the first such step, as a message names it
        self.shared_inputs: list[tuple[int, int]] = []  # (leaf index, the same one's earlier)
        first_leaf: dict[int, int] = {}
        self.floats = {i: x for i, x in enumerate(leaves) if type(x) is float}  # Python floats
        for i, x in enumerate(leaves):
            if is_array_like(x):
                self.in_positions.append(i)
                self.in_types.append(abstract(x))
                if id(x) in self._var:  # the same array passed twice: entries read the first
                    self.shared_inputs.append((i, first_leaf[id(x)]))
                    self._keep.append(x)
                    self._var_count_only()
                else:
                    first_leaf[id(x)] = i
                    self._new_var(x)
        self.point = jax.tree_util.tree_unflatten(  # (args, kwargs), arrays as their types
            self.in_tree, [abstract(x) if is_array_like(x) else x for x in leaves])
        self.entries: list[Entry] = []
        self._depth = _i.name_depth()  # the function's own name scopes come after these
        self._open: dict[int, tuple] = {}
        self.out_refs: tuple = ()
        self.out_tree: Any = None
        self.problem = ""   # why the tape cannot be replayed ("" when it can)
        self.signature: tuple | None = None  # a rule's: its arguments' types and static values
        self.finished = False
        # A rule that ran in a later call (a bwd in vjp's pullback): its steps are that
        # call's, not the capturing call's, so its equations name no step.
        self.late = False

    # -- filled while the call runs --------------------------------------------------
    def _new_var(self, x: Any) -> int:
        if id(x) in self._var and not isinstance(x, _i.Tracer):
            # An output that is an earlier array itself (stop_gradient's impl returns its
            # input): a replay under a trace stages an equation for it, so which of the two
            # variables a later entry read is not known.
            self.returned_itself = True
        # A traced output that is an earlier value itself is that value in JAX's program too
        # (from jax 0.12.1 an identity jit inlined as it is traced, as jnp.real of a real
        # array, returns its input): later entries read the new variable, which holds it.
        n = self._var[id(x)] = self.n_vars
        self.n_vars += 1
        self._keep.append(x)
        return n

    def _var_count_only(self) -> None:
        self.n_vars += 1

    def _ref(self, x: Any) -> tuple:
        if is_array_like(x):
            n = self._var.get(id(x))
            if n is not None:
                return ("var", n)
            if isinstance(x, _i.Tracer):  # traced outside this level: a closure
                n = self._new_var(x)
                self._closure_vars.append(n)
                self.closure_types.append(abstract(x))
                return ("var", n)
        return ("const", self._own_copy(x))

    def _own_copy(self, x: Any) -> Any:
        """A small NumPy constant as the tape's own copy, one per object (JAX dedups by object)."""
        if not (isinstance(x, np.ndarray) and x.nbytes <= _COPIED_CONSTANT_BYTES):
            return x
        copy = self._copies.get(x)
        if copy is None:
            copy = x.copy()
            self._copies.put(x, None, copy)
        return copy

    def begin(self, step: int, primitive: Any, tracers: Any, params: dict, kind: str,
              rules: tuple, source: str) -> None:
        if self.finished:
            return
        if kind not in _REPLAYABLE and not self.problem:
            self.problem = (f"{self.function} binds {primitive} through a JAX interface the "
                            f"workbench cannot replay ({kind})")
        self._open[step] = (primitive, tuple(tracers), params, kind, rules, source,
                            _i.source_now())

    def end(self, step: int, out: Any, multiple: bool) -> None:
        opened = self._open.pop(step, None)
        if opened is None or self.finished:
            return
        primitive, tracers, params, kind, rules, source, where = opened
        ins = tuple(map(self._ref, tracers))
        values = out if multiple else (out,)
        already = self.returned_itself
        outs = tuple(self._new_var(o) for o in values)
        if self.returned_itself and not already:
            self.returned_itself_by = f"`{primitive}` at {source}" if source else f"`{primitive}`"
        staged = tuple(v for v in map(_i.staged_var, values) if v is not None)
        self.entries.append(Entry(primitive, kind, params, ins, outs, multiple, rules, source,
                                  where, step, staged))

    def fail(self, step: int) -> None:
        self._open.pop(step, None)

    def finish(self, out: Any) -> None:
        if self.finished:
            return
        leaves, self.out_tree = jax.tree_util.tree_flatten(out)
        self.out_refs = tuple(map(self._ref, leaves))
        self.finished = True
        self._open.clear()
        self.release()  # no entry comes after: the traced values need not stay alive

    def abandon(self, error: BaseException) -> None:
        """The function raised: its program did not finish."""
        if not self.finished:
            self.problem = self.problem or (
                f"{self.function} raised {type(error).__name__} at this call, so its program "
                f"did not finish")
            self.finished = True
            self._open.clear()
            self.release()

    def release(self) -> None:
        """Drop the live objects (the traced values) once the call is over."""
        self._keep.clear()
        self._var.clear()

    @property
    def busy(self) -> bool:
        """A step at this level is being processed now."""
        return bool(self._open)

    # -- after the call -----------------------------------------------------------
    @property
    def replayable(self) -> bool:
        return self.finished and not self.problem

    @property
    def ambiguous(self) -> bool:
        """Which value some entry read is not known (see `reads_known_at`)."""
        return self.returned_itself or bool(self.shared_inputs)

    def reads_known_at(self, leaves: dict[int, Any]) -> bool:
        """Which value each entry read is known when the tape is replayed with these input
        leaves (leaf index -> value): not ambiguous, or its only ambiguity one array passed as
        two arguments that the replay passes as one array again (a rule given `(x, x)` each
        time: its entries read the first)."""
        if self.returned_itself:
            return False
        return all(i in leaves and j in leaves and leaves[i] is leaves[j]
                   for i, j in self.shared_inputs)

    def branches(self) -> list[Branch]:
        """Comparisons the user's Python read: f branched on a traced value here."""
        used = {r[1] for e in self.entries for r in e.ins if r[0] == "var"}
        used.update(r[1] for r in self.out_refs if r[0] == "var")
        found = []
        for e in self.entries:
            name = _comparison(e)
            if name and not any(n in used for n in e.outs):
                found.append(Branch(name, e.source))
        return found

    def constant_floats(self) -> list[tuple[int, float]]:
        """(leaf index, value) of Python float arguments the function used as constants.

        A float the transformation does not trace reaches the function as itself,
        and JAX binds it as a literal: no step reads the argument, one reads its value.
        """
        leaves = jax.tree_util.tree_leaves(self.point)
        used = {r[1] for e in self.entries for r in e.ins if r[0] == "var"}
        used.update(r[1] for r in self.out_refs if r[0] == "var")
        consts = set()
        for e in self.entries:
            for r in e.ins:
                if r[0] == "const" and getattr(r[1], "shape", ()) == ():
                    try:
                        consts.add(float(r[1]))
                    except (TypeError, ValueError):  # a complex or exotic constant
                        pass
        found = []
        for n, i in enumerate(self.in_positions):
            if n in used or i >= len(leaves) or not isinstance(self.floats.get(i), float):
                continue
            if self.floats[i] in consts:
                found.append((i, self.floats[i]))
        return found

    def replay(self, *args: Any, **kwargs: Any) -> Any:
        """Bind the recorded primitives on the current trace: f's program, without f."""
        leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
        if tree != self.in_tree:  # type: ignore[operator]
            raise TypeError(f"the replay of {self.function} takes arguments structured as "
                            f"{self.in_tree}, got {tree}")
        env: dict[int, Any] = {}
        for n, i in enumerate(self.in_positions):
            env[n] = leaves[i]
        if self.signature is None:  # a user function's (a rule's has none: RuleTapes._usable)
            closures = current_closures()
            if len(closures) != len(self._closure_vars):
                raise TypeError(f"the replay of {self.function} needs {len(self._closure_vars)} "
                                f"closed-over values, got {len(closures)}")
            env.update(zip(self._closure_vars, closures))
        outs = self._bind(self.entries, env, self.out_refs)
        return jax.tree_util.tree_unflatten(self.out_tree, outs)

    def replay_part(self, outputs: slice, inputs: dict[int, Any]) -> list | None:
        """Only what the flat outputs `outputs` need, from the input leaves given
        (leaf index -> value); None when they need an input not given."""
        refs = self.out_refs[outputs]
        needed = {r[1] for r in refs if r[0] == "var"}
        kept = []
        for e in reversed(self.entries):
            if any(n in needed for n in e.outs):
                kept.append(e)
                needed.update(r[1] for r in e.ins if r[0] == "var")
        kept.reverse()
        needed.difference_update(n for e in kept for n in e.outs)
        env = {n: inputs[i] for n, i in enumerate(self.in_positions) if i in inputs}
        if not needed <= env.keys():  # a tangent, a closure: not a function of these inputs
            return None
        return self._bind(kept, env, refs)

    def step_sources(self) -> list[tuple[Any, int]]:
        """(traceback, step) of each entry: a replay binds the entry under that traceback
        (`_i.staged_at`), so the equations a stage stages from it carry it. At a jit trace's
        level also (variable, step): the variables its equations wrote (`_i.staged_var`)."""
        if self.late:
            return []
        found = [(e.where.traceback, e.step) for e in self.entries]
        found += [(v, e.step) for e in self.entries for v in e.staged]
        return found

    def _bind(self, entries: list[Entry], env: dict[int, Any], out_refs: tuple) -> list:
        depth = self._depth
        for e in entries:
            ins = [env[r[1]] if r[0] == "var" else r[1] for r in e.ins]
            with _i.staged_at(e.where, depth):
                if e.rules:
                    rules = e.rules if self.rules is None else self.rules.replayed(e)
                    out = _i.bind_with_rules(e.primitive, rules, ins, e.params)
                else:
                    out = e.primitive.bind(*ins, **e.params)
            for n, o in zip(e.outs, out if e.multiple else (out,)):
                env[n] = o
        return [env[r[1]] if r[0] == "var" else r[1] for r in out_refs]


class StagedSteps:
    """At a plain jit's level, whose f stage is JAX's own trace (no replay, so no tape): the
    variables of the equations each step staged (`_i.staged_var` of its outputs), which name
    the step in that jaxpr. Filled like a tape; holds nothing else."""
    __slots__ = ("sources", "started")

    def __init__(self) -> None:
        self.sources: list[tuple[Any, int]] = []
        self.started = False

    def begin(self, *args: Any) -> None:
        pass

    def end(self, step: int, out: Any, multiple: bool) -> None:
        for value in (out if multiple else (out,)):
            var = _i.staged_var(value)
            if var is not None:
                self.sources.append((var, step))

    def fail(self, step: int) -> None:
        pass

    def finish(self, out: Any) -> None:
        pass

    def abandon(self, error: BaseException) -> None:
        pass

    def step_sources(self) -> list[tuple[Any, int]]:
        return self.sources


class TapePair:
    """Two tapes filled by one level (a rule's own, and the call's executed program)."""
    __slots__ = ("first", "second")

    def __init__(self, first: Any, second: Any):
        self.first, self.second = first, second

    def begin(self, *args: Any) -> None:
        self.first.begin(*args)
        self.second.begin(*args)

    def end(self, *args: Any) -> None:
        self.first.end(*args)
        self.second.end(*args)

    def fail(self, step: int) -> None:
        self.first.fail(step)
        self.second.fail(step)


def _comparison(e: Entry) -> str:
    """The comparison an entry makes (`lt`), or ""."""
    name = getattr(e.primitive, "name", "")
    if name in _COMPARISONS:
        return name
    if name in ("jit", "pjit"):  # jnp's comparisons are jit(inline=True) calls
        inner = e.params.get("jaxpr")
        eqns = getattr(getattr(inner, "jaxpr", inner), "eqns", ())
        if eqns and eqns[-1].primitive.name in _COMPARISONS:
            return eqns[-1].primitive.name
    return ""


# Values of enclosing traces a replayed function closes over, for the stage
# being traced now (see `with_closures`).
_closures = threading.local()


def current_closures() -> tuple:
    return getattr(_closures, "values", ())


class closures_bound:
    """While staging: the values (tracers) a replayed function reads as its closures."""
    __slots__ = ("_values", "_prev")

    def __init__(self, values: tuple):
        self._values = tuple(values)

    def __enter__(self) -> None:
        self._prev = current_closures()
        _closures.values = self._values

    def __exit__(self, *exc: Any) -> None:
        _closures.values = self._prev
