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

from . import _interpreters as _i

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


@dataclass(frozen=True)
class Branch:
    """A comparison whose result the user's Python read (no equation used it)."""
    primitive: str
    source: str


class Tape:
    """The primitives one level bound, in order, while its function ran."""

    def __init__(self, function: str, args: tuple, kwargs: dict):
        self.function = function
        leaves, self.in_tree = jax.tree_util.tree_flatten((args, kwargs))
        self._var: dict[int, int] = {}
        self._keep: list[Any] = []
        self.n_vars = 0
        self.in_positions: list[int] = []   # leaf index of each traced input
        self.in_types: list[Any] = []
        self.closure_types: list[Any] = []  # values of enclosing traces the function used
        self._closure_vars: list[int] = []
        self.ambiguous = False  # one object stood for two values: which one an entry read is unknown
        for i, x in enumerate(leaves):
            if is_array_like(x):
                self.in_positions.append(i)
                self.in_types.append(abstract(x))
                if id(x) in self._var:  # the same array passed twice: keep the first
                    self.ambiguous = True
                    self._keep.append(x)
                    self._var_count_only()
                else:
                    self._new_var(x)
        self.point = jax.tree_util.tree_unflatten(  # (args, kwargs), arrays as their types
            self.in_tree, [abstract(x) if is_array_like(x) else x for x in leaves])
        self.entries: list[Entry] = []
        self._depth = _i.name_depth()  # the function's own name scopes come after these
        self._open: dict[int, tuple] = {}
        self.out_refs: tuple = ()
        self.out_tree: Any = None
        self.problem = ""   # why the tape cannot be replayed ("" when it can)
        self.finished = False

    # -- filled while the call runs --------------------------------------------------
    def _new_var(self, x: Any) -> int:
        if id(x) in self._var:  # an output that is an earlier value itself (a no-op)
            self.ambiguous = True
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
        return ("const", x)

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
        outs = tuple(self._new_var(o) for o in (out if multiple else (out,)))
        self.entries.append(Entry(primitive, kind, params, ins, outs, multiple, rules, source,
                                  where))

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

    def replay(self, *args: Any, **kwargs: Any) -> Any:
        """Bind the recorded primitives on the current trace: f's program, without f."""
        leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
        if tree != self.in_tree:  # type: ignore[operator]
            raise TypeError(f"the replay of {self.function} takes arguments structured as "
                            f"{self.in_tree}, got {tree}")
        env: dict[int, Any] = {}
        for n, i in enumerate(self.in_positions):
            env[n] = leaves[i]
        closures = current_closures()
        if len(closures) != len(self._closure_vars):
            raise TypeError(f"the replay of {self.function} needs {len(self._closure_vars)} "
                            f"closed-over values, got {len(closures)}")
        env.update(zip(self._closure_vars, closures))
        depth = self._depth
        for e in self.entries:
            ins = [env[r[1]] if r[0] == "var" else r[1] for r in e.ins]
            with _i.staged_at(e.where, depth):
                if e.rules:
                    out = _i.bind_with_rules(e.primitive, e.rules, ins, e.params)
                else:
                    out = e.primitive.bind(*ins, **e.params)
            for n, o in zip(e.outs, out if e.multiple else (out,)):
                env[n] = o
        outs = [env[r[1]] if r[0] == "var" else r[1] for r in self.out_refs]
        return jax.tree_util.tree_unflatten(self.out_tree, outs)


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
