"""Stages of a transformation pipeline, from what the call itself traced.

Nothing here runs the user's Python again. While the first call of each
signature runs, the recorder keeps a `_tape.Tape` of what the user's
function bound (the program that ran, at these values) and the argument
types each wrapper was entered with (`StagePlan`). After the call the chain
is rebuilt from the innermost function outwards: f is the tape replayed
under `jax.make_jaxpr`; each transformation is JAX's own, with the recorded
options, applied to the replay. `vmap(grad(f))` gives f -> jvp(f) ->
linearize(f) -> linear(f) -> transpose(linear(f)) -> grad(f) ->
vmap(grad(f)): the replay binds exactly the primitives f bound, with the
same params, so each stage is the jaxpr JAX makes of that transformation of f
(tests compare every one with JAX's make_jaxpr). Under grad, Python control
flow on values is the branch that ran, and the stage says so.

A top-level jit is JAX's own trace: our entry runs inside it, so its jaxpr,
StableHLO, HLO, cost and memory are read once the trace is over
(`DeferredJit`), from JAX's caches, at the arguments' shardings and mesh.

A stage JAX cannot produce is recorded as unavailable with the reason; a
failing stage never stops the others.

Here: the chain, stage by stage. What the call gathers is _plan.py's, the
autodiff stages _autodiff.py's, jit's compiled ones _compiled.py's, and
a jaxpr made into a Stage record _records.py's.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence

import jax

from .._capture import (
    NoteLost,
    active_session,
    chain_of,
    function_name,
    parameter_names,
    recording_off,
    spec_of,
)
from .._jax import jax_own
from ..model import Growth, GrowthPoint, GrowthSeries, Stage
from ._autodiff import ad_stages
from ._compiled import DeferredJit, nested_jit_stages
from ._plan import Group, StagePlan
from ._records import (
    Label,
    capturing,
    failed,
    failed_capture,
    group_notes,
    histogram,
    joined_notes,
    only_stages,
    reason,
    stage_of,
    steps_of_group,
)
from ._replay import closures_of_group, make_jaxpr_with_extras, name_like
from ._tape import Tape

# --- the chain -----------------------------------------------------------------

def _exprs(fun: Any) -> tuple[str, str]:
    """The chain as an expression of `f`, and with the function's real name."""
    spec = spec_of(fun)
    if spec is None:
        return "f", function_name(fun)
    expr, named = _exprs(spec.fun)
    return f"{spec.kind}({expr})", f"{spec.kind}({named})"


def _data_args(spec: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict, dict]:
    """(args, kwargs) to trace, and kwargs that configure jax.jvp/vjp/linearize."""
    if spec.entry.config_kwargs:
        return args, {}, kwargs
    return args, kwargs, {}


def _rebuilder(spec: Any) -> tuple[Callable[[Callable], Callable], str] | None:
    """jax.<kind> around another function, with the recorded options, and how it reads."""
    jax_transform = getattr(jax_own, spec.kind, None)
    if jax_transform is None:
        return None
    if spec.entry.called:
        return (lambda h: functools.partial(jax_transform, h)), f"jax.{spec.kind}(<{{inner}}>, ...)"
    if not spec.entry.wrapper:
        return None
    options = dict(spec.options.given)
    shown = "".join(f", {key}={text}" for key, text in spec.options.pairs)
    return (lambda h: jax_transform(h, **options)), f"jax.{spec.kind}(<{{inner}}>{shown})"


def _configured(fun: Callable, config: dict) -> Callable:
    """fun with the keyword options of jax.jvp/vjp/linearize, which are not data."""
    if not config:
        return fun

    def with_config(*args, **kwargs):
        return fun(*args, **kwargs, **config)
    name_like(with_config, fun)
    return with_config


@dataclass
class Captured:
    """A call's stages; for a top-level jit, the compiled part still to come (`later`)."""
    stages: list[Stage]
    later: DeferredJit | None = None
    nested: list[Stage] = dataclasses.field(default_factory=list)  # transformations inside

    def all_stages(self) -> tuple[Stage, ...]:
        return tuple(self.stages) + tuple(self.nested)


def capture(plan: StagePlan, call_error: str = "") -> Captured:
    """Every group's stages: the call's own chain, then each transformation inside it."""
    with capturing():
        try:
            captured = _capture_group(plan.main, plan, call_error, set())
            # NB: "f" too: a top-level jit's own stages (f, stablehlo(jit(f)), ...) come later
            names = {s.name for s in captured.stages} | {"f"}
            for group in plan.groups[1:]:
                found = _capture_group(group, plan, "", names).stages
                names.update(s.name for s in found)
                captured.nested.extend(found)
            return captured
        except Exception as e:  # a fault of ours must not fail the user's call: record it
            return Captured([failed_capture(plan.main.spec.kind, e)])


class PendingStages:
    """A vjp call's stages that wait for a custom_vjp bwd rule its pullback runs later.

    Made when the call's capture needed a bwd that had not run (`RuleTapes.not_run`);
    held by the pullback (`_returned._Origin`) and by no record of the session, so it goes
    when the pullback goes, and is emptied once the pullback has run: the bwd's run is
    kept as a tape of its own (`start_rule`), and `complete` captures the call's own chain
    again from the tapes, the stages that were unavailable taking the new ones. The plan
    is detached (`StagePlan.detach`): tapes and types, no arguments' values and no user
    function. Stages it holds are the tuple the calls of this signature hold.
    """

    def __init__(self, plan: StagePlan, stages: tuple, key: Any):
        plan.detach()
        self.plan: StagePlan | None = plan
        self.stages = stages
        self.key = key
        self.waits_for = frozenset(plan.rules.not_run)

    @classmethod
    def needed(cls, plan: StagePlan) -> bool:
        """A rule a stage needed had not run (a bwd), and nothing else needs the
        call's values: f did not branch on them (its linear maps are JAX's at those values)."""
        tape = plan.main.tape
        return bool("custom_vjp_bwd" in plan.rules.not_run and tape is not None
                    and tape.replayable and not tape.branches())

    @property
    def open(self) -> bool:
        return self.plan is not None

    def start_rule(self, kind: str, fun: Any, args: tuple) -> Tape | None:
        """A rule runs in the pullback: its tape, when a stage waits for it."""
        plan = self.plan
        if plan is None or kind not in self.waits_for:
            return None
        return plan.rules.start(kind, fun, args, late=True)

    def settle(self, failed: bool, cotangent: tuple | None,
               note_lost: NoteLost) -> tuple | None:
        """The pullback call is over: the stages made again now that its rules ran, or None.

        The backward pass is staged at the cotangent the pullback was called with (its
        arguments' types), the types the rules ran at: a Python scalar is weakly typed,
        which changes the program JAX runs (and stages), not only the bwd's types.
        """
        plan = self.plan
        if plan is None or not plan.rules.late_tapes():
            return None
        if failed:  # as if the rules had not run: a later call of the pullback may complete
            plan.rules.forget_late()
            return None
        self.plan = None
        plan.cotangent = cotangent
        old = self.stages
        waiting = frozenset(s.name for s in old if not s.available)
        try:  # only the stages that were unavailable are made again
            with recording_off(), capturing(), only_stages(waiting):
                fresh = _capture_group(plan.main, plan, "", set()).stages
        except Exception as e:  # a fault of ours: the stages stay as they were, and it is noted
            note_lost("completing the forward call's stages with the pullback's rules", e)
            return None
        new = tuple(s if s.available or i >= len(fresh) or fresh[i].name != s.name
                    or not fresh[i].available else fresh[i] for i, s in enumerate(old))
        return new if any(a is not b for a, b in zip(old, new)) else None


def _unique(base: str, names: set) -> str:
    name, n = base, 1
    while any(s == name or s.endswith(f"({name})") for s in names):
        n += 1
        name = f"{base}#{n}"
    return name


def _capture_group(group: Group, plan: StagePlan, call_error: str, names: set) -> Captured:
    chain = chain_of(group.spec)
    f = chain[-1].fun
    named = named_f = function_name(f)
    expr = _unique(_short_name(named), names) if group.nested else "f"
    group.expr = expr
    tape = group.tape
    tapes = [t for t in (tape, group.outer_tape) if t is not None] + plan.rules.tapes()
    sources = tuple(s for t in tapes for s in t.step_sources())
    if group.staged is not None:
        sources += tuple(group.staged.step_sources())
    with closures_of_group(tuple(tape.closure_types) if tape else ()), \
            group_notes(plan.rules.notes), steps_of_group(sources):
        stages: list[Stage] = []
        plain_jit = len(chain) == 1 and group.spec.entry.compiles and not group.nested
        h = None
        if not plain_jit:
            f_stage, h = _function_stage(tape, tape.point if tape else None, expr, f, group,
                                         chain[-1], call_error)
            stages.append(f_stage)
        blocked = "" if h is not None or plain_jit else f"not reached: {_stage_reason(stages[0])}"
        for i in range(len(chain) - 1, -1, -1):
            spec = chain[i]
            point = group.point if i == 0 else plan.points.get(id(chain[i - 1].fun))
            outer_expr, outer_named = f"{spec.kind}({expr})", f"{spec.kind}({named})"
            if spec.entry.compiles and i == 0 and not group.nested:
                later = DeferredJit(spec.kind, spec.transformed, group.point, expr, named,
                                    plain_jit, call_error, mesh=group.mesh,
                                    steps=sources if plain_jit else ())
                return Captured(stages, later)
            if point is None:
                blocked = blocked or f"not reached: {spec.kind} did not call its function"
            if spec.entry.compiles:
                jit_stages, h = nested_jit_stages(spec, h, point, expr, named, blocked,
                                                    plan.main.spec.kind)
                stages += jit_stages
            else:
                at = group.live if i == 0 and group.live is not None else point
                stages += ad_stages(spec, h, at, expr, named, blocked,
                                    at_values=bool(tape is not None and tape.branches()),
                                    cotangent=plan.cotangent if i == 0 else None)
                stage, h = _transform_stage(spec, h, point, outer_expr, outer_named, blocked,
                                            call_error if i == 0 else "",
                                            group.outer_tape if i == 0 else None)
                stages.append(stage)
            if stages and stages[-1].available is False and h is None:
                blocked = blocked or f"not reached: {_stage_reason(stages[-1])}"
            expr, named = outer_expr, outer_named
        note = joined_notes(_branch_note(tape, group, named_f),
                            _constant_float_note(tape, f, chain[-1].kind)) if tape else ""
        if note:  # every jaxpr of the group is of the branch taken
            stages = [dataclasses.replace(s, note=joined_notes(note, s.note))
                      if s.available and s.jaxpr is not None and not s.note.startswith(note)
                      else s for s in stages]
        return Captured(stages)


def _short_name(name: str) -> str:
    return name.rpartition(".")[2].replace("<", "").replace(">", "") or "f"


def _stage_reason(stage: Stage) -> str:
    reason = stage.reason
    return reason[len("not reached: "):] if reason.startswith("not reached: ") else reason


def _function_stage(tape: Tape | None, point: tuple | None, expr: str, f: Any,
                    group: Group, inner_spec: Any, call_error: str
                    ) -> tuple[Stage, Callable | None]:
    """The user's function as it ran: its tape, replayed under make_jaxpr."""
    named = function_name(f)
    label = Label(expr, named, "f")
    if tape is None or point is None:
        if call_error:
            reason = (f"not reached: {inner_spec.kind} failed before calling the function "
                      f"({call_error})")
        else:
            reason = f"not reached: {inner_spec.kind} did not call {named}"
        return failed(label, "", reason), None
    if not tape.replayable:
        return failed(label, "", tape.problem or f"{named} did not return"), None

    def replay(*args, **kwargs):
        return tape.replay(*args, **kwargs)
    name_like(replay, f)
    args, kwargs = point
    stage = stage_of(label, "jax.make_jaxpr(<the primitives f bound at this call>)",
                     lambda: make_jaxpr_with_extras(replay)(*args, **kwargs))
    return stage, replay


def _constant_float_note(tape: Tape, f: Any, kind: str) -> str:
    """When a Python float argument that `kind` does not trace is a literal in the stages."""
    found = tape.constant_floats()
    if not found:
        return ""
    args, names = tape.point[0], parameter_names(f)
    starts, at = {}, 0
    for i, a in enumerate(args):  # the leaf each positional argument starts at
        starts[at] = names[i] if i < len(names) else f"args[{i}]"
        at += len(jax.tree_util.tree_leaves(a))
    shown = ", ".join(f"{starts.get(i, 'an argument')}={value!r}" for i, value in found)
    named = function_name(f)
    return (f"{shown} is a Python float that {kind} does not trace: {named} ran with it as a "
            f"constant, so these stages hold it as a literal, not an input (jax.make_jaxpr "
            f"traces a float argument as an input)")


def _branch_note(tape: Tape, group: Group, named: str) -> str:
    """When f branched in Python on a traced value: which branch its stages are."""
    branches = tape.branches()
    if not branches:
        return ""
    first = branches[0]
    where = f" (`{first.primitive}` at {first.source})" if first.source else ""
    at = f" at {group.point_text}" if group.point_text else " at this call's values"
    return (f"{named} branches in Python on a traced value{where}, so it has no jaxpr for all "
            f"inputs; this is the jaxpr of the branch taken{at}")


def _transform_stage(spec: Any, h: Callable | None, point: tuple | None, expr: str, named: str,
                     blocked: str, call_error: str, executed: Tape | None = None
                     ) -> tuple[Stage, Callable | None]:
    """jax.<kind> with the recorded options, applied to the replayed function.

    For an eager call, `executed` is what the call itself ran: the same
    primitives, in the same order, as make_jaxpr of the transformation binds,
    staged without transforming anything again.
    """
    label = Label(expr, named, "transformed", spec.kind)
    rebuilt = _rebuilder(spec)
    if h is None or point is None:
        return failed(label, "", call_error or blocked), None
    if executed is not None and executed.replayable and not executed.ambiguous \
            and rebuilt is not None:
        def ran(*args, **kwargs):
            return executed.replay(*args, **kwargs)
        name_like(ran, h)
        args, kwargs = point
        stage = stage_of(label, "jax.make_jaxpr(<the primitives this call executed>)",
                         lambda: jax.make_jaxpr(ran)(*args, **kwargs))
        if stage.available:
            return stage, rebuilt[0](h)
    if rebuilt is None:
        return failed(label, "", f"not captured: jax has no transformation {spec.kind} to "
                      f"apply again, and the workbench does not run the user's function "
                      f"again to trace it"), None
    build, shown = rebuilt
    data_args, data_kwargs, config = _data_args(spec, *point)
    g = _configured(build(h), config)
    name_like(g, h)
    method = f"jax.make_jaxpr({shown.replace('{inner}', 'recorded ' + _inner_expr(expr))})"
    stage = stage_of(label, method, lambda: make_jaxpr_with_extras(g)(*data_args, **data_kwargs))
    return stage, (build(h) if spec.entry.wrapper else None)


def _inner_expr(expr: str) -> str:
    return expr[expr.index("(") + 1:-1] if "(" in expr else expr





# --- growth: program size against batch size -------------------------------------

class _GrowthSink(Protocol):
    """Where growth() keeps its result: the session recording now (_recording's
    SessionRecorder, a layer above)."""

    def add_growth(self, growth: Growth) -> bool: ...


def growth(funs: Mapping[str, Callable], make_args: Callable[[int], tuple],
           sizes: Sequence[int] = (1, 2, 3, 4), title: str = "") -> Growth:
    """Equation counts of each function's staged program at each batch size.

    `make_args(n)` gives the arguments for batch size n (arrays or
    jax.ShapeDtypeStruct). Staging records nothing. Inside a `record()` block
    the result is also kept on the call recorded last (`Call.growth`): call
    it right after the call it measures.
    """
    if not funs:
        raise ValueError("growth() needs at least one function, e.g. {'loop': f, 'vmap': g}")
    sizes = tuple(sizes)
    if not sizes or any(not isinstance(n, int) or isinstance(n, bool) or n < 1 for n in sizes):
        raise ValueError(f"growth() sizes must be positive ints, got {sizes!r}")
    with recording_off():
        series = tuple(GrowthSeries(label, tuple(_growth_point(fun, make_args, n) for n in sizes))
                       for label, fun in funs.items())
    result = Growth(title or "equations per batch size", series)
    session: _GrowthSink | None = active_session()
    if session is not None:
        session.add_growth(result)
    return result


def _growth_point(fun: Callable, make_args: Callable[[int], tuple], size: int) -> GrowthPoint:
    try:
        closed = jax.make_jaxpr(fun)(*make_args(size))
    except Exception as e:  # this size cannot be staged; the other sizes still count
        return GrowthPoint(size, error=reason(e))
    eqns = closed.jaxpr.eqns
    return GrowthPoint(size, len(eqns), histogram(e.primitive.name for e in eqns))
