"""jit's stages: JAX's own trace of a top-level jit, read once the trace is over
(DeferredJit), a jit inside another transformation, and the compiled views of both
(StableHLO, optimised HLO, cost and memory analyses).
"""
from __future__ import annotations

import contextlib
import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from .._capture import refusing_retrace
from .._devices import with_compiled_view
from .._jax import jax_own
from ..model import Metric, Stage, kind_of
from ._records import Label, built, capturing, failed, failed_capture, reason, steps_of_group

# cost_analysis() keys shown first, in this order; the rest follow sorted.
_COST_FIRST = ("flops", "transcendentals", "bytes accessed")
_MEMORY_FIRST = ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes",
                 "alias_size_in_bytes", "generated_code_size_in_bytes", "peak_memory_in_bytes")


# --- a jit called at top level: compiled after JAX's trace ends --------------------

@dataclass
class DeferredJit:
    """A top-level jit call's compiled stages, made once JAX has finished its trace.

    JAX calls our entry inside its trace, so the jaxpr does not exist yet when
    the call ends. Afterwards `jitted.trace` at the call's argument types (with
    the arguments' shardings and the mesh context of the call) is a hit in
    JAX's tracing cache, and lowering and compiling hit jit's own caches: the
    user's Python is not run again (a miss is refused, see `_api`).

    It holds nothing of the user's program: the arguments as types, the variables
    each step's equations wrote (types only: `steps`, which name each equation's step), and a
    jax.jit of our entry for the user's f (the entry holds f weakly; JAX's
    caches are keyed on it and on what JAX read of f when that jit was made,
    so it hits them after f is gone). The recorder reads the stages when the
    block ends, or as soon as the program drops f (see
    `SessionRecorder.watch_deferred`): what JAX frees then is freed then.
    """
    kind: str
    jitted: Any
    point: tuple
    expr: str
    named: str
    plain: bool
    error: str = ""
    mesh: Callable[[], Any] | None = None  # re-enters the call's mesh context
    inner: tuple[Stage, ...] = ()          # the stages captured when the call ended
    nested: tuple[Stage, ...] = ()         # of the transformations called inside
    steps: tuple = ()                      # what names each equation's step (steps_of_group)
    # handed JAX's trace of the call and its executable, once compiled here (a replay)
    on_trace: Callable[[Any, Any], None] | None = None

    def with_inner(self, stages: Sequence[Stage], nested: Sequence[Stage]) -> DeferredJit:
        """With the stages captured when the call ended (and its nested transformations')."""
        return dataclasses.replace(self, inner=tuple(stages), nested=tuple(nested))

    def finish(self) -> tuple[Stage, ...]:
        """The call's stages, now that JAX's trace is over. Never raises."""
        with capturing():
            try:
                return self.inner + tuple(self.stages()) + self.nested
            except Exception as e:  # a fault of ours: recorded on the call
                return self.inner + (failed_capture(self.kind, e),) + self.nested

    def stages(self) -> list[Stage]:
        outer, outer_named = f"jit({self.expr})", f"jit({self.named})"
        f_label = Label("f", self.named, "f")
        method = "jax.jit(f).trace(*args).jaxpr (JAX's own trace of this call)"
        if self.error:
            stages = [failed(f_label, method, f"jit tracing failed ({self.error})")] \
                if self.plain else []
            return stages + compiled_stages(None, self.error, outer, outer_named)
        args, kwargs = self.point
        start = time.perf_counter()
        traced, error = None, ""
        try:
            with self.mesh() if self.mesh is not None else contextlib.nullcontext():
                with refusing_retrace():
                    traced = self.jitted.trace(*args, **kwargs)
        except Exception as e:
            error = reason(e)
        seconds = time.perf_counter() - start
        stages = []
        if self.plain:
            with steps_of_group(self.steps):
                stages.append(failed(f_label, method, error, seconds) if traced is None
                              else built(f_label, traced.jaxpr, method, seconds))
        # under the key the call ran with: JAX's lowering and compilation caches hit
        with self.mesh() if self.mesh is not None else contextlib.nullcontext():
            with refusing_retrace():
                on_trace = self.on_trace
                hook = (lambda compiled: on_trace(traced, compiled)) if on_trace else None
                stages += compiled_stages(traced, error, outer, outer_named, hook)
        return stages


def nested_jit_stages(spec: Any, h: Callable | None, point: tuple | None, expr: str,
                      named: str, blocked: str, enclosing: str
                      ) -> tuple[list[Stage], Callable | None]:
    """A jit inside another transformation: its compiled views say what JAX compiles instead.

    JAX never lowers such a jit by itself (inside grad it compiles the jit's forward
    and backward parts, inside another jit the whole), so lowering it here would be
    a compilation the program never had, which JAX's caches and lowering counts
    would see. The jit (a jax.jit of the replay) is what the enclosing stages trace.
    """
    outer, outer_named = f"jit({expr})", f"jit({named})"
    if h is None or point is None:
        return compiled_stages(None, blocked or "not reached", outer, outer_named), None
    instead = kind_of(enclosing).compiles_a_jit_inside
    why = (f"JAX does not compile {outer_named} by itself inside {enclosing}: it compiles "
           f"{instead}; a call of {outer_named} outside any transformation has these stages")
    return [failed(label, "", why) for label in _compiled_labels(outer, outer_named)], \
        jax_own.jit(h, **spec.options.given)


# --- compiled views: StableHLO, optimised HLO, cost, memory ----------------------

def _compiled_labels(expr: str, named: str) -> list[Label]:
    return [
        Label(f"stablehlo({expr})", f"StableHLO of {named}", "stablehlo", "jit"),
        Label(f"hlo({expr})", f"optimised HLO of {named}", "hlo", "jit"),
        Label(f"cost({expr})", f"cost analysis of {named}", "cost", "jit"),
        Label(f"memory({expr})", f"memory analysis of {named}", "memory", "jit"),
    ]


def compiled_stages(traced: Any, error: str, expr: str, named: str,
                    on_compiled: Callable[[Any], None] | None = None) -> list[Stage]:
    """The compiled views of a traced jit; `on_compiled` is handed its executable (never
    raising: its own guard), so that nothing else lowers or compiles it again."""
    labels = _compiled_labels(expr, named)
    if traced is None:
        return [failed(label, "", f"not reached: jit tracing failed ({error})") for label in labels]
    stablehlo, hlo, cost, memory = labels
    start = time.perf_counter()
    try:
        lowered = traced.lower()
        text = lowered.as_text()
    except Exception as e:
        first = failed(stablehlo, "jax.jit(f).lower(*args).as_text()", reason(e),
                       time.perf_counter() - start)
        return [first] + [failed(label, "", f"not reached: lowering failed ({first.reason})")
                          for label in (hlo, cost, memory)]
    stages = [_text_stage(stablehlo, "jax.jit(f).lower(*args).as_text()", text, start)]
    start = time.perf_counter()
    try:
        compiled = lowered.compile()
        text = compiled.as_text()
    except Exception as e:
        no_hlo = failed(hlo, "jax.jit(f).lower(*args).compile().as_text()", reason(e),
                        time.perf_counter() - start)
        not_reached = f"not reached: compilation failed ({no_hlo.reason})"
        return stages + [no_hlo] + [failed(label, "", not_reached) for label in (cost, memory)]
    if on_compiled is not None:
        on_compiled(compiled)
    stages.append(with_compiled_view(
        _text_stage(hlo, "jax.jit(f).lower(*args).compile().as_text()", text, start), compiled))
    stages.append(_metrics_stage(cost, "compiled.cost_analysis()",
                                 lambda: _cost_metrics(compiled.cost_analysis())))
    stages.append(_metrics_stage(memory, "compiled.memory_analysis()",
                                 lambda: _memory_metrics(compiled.memory_analysis())))
    return stages


def _text_stage(label: Label, method: str, text: Any, start: float) -> Stage:
    if not isinstance(text, str):
        return failed(label, method, f"{method} gave {type(text).__name__}, not text",
                      time.perf_counter() - start)
    return Stage(label.name, label.title, text=text, role=label.role, transform=label.transform,
                 method=method, seconds=time.perf_counter() - start)


def _metrics_stage(label: Label, method: str, metrics: Callable[[], tuple[Metric, ...]]) -> Stage:
    start = time.perf_counter()
    try:
        found = metrics()
    except Exception as e:  # a backend without this analysis
        return failed(label, method, reason(e), time.perf_counter() - start)
    return Stage(label.name, label.title, role=label.role, transform=label.transform,
                 method=method, metrics=found, seconds=time.perf_counter() - start)


def _cost_metrics(cost: Any) -> tuple[Metric, ...]:
    if isinstance(cost, (list, tuple)):  # older jax: a list, one dict per computation
        cost = cost[0] if cost else None
    if not isinstance(cost, Mapping):
        raise TypeError(f"cost_analysis() returned {type(cost).__name__}, not a mapping")
    numbers = {str(k): v for k, v in cost.items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return _ordered(numbers, _COST_FIRST)


def _memory_metrics(stats: Any) -> tuple[Metric, ...]:
    if stats is None:
        raise TypeError("memory_analysis() returned None on this backend")
    numbers = {}
    for name in dir(stats):
        if not name.startswith("_"):
            value = getattr(stats, name)
            if isinstance(value, int) and not isinstance(value, bool):
                numbers[name] = value
    return _ordered(numbers, _MEMORY_FIRST)


def _ordered(numbers: dict, first: Sequence[str]) -> tuple[Metric, ...]:
    keys = [k for k in first if k in numbers] + sorted(k for k in numbers if k not in first)
    return tuple(Metric(k, numbers[k]) for k in keys)
