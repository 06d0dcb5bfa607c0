"""Autodiff stages: jvp, linearize, linear and transpose of the recorded function, as
JAX's own jax.jvp / jax.linearize / jax.vjp stage them at the call's point.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Callable

import jax

from .. import _jax as _i
from .._jax import jax_own
from ..model import Stage
from ._records import Label, built, failed, forward_name, keep, noted, reason, rule_notes, stage_of, wanted
from ._replay import group_closures, held_values, make_jaxpr_with_extras, name_like

# --- autodiff stages -----------------------------------------------------------

def ad_stages(spec: Any, h: Callable | None, point: tuple | None, expr_in: str, named_in: str,
              blocked: str, at_values: bool = False, cotangent: tuple | None = None
              ) -> list[Stage]:
    """jvp, linearize, linear and transpose stages of h at the point.

    `cotangent`: the types of the arguments a pullback was called with (see
    _stages.PendingStages): the backward pass is staged at them, where they are of the
    primal outputs' structure; else at the primal outputs' types.

    `at_values`: f branched in Python, so its program is the branch taken at
    the call's values: the linear and backward maps are JAX's at those values
    (`jax.linearize(f, x)[1]`, run eagerly). Otherwise they are traced.
    """
    roles = spec.entry.ad_stages
    if not roles:
        return []
    labels = {
        "jvp": Label(f"jvp({expr_in})", f"JVP of {named_in}: primal and tangent outputs",
                     "jvp", spec.kind),
        "linearized": Label(f"linearize({expr_in})",
                            f"linearized {named_in}: primal outputs and residuals",
                            "linearized", spec.kind),
        "linear": Label(f"linear({expr_in})", f"linear tangent map of {named_in}",
                        "linear", spec.kind),
        "transposed": Label(f"transpose(linear({expr_in}))",
                            f"backward pass of {named_in}: the transposed linear map",
                            "transposed", spec.kind),
    }
    if h is None or point is None:
        return [failed(labels[r], "", blocked or "not reached") for r in roles]
    try:
        args, kwargs = point
        p = _Point.of(spec, h, args, kwargs, at_values=at_values)
    except Exception as e:  # e.g. argnums out of range: every autodiff stage says so
        return [failed(labels[r], "", reason(e)) for r in roles]
    stages = [p.jvp_stage(labels["jvp"])] if "jvp" in roles else []
    if "linear" in roles:
        if wanted(labels["linear"].name) or wanted(labels["linearized"].name):
            stages += p.linearize_stages(labels, roles)
        else:  # neither is made again (PendingStages): placeholders, never kept
            stages += [failed(labels[r], "", "not made again") for r in roles
                       if r in ("linearized", "linear")]
    if "transposed" in roles:
        stages.append(p.transposed_stage(labels["transposed"], cotangent))
    return stages



def differentiated(spec: Any, args: tuple) -> tuple[int, ...]:
    """The positions of the arguments a call of this kind differentiates (argnums; every
    positional one for vjp, jvp and linearize, whose options are keywords of the call)."""
    if spec.entry.config_kwargs:
        return tuple(range(len(args)))
    argnums = spec.options.argnums
    return (argnums,) if isinstance(argnums, int) else tuple(argnums)


_DIFFERENTIATED = object()  # a differentiated argument's place among the fixed ones


@dataclass(frozen=True)
class _Point:
    """The function being differentiated, as a function of its differentiated arguments."""
    fun: Callable
    primals: tuple
    has_aux: bool
    held: tuple = ()  # types of the fixed arguments known only by type: extra inputs
    at_values: bool = False  # linear maps at the call's values (see ad_stages)

    def make_jaxpr(self, fun: Callable) -> Callable:
        return make_jaxpr_with_extras(fun, self.held)

    @property
    def aux(self) -> Any:  # NB: Any: jax.linearize/vjp overload on a literal has_aux
        return self.has_aux

    @classmethod
    def of(cls, spec: Any, h: Callable, args: tuple, kwargs: dict,
           at_values: bool = False) -> _Point:
        positions = differentiated(spec, args)
        if spec.entry.config_kwargs:
            f_args, f_kwargs, has_aux = args, {}, bool(kwargs.get("has_aux", False))
        else:
            f_args, f_kwargs, has_aux = args, kwargs, spec.options.has_aux
        primals = tuple(f_args[i] for i in positions)
        fixed = [_DIFFERENTIATED if i in positions else a for i, a in enumerate(f_args)]
        leaves, tree = jax.tree_util.tree_flatten((fixed, f_kwargs))
        typed = [isinstance(x, jax.ShapeDtypeStruct) for x in leaves]

        def of_primals(*xs):
            values = iter(held_values())
            a, k = jax.tree_util.tree_unflatten(
                tree, [next(values) if t else x for x, t in zip(leaves, typed)])
            for i, x in zip(positions, xs):
                a[i] = x
            return h(*a, **k)
        name_like(of_primals, h)
        held = tuple(x for x, t in zip(leaves, typed) if t)
        return cls(of_primals, primals, has_aux, held, at_values)

    def jvp_stage(self, label: Label) -> Stage:
        def jvp(primals, tangents):
            return jax_own.jvp(self.fun, primals, tangents, has_aux=self.has_aux)
        name_like(jvp, self.fun)
        return stage_of(label, "jax.make_jaxpr(jax.jvp(<recorded f>, primals, tangents))",
                        lambda: self.make_jaxpr(jvp)(self.primals, self.primals))

    @property
    def concrete(self) -> bool:
        """Linear maps at the call's values (scalar residuals inlined, as JAX does there)."""
        return self.at_values and not self.held and not group_closures() and not any(
            isinstance(x, (jax.ShapeDtypeStruct, _i.Tracer))
            for x in jax.tree_util.tree_leaves(self.primals))

    def linearize_stages(self, labels: dict[str, Label], roles: tuple[str, ...]) -> list[Stage]:
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
                inside["linear"] = stage_of(labels["linear"], linear_method,
                                            lambda: jax.make_jaxpr(out[1])(*primals))
            return out
        name_like(linearized, self.fun)

        method = "jax.make_jaxpr(jax.linearize(<recorded f>, *primals))"
        start = time.perf_counter()
        with rule_notes() as notes:
            try:
                closed = self.make_jaxpr(linearized)(*self.primals)
            except Exception as e:
                first = failed(labels["linearized"], method, reason(e),
                               time.perf_counter() - start)
            else:
                seconds = time.perf_counter() - start - sum(s.seconds for s in inside.values())
                first = built(labels["linearized"], closed, method, seconds)
                # the linear map's consts are its values: kept as the map's forward pass
                keep(forward_name(labels["linear"].name), closed)
        first = noted(first, notes)
        if concrete and first.available:
            inside["linear"] = stage_of(labels["linear"], linear_method, lambda: jax.make_jaxpr(
                jax_own.linearize(self.fun, *self.primals, has_aux=self.aux)[1])(*self.primals))
        linear = inside.get("linear") or failed(
            labels["linear"], "", f"not reached: jax.linearize failed ({first.reason})")
        return [first, linear] if "linearized" in roles else [linear]

    def transposed_stage(self, label: Label, cotangent: tuple | None = None) -> Stage:
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
            return stage_of(label, method, backward)
        inside: dict[str, Stage] = {}

        def forward(*primals):
            out = jax_own.vjp(self.fun, *primals, has_aux=self.has_aux)
            ct, note = _cotangent(out[0], cotangent)
            inside["stage"] = noted(stage_of(label, method, lambda: jax.make_jaxpr(out[1])(ct)),
                                    [note] if note else [])
            return out[0]
        name_like(forward, self.fun)

        start = time.perf_counter()
        try:  # the forward pass is kept: the backward one's consts are its values
            keep(forward_name(label.name), self.make_jaxpr(forward)(*self.primals))
        except Exception as e:  # the forward pass failed: the backward one is not reached
            if "stage" not in inside:
                return failed(label, method, reason(e), time.perf_counter() - start)
        return dataclasses.replace(inside["stage"], seconds=time.perf_counter() - start)


def _cotangent(out: Any, given: tuple | None) -> tuple[Any, str]:
    """What the backward pass is staged at: the cotangent a pullback was given (its types),
    when it has the outputs' structure and leaves of their shapes, else the outputs; and a
    note when the two differ (a Python scalar: weakly typed)."""
    if given is None or len(given) != 1:
        return out, ""
    leaves, tree = jax.tree_util.tree_flatten(out)
    ct_leaves, ct_tree = jax.tree_util.tree_flatten(given[0])
    if ct_tree != tree or not all(  # type: ignore[operator]
            isinstance(c, jax.ShapeDtypeStruct) and c.shape == o.shape
            for c, o in zip(ct_leaves, leaves)):
        return out, ""
    types = [jax.typeof(o) for o in leaves]
    differ = [c for c, t in zip(ct_leaves, types)
              if (c.dtype, c.weak_type) != (t.dtype, getattr(t, "weak_type", False))]
    if not differ:
        return out, ""
    shown = ", ".join(f"{c.dtype}{list(c.shape)}" + (" weakly typed" if c.weak_type else "")
                      for c in differ)
    return given[0], (f"staged at the cotangent the pullback was called with ({shown}), the "
                      f"types its custom rules ran at, not at the outputs' types")
