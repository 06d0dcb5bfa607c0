"""What a call's stage capture needs, gathered while the call runs (StagePlan), and the
signature that lets later calls share its stages; for a jit, where its arguments were
placed and the mesh it ran under.
"""
from __future__ import annotations

import contextlib
import inspect
import warnings
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import jax
import numpy as np

from .. import _jax as _i
from .._capture import TransformSpec, chain_of, function_name, parameter_names, spec_of
from ._rule_tapes import RuleTapes
from ._tape import StagedSteps, Tape, abstract, is_array_like

# --- what a call's capture needs, gathered while the call runs -----------------------

def abstract_point(args: tuple, kwargs: dict, spec: Any = None) -> tuple[tuple, dict]:
    """(args, kwargs) with every array and tracer replaced by its type (other leaves kept);
    a jit's static arguments (`spec`'s static_argnums and static_argnames) kept whole:
    they are its cache key's values, a float among them too (equinox's filter_jit hands
    a module's floats to jax.jit as one static argument)."""
    nums, names = _static_positions(spec, len(args))
    leaves, tree = jax.tree_util.tree_flatten(
        (tuple(None if i in nums else a for i, a in enumerate(args)),
         {k: None if k in names else v for k, v in kwargs.items()}))
    dynamic_args, dynamic_kwargs = jax.tree_util.tree_unflatten(
        tree, [abstract(x) if is_array_like(x) else x for x in leaves])
    return (tuple(args[i] if i in nums else a for i, a in enumerate(dynamic_args)),
            {k: kwargs[k] if k in names else v for k, v in dynamic_kwargs.items()})


class Untraced:
    """A leaf traced by another transformation than the jit: no value of its trace."""


def _as_variables(args: tuple, kwargs: dict) -> tuple | None:
    """(args, kwargs) with each leaf traced by a jit as the variable it stands for (Untraced
    where it is another transformation's tracer), arrays as host copies; None if no leaf is
    a jit's variable."""
    def leaf(x: Any) -> Any:
        if isinstance(x, _i.Tracer):
            var = _i.staged_var(x)
            return var if var is not None else Untraced()
        return np.array(x, copy=True) if isinstance(x, (jax.Array, np.ndarray)) else x
    try:
        found = jax.tree_util.tree_map(leaf, (args, kwargs))
    except (TypeError, ValueError):  # a leaf that will not copy: no values for its stages
        return None
    return found if any(_i.is_variable(x) for x in jax.tree_util.tree_leaves(found)) else None


def _static_positions(spec: Any, count: int) -> tuple[set[int], set[str]]:
    """The positions and names of a jit's static arguments (JAX's static_argnums, negative
    ones counted from the end, and static_argnames, each also naming the other by the
    function's parameters)."""
    options = getattr(spec, "options", None)
    if options is None or getattr(spec, "kind", None) != "jit":
        return set(), set()
    nums, names = options.given.get("static_argnums", ()), options.given.get("static_argnames", ())
    nums = {nums} if isinstance(nums, int) else set(nums or ())
    names = {names} if isinstance(names, str) else set(names or ())
    nums = {n + count if n < 0 else n for n in nums}
    params = parameter_names(spec.fun)  # [] without a signature: the positions given
    nums |= {params.index(n) for n in names if n in params}
    names |= {params[n] for n in nums if 0 <= n < len(params)}
    return nums, names


def _point_text(fun: Any, args: tuple) -> str:
    """`x=2.0, n=3`: the call's small concrete arguments, for a branch's note."""
    from .._capture import describe_concrete
    names = parameter_names(fun)
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


# The most transformations inside one call that get stages of their own.
MAX_NESTED_GROUPS = 16


@dataclass
class Group:
    """One transformation with its own stages: the call's, or one called inside it."""
    spec: Any
    point: tuple        # the (args, kwargs) it was called with, arrays as their types
    nested: bool = False
    tape: Tape | None = None
    point_text: str = ""
    mesh: Callable[[], Any] | None = None  # a top-level jit's mesh context
    live: tuple | None = None  # the concrete (args, kwargs) of an eager call, until captured
    outer_tape: Tape | None = None  # what an eager call executed: its transformed program
    staged: StagedSteps | None = None  # a plain jit's: which step staged each equation
    # A transformation called inside a jit: its (args, kwargs) as the variables of the jit's
    # trace (other leaves as they were, arrays as host copies), and its stages' function name
    inputs: tuple | None = None
    expr: str = ""


class StagePlan:
    """What stage capture reads, gathered while a call runs (its signature's first call).

    The tape of each transformed user function (what it bound), and the types of
    the arguments each wrapper was entered with. Nothing here runs user code.
    """

    def __init__(self, spec: Any, args: tuple, kwargs: dict):
        self.main = Group(spec, abstract_point(args, kwargs, spec), point_text=_point_text(
            chain_of(spec)[-1].fun, _f_args_of(spec, args)))
        if not any(isinstance(x, _i.Tracer) for x in jax.tree_util.tree_leaves((args, kwargs))):
            # autodiff stages hold the other arguments fixed at their values, as JAX would
            self.main.live = (args, kwargs)
        self.groups = [self.main]
        self.rules = RuleTapes()  # what the custom rules that ran bound: replayed, not re-run
        # The types of the arguments a pullback was called with: its backward pass is staged
        # at them (PendingStages), else at the primal outputs' types.
        self.cotangent: tuple | None = None
        self.points: dict[int, tuple] = {}
        self._funs: list[Any] = []  # alive while the plan is: their ids stay unique
        self._waiting: dict[int, list[Group]] = {}
        self._nested_keys: set = set()
        self._in_chains: set[int] = set()
        chain = chain_of(spec)
        self._staged_for: int | None = None
        if not (len(chain) == 1 and spec.entry.compiles):  # a plain jit's f is jit's own trace
            self._wait(self.main)
        else:  # no tape: only which step staged each of its equations
            self.main.staged = StagedSteps()
            self._staged_for = id(spec.fun)
            self._funs.append(spec.fun)

    def _wait(self, group: Group) -> None:
        chain = chain_of(group.spec)
        self._in_chains.update(id(s.transformed) for s in chain)
        f = chain[-1].fun
        self._funs.append(f)
        self._waiting.setdefault(id(f), []).append(group)

    def nested_call(self, spec: Any, args: tuple, kwargs: dict) -> None:
        """A transformation called while the call runs (a value_and_grad inside a jitted step)."""
        if len(self.groups) > MAX_NESTED_GROUPS or id(spec.transformed) in self._in_chains:
            return  # a wrapper of a chain already captured: vmap(grad(f))'s grad
        point = abstract_point(args, kwargs, spec)
        try:
            key = (chain_key(spec.fun), spec.kind, spec.options,
                   tuple(map(_leaf_signature, jax.tree_util.tree_leaves(point))))
            if key in self._nested_keys:
                return
            self._nested_keys.add(key)
        except TypeError:  # an unhashable static value: keep every such call
            pass
        self._funs.append(spec)
        group = Group(spec, point, nested=True, inputs=_as_variables(args, kwargs))
        self.groups.append(group)
        self._wait(group)

    def enter(self, fun: Any, args: tuple, kwargs: dict) -> Tape | None:
        """A wrapper's function is entered: keep its argument types; a tape when one is wanted."""
        key = id(fun)
        if key not in self.points:
            self.points[key] = abstract_point(args, kwargs)
            self._funs.append(fun)
        waiting = self._waiting.get(key)
        staged = self.main.staged
        if key == self._staged_for and staged is not None and not staged.started:
            staged.started = True
            return staged  # type: ignore[return-value]
        if not waiting:
            return None
        group = waiting.pop(0)
        try:
            group.tape = Tape(function_name(fun), args, kwargs, rules=self.rules)
        except Exception:  # arguments that will not flatten: JAX reports it, f has no stage
            return None
        return group.tape

    def enter_outer(self, trace: Any, args: tuple, kwargs: dict) -> Tape | None:
        """An eager call's own level: its tape is the whole transformed program that ran.

        NB: not when a Python scalar is an argument: eager dispatch bakes it into
        the program as a literal, where make_jaxpr of the transformation traces it.
        """
        spec = self.main.spec
        if not spec.entry.executes_program or type(trace).__name__ != "EvalTrace":
            return None
        if any(isinstance(x, (bool, int, float, complex))
               for x in jax.tree_util.tree_leaves((args, kwargs))):
            return None
        try:
            self.main.outer_tape = Tape(function_name(spec.fun), args, kwargs,
                                        rules=self.rules)
        except Exception:  # arguments that will not flatten: no such stage
            return None
        return self.main.outer_tape

    def nested_inputs(self) -> list[tuple[str, Any, tuple]]:
        """(stages' function name, spec, inputs as variables) of each transformation called
        inside the call whose stages were captured (record(values=True) evaluates them)."""
        return [(g.expr, g.spec, g.inputs) for g in self.groups
                if g.nested and g.expr and g.inputs is not None]

    def release(self) -> None:
        for group in self.groups:
            group.live = None
            if group.tape is not None:
                group.tape.release()
        self.rules.release()

    def detach(self) -> None:
        """Keep only what the main group's capture reads again later (for a pullback's
        late rule): its tapes and types, with each function of its chain a `FunctionFacts`
        (names, parameters), so nothing of the user's program stays alive through it."""
        old = chain_of(self.main.spec)
        spec = _detached(self.main.spec)
        new = chain_of(spec)
        self.points = {id(n.fun): self.points[id(o.fun)] for o, n in zip(old, new)
                       if id(o.fun) in self.points}
        self.main.spec = spec
        self.main.live = None
        self.groups = [self.main]
        self._funs = [s.fun for s in new]  # alive while the plan is: their ids stay unique
        self._waiting.clear()
        self._nested_keys.clear()
        self._in_chains.clear()


class FunctionFacts:
    """Stands for a function of a detached plan: its names and parameters (defaults
    not kept), and for one of our wrappers its spec, detached too. Never called."""

    def __init__(self, fun: Any, spec: TransformSpec | None):
        name = getattr(fun, "__name__", None)
        self.__qualname__ = function_name(fun)
        self.__name__ = name if isinstance(name, str) else self.__qualname__
        self.__signature__ = _bare_signature(fun)
        if spec is not None:
            self.__transform_spec__ = spec

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"stages never run {self.__qualname__} again")


def _bare_signature(fun: Any) -> inspect.Signature | None:
    try:
        signature = inspect.signature(fun)
    except (TypeError, ValueError):  # builtins, odd callables
        return None
    return signature.replace(
        parameters=[p.replace(default=None if p.default is not p.empty else p.empty,
                              annotation=p.empty) for p in signature.parameters.values()],
        return_annotation=inspect.Signature.empty)


def _detached(spec: TransformSpec) -> TransformSpec:
    """The chain of spec with FunctionFacts for functions, from the innermost outwards."""
    inner: TransformSpec | None = None
    for s in reversed(chain_of(spec)):
        fun = FunctionFacts(s.fun, inner)
        inner = TransformSpec(s.kind, fun, fun, s.options)  # transformed: no capture reads it
    assert inner is not None
    return inner


def _f_args_of(spec: Any, args: tuple) -> tuple:
    """The arguments the call's function is called with: a jvp's are its primals."""
    if spec.entry.packs_primals and args:
        return tuple(args[0])
    return tuple(args)


# --- signatures: which calls share their stages ---------------------------------

def chain_key(fun: Any) -> tuple:
    """A wrapper chain as data, down to the user's function.

    A Python function is its code and what it closes over (arrays by type), so a
    `lambda p: loss(p, batch)` made afresh each step is the same function.
    """
    spec = spec_of(fun)
    if spec is not None:
        return (spec.kind, spec.options, chain_key(spec.fun))
    code = getattr(fun, "__code__", None)
    if code is None:
        return ("id", Identity(fun))
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
        return chain_key(x) if callable(x) else ("id", Identity(x))
    return ("id", Identity(x))


class Identity:
    """An object's identity in a key, without keeping the object alive.

    Equal only to the identity of the same object while it lives (a dead one
    equals nothing but itself), so a later object at the same address never
    shares what a dropped one captured. Objects that cannot be weakly
    referenced are held: their keys cannot be told apart otherwise.
    """
    __slots__ = ("_ref", "_id")

    def __init__(self, obj: Any) -> None:
        self._id = id(obj)
        try:
            self._ref: Callable[[], Any] = weakref.ref(obj)
        except TypeError:
            self._ref = lambda: obj

    def __hash__(self) -> int:
        return self._id

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if not isinstance(other, Identity) or other._id != self._id:
            return False
        alive = self._ref()
        return alive is not None and alive is other._ref()


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
        # NB: a context entered again inside itself is another key for jit's cache:
        # when the stages are read inside the user's context (the program dropped
        # the function there), it is not entered again.
        with contextlib.ExitStack() as stack:
            if legacy is not None and _i.legacy_mesh() is not legacy:  # ours: no warning
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)
                    stack.enter_context(legacy)
            if mesh is not None and _current_mesh() is not mesh:
                stack.enter_context(jax.set_mesh(mesh))
            yield
    return entered


def _current_mesh() -> Any:
    try:
        return jax.sharding.get_mesh()
    except Exception:  # inside a trace
        return None
