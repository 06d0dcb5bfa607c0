"""record(values=True): what each stage of a call takes, derived from the call's concrete
inputs, or why it cannot be. The user's function (`f`) and the transformed program take the
call's inputs (under vmap, `f` and the programs inside it take one example: the first);
`linearize(f)` takes the differentiated arguments; grad's backward pass takes the cotangent
1.0 and, as its consts, the residuals its forward pass computed (that forward pass evaluated
first, on the same inputs). `jvp(f)` and `linear(f)` take tangents, which no call of a
reverse-mode kind gives, but the functions vjp and linearize return do: a pullback's call
(`vjp_backward`) evaluates `transpose(linear(f))` at its cotangent, a pushforward's
(`linearize_jvp`) `linear(f)` and `jvp(f)` at its tangents, their residuals computed from host
copies of the forward call's inputs (`Forward`, kept with the returned function only).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from .. import _jax as _i, _stages
from .._capture import chain_of
from ..model import stage_function

__all__ = ["Forward", "Inputs", "Pulled", "StageInputs", "host_copies"]

# Kinds whose backward pass starts from the cotangent 1.0 (their function returns a scalar).
_SEEDED_WITH_ONE = ("grad", "value_and_grad")


@dataclass(frozen=True)
class Inputs:
    """A stage's inputs (and its consts where they are values of another trace), or why
    there are none (`why`); `note`: how they were derived, when not simply the call's."""
    args: list | None = None
    consts: list | None = None
    why: str = ""
    note: str = ""


@dataclass(frozen=True)
class Forward:
    """What a vjp or linearize call hands the function it returns, under record(values=True):
    its stages' jaxprs and host copies of its (args, kwargs), for the returned function's
    own calls to evaluate their stages at."""
    index: int   # the forward call's
    kept: dict   # its stages' live jaxprs, by stage name
    live: Any    # host copies of its (args, kwargs)
    spec: Any
    roles: dict  # stage name by role, for stages named after the function


@dataclass(frozen=True)
class Pulled:
    """A returned function's call: its kind (vjp_backward, linearize_jvp), the leaves of what
    it was given (a cotangent, or tangents) and the forward call it belongs to."""
    kind: str
    given: list
    forward: int


def host_copies(live: Any) -> Any:
    """(args, kwargs) with each array leaf copied to the host: nothing of the user's kept."""
    return jax.tree_util.tree_map(
        lambda x: np.array(x, copy=True) if isinstance(x, (jax.Array, np.ndarray)) else x,
        live)


class StageInputs:
    """The inputs of each stage of one call, derived from its live (args, kwargs); for a
    returned function's call (`pulled`), from its forward call's and what it was given."""

    def __init__(self, kept: dict, live: Any, spec: Any, pulled: Pulled | None = None,
                 roles: dict | None = None, function: str = "f"):
        self.kept, self.live = kept, live
        self.function = function  # whose stages these inputs are for
        self.pulled, self.roles = pulled, roles or {}
        self.chain = chain_of(spec) if spec is not None else []
        ad = next((s for s in self.chain if s.entry.ad_stages), None)
        self.ad_spec = ad
        self.kind = ad.kind if ad is not None else ""
        self.call_kind = spec.kind if spec is not None else ""
        # the point the differentiated function is called at, and how it was derived
        self.point, self.point_note, self.point_why = self._inner_point()

    def of(self, stage: Any, closed: Any) -> Inputs:
        if stage_function(stage.name) != self.function:
            return Inputs(why="a transformation called inside the call: its inputs are "
                              "values the call computed, which are not kept")
        if self.live is None:
            return Inputs(why="the call's inputs were not kept")
        if self.pulled is not None:
            return self._given(stage, closed, self.pulled)
        role = stage.role
        if role in ("f", "transformed"):
            return self._own(closed)
        if role == "linearized":
            return self._checked(closed, self._primals(closed))
        if role == "transposed":
            return self._backward(stage, closed)
        if role in ("jvp", "linear"):
            return Inputs(why=self._no_tangents())
        return Inputs(why=f"a {role} stage is not evaluated")

    # -- the call's own inputs, or one example of them --------------------------------
    def _own(self, closed: Any) -> Inputs:
        whole = _arguments(self.live, closed)
        if whole is not None and _fits(whole, closed):
            return Inputs(whole)
        if self.call_kind == "jvp":  # f takes the primals, jvp(f) primals and tangents
            primals = _arguments((self.live[0][0], {}), closed)
            if primals is not None and _fits(primals, closed):
                return Inputs(primals, note="at the primals")
        if self.point is not None and self.point_note:
            one = _arguments(self.point, closed)
            if one is not None and _fits(one, closed):
                return Inputs(one, note=self.point_note)
        return Inputs(why=self.point_why or "its inputs are not the call's as they were passed")

    def _inner_point(self) -> tuple[Any, str, str]:
        """(args, kwargs) inside the call's vmaps (their first example), a note, or why not."""
        point, note = self.live, ""
        for spec in self.chain:
            if spec.kind != "vmap" or point is None:
                continue
            point, why = _first_example(point, spec.options.get("in_axes", 0))
            if point is None:
                return None, "", why
            note = "at the first example of the batch"
        return point, note, ""

    # -- autodiff stages -------------------------------------------------------------
    def _primals(self, closed: Any) -> list | None:
        """The differentiated arguments' leaves, then (where the stage takes them too) the
        other arrays: an autodiff stage of a traced call (inside jit or vmap) holds the
        other arguments as inputs, known only by their types when it was made."""
        if self.ad_spec is None or self.point is None:
            return None
        args, kwargs = self.point
        try:
            positions = _stages.differentiated(self.ad_spec, args)
            primals = jax.tree_util.tree_leaves(tuple(args[i] for i in positions))
        except (IndexError, TypeError):  # argnums out of range: JAX raised it to the call
            return None
        if _fits(primals, closed):
            return primals
        held = () if self.ad_spec.entry.config_kwargs else (
            [a for i, a in enumerate(args) if i not in positions], kwargs)
        others = [x for x in jax.tree_util.tree_leaves(held)
                  if isinstance(x, (jax.Array, np.ndarray))]
        return primals + others if _fits(primals + others, closed) else None

    def _checked(self, closed: Any, args: list | None) -> Inputs:
        if args is None:
            return Inputs(why="it takes more than the call's arguments (values closed over "
                              "from an enclosing trace)")
        return Inputs(args, note=self.point_note)

    def _backward(self, stage: Any, closed: Any) -> Inputs:
        if self.kind not in _SEEDED_WITH_ONE:
            return Inputs(why=_NO_COTANGENT.get(self.kind, "its cotangent is not known"))
        types = _i.input_types(closed)
        if len(types) != 1 or types[0][0] != ():
            return Inputs(why="it takes more than the cotangent of one scalar")
        cotangent = [np.ones((), dtype=types[0][1])]
        consts = self._residuals(stage, closed)
        if isinstance(consts, str):
            return Inputs(why=consts)
        return Inputs(cotangent, consts, note=", ".join(
            x for x in ("at the cotangent 1.0, as grad pulls back", self.point_note) if x))

    def _residuals(self, stage: Any, closed: Any) -> list | str:
        """A linear stage's consts, those that are values of another trace as its forward
        pass computed them at the primals: the forward kept for it (a backward pass's), else
        the linearization that staged it; or why not."""
        consts = list(_i.consts_of(closed))
        if all(_i.staged_var(c) is None for c in consts):
            return consts
        names = (_stages.forward_name(stage.name), self.roles.get("linearized"),
                 self.roles.get("transformed"))
        forwards = [self.kept[n] for n in names if n is not None and n in self.kept]
        if not forwards:
            return "its residuals' forward pass was not kept"
        why = "a residual is not a value of its forward pass"
        for forward in forwards:
            primals = self._primals(forward)
            if primals is None:
                why = ("its residuals come from a forward pass that takes more than the "
                       "call's arguments (values closed over from an enclosing trace)")
                continue
            env = _i.values_by_var(forward, [np.asarray(a) for a in primals])
            if all(_i.staged_var(c) is None or _i.staged_var(c) in env for c in consts):
                return [c if _i.staged_var(c) is None else env[_i.staged_var(c)]
                        for c in consts]
        return why

    # -- a returned function's call: its cotangent or tangents, its forward's residuals ---
    def _given(self, stage: Any, closed: Any, pulled: Pulled) -> Inputs:
        role, given = stage.role, pulled.given
        what = "cotangent" if pulled.kind == "vjp_backward" else "tangents"
        note = f"at the {what} this call was given, with call {pulled.forward}'s residuals"
        if (pulled.kind, role) in (("vjp_backward", "transposed"), ("linearize_jvp", "linear")):
            if not _fits(given, closed):
                return Inputs(why=f"the {what} given do not have the types it takes")
            consts = self._residuals(stage, closed)
            if isinstance(consts, str):
                return Inputs(why=consts)
            return Inputs(given, consts, note=note)
        if (pulled.kind, role) == ("linearize_jvp", "jvp"):
            both = (jax.tree_util.tree_leaves(self.point[0]) if self.point else []) + given
            if _fits(both, closed):
                return Inputs(both, note=f"at call {pulled.forward}'s primals and the "
                                         f"tangents this call was given")
        return Inputs(why=f"a stage of call {pulled.forward}, the forward pass, evaluated "
                          f"with it where its inputs were known")

    def _no_tangents(self) -> str:
        return _NO_TANGENTS.get(self.kind, f"a {self.kind or 'call'} gives it no tangents")


# Why a kind's call gives no tangents (jvp, linear) or no cotangent (transpose): one table.
_NO_TANGENTS = {k: f"a {k} call gives no tangents (it pulls a cotangent back instead)"
                for k in ("grad", "value_and_grad", "vjp", "jacrev", "hessian")}
_NO_TANGENTS["linearize"] = ("the tangents are given later, to the function linearize "
                             "returned (a call of its own)")
_NO_TANGENTS["jacfwd"] = "jacfwd pushes every basis tangent at once (a vmap of this program)"
_NO_COTANGENT = {
    "vjp": "the cotangent is given later, to the pullback vjp returned (a call of its own)",
    "jacrev": "jacrev pulls back every basis cotangent at once (a vmap of this program)",
    "hessian": "hessian pulls back every basis cotangent at once (a vmap of this program)",
}


def _arguments(live: Any, closed: Any) -> list | None:
    """The leaves of (args, kwargs) as closed takes them (its inputs one by one), or None;
    non-array leaves (a has_aux flag) left out where that makes the count."""
    leaves = jax.tree_util.tree_leaves(live)
    n = len(_i.input_types(closed))
    if len(leaves) == n:
        return leaves
    arrays = [x for x in leaves if isinstance(x, (jax.Array, np.ndarray))]
    return arrays if len(arrays) == n else None


def _fits(args: list, closed: Any) -> bool:
    """Whether each argument has the shape and dtype of closed's input in its place."""
    types = _i.input_types(closed)
    if len(args) != len(types):
        return False
    for a, (shape, dtype) in zip(args, types):
        if isinstance(a, _i.Tracer):
            return False
        if np.shape(a) != shape:
            return False
        if hasattr(a, "dtype") and str(a.dtype) != dtype:
            return False
    return True


def _first_example(point: Any, in_axes: Any) -> tuple[Any, str]:
    """The vmapped function's (args, kwargs) at the first example, or (None, why)."""
    args, kwargs = point
    if isinstance(in_axes, int) or in_axes is None:
        axes: tuple = (in_axes,) * len(args)
    elif isinstance(in_axes, (tuple, list)) and len(in_axes) == len(args) and all(
            a is None or isinstance(a, int) for a in in_axes):
        axes = tuple(in_axes)
    else:
        return None, "vmap's in_axes name axes per leaf: the first example is not derived"
    try:
        taken = tuple(a if axis is None else jax.tree_util.tree_map(
            lambda x, ax=axis: np.take(np.asarray(x), 0, axis=ax), a)
            for a, axis in zip(args, axes))
        named = jax.tree_util.tree_map(lambda x: np.take(np.asarray(x), 0, axis=0), kwargs)
    except (ValueError, IndexError, TypeError) as e:  # an empty batch, an odd leaf
        return None, f"its first example cannot be taken ({type(e).__name__})"
    return (taken, named), ""

