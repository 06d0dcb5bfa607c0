#!/usr/bin/env python3
"""Cost of stage capture and stage diffs on a 10,000-equation function.

The function is a Python loop of 5,000 (mul, add) pairs on a float32[3]:
10,001 equations. Each repetition builds it afresh, so no JAX cache of an
earlier repetition hides a cost. Capture never runs f again: it replays the
tape of what f bound during the recorded call under JAX's transformations,
and for jit reads JAX's trace, lowering and executable from its caches. In
the same run this times
  make_jaxpr:  one `jax.make_jaxpr(f)(x)`, the unit of every ratio;
  capture:     the CPU time inside stage capture (`_stages.capture`, and
               `DeferredJit.finish` for jit) while vmap(f), grad(f) and jit(f)
               are called inside `record()`; the recorded call itself (JAX's
               trace, jit's compile) is not counted;
  floor:       plain JAX producing the same artifacts directly (make_jaxpr of
               f and of each transformed function, lower, compile), which
               shows what stage capture adds on top of JAX's own work;
  pieces:      make_jaxpr(vmap(f)), make_jaxpr(grad(f)), jit's trace+lower and
               trace+lower+compile alone, and the records (text, equations)
               of one 10,001-equation stage: the breakdown of each capture;
  diff:        `diff_stages` of f against vmap(f) (10,001 x 10,001
               equations) and of f against grad(f).

Capture pauses Python's cyclic GC while it traces and collects the young
generation once at its end, inside the timed call; make_jaxpr runs as users
run it, GC on.

Targets: each capture <= 3x make_jaxpr; the f -> vmap(f) diff < 2 s. Where
JAX alone already takes more than 3x (make_jaxpr(grad(f)); jit's XLA
compile), the verdict says so and prints the measured piece.

    .venv/bin/python bench/bench_stages.py [--reps N] [--pairs N]
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from _common import (  # noqa: E402
    exit_with,
    header,
    interleaved,
    median,
    timed,
    timed_capture,
    verdict,
)

import transforms  # noqa: E402
import transforms._stages._records as stage_records  # noqa: E402
from transforms.model import diff_stages, find_stage  # noqa: E402

CAPTURE_TARGET = 3.0
DIFF_TARGET = 2.0


def make_f(pairs: int):
    def f(x):
        for _ in range(pairs):
            x = x * 1.0001 + 0.5
        return jnp.sum(x)
    return f


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="timed repetitions of each variant")
    parser.add_argument("--pairs", type=int, default=5000, help="(mul, add) pairs in the loop")
    args = parser.parse_args()
    header(f"Stage capture, {2 * args.pairs + 1} equations")

    x, xs = jnp.ones(3), jnp.ones((2, 3))
    new = lambda: make_f(args.pairs)  # noqa: E731

    spent: dict[str, list[float]] = {}

    def capture(wrap, *call_args, name=""):
        """Record one call of wrap(f); the time inside stage capture goes to spent[name].

        The recorded call itself (JAX's own trace, and for jit its compile) is
        not stage capture and is not counted.
        """
        def run():
            seconds, stages = _captured(lambda: wrap(new())(*call_args))
            spent.setdefault(name, []).append(seconds)
            return stages
        return run

    def capture_jit(*call_args):
        return capture(transforms.jit, *call_args, name="jit")

    closed = jax.make_jaxpr(new())(x)
    variants = {
        "make_jaxpr(f)": lambda: jax.make_jaxpr(new())(x),
        "capture vmap(f)": capture(transforms.vmap, xs, name="vmap"),
        "capture grad(f)": capture(transforms.grad, x, name="grad"),
        "capture jit(f)": capture_jit(x),
        "floor vmap(f)": lambda: _floor_vmap(new(), x, xs),
        "floor grad(f)": lambda: _floor_grad(new(), x),
        "floor jit(f)": lambda: _floor_jit(new(), x),
        # The pieces each capture cannot do without, as plain JAX:
        "make_jaxpr(vmap(f))": lambda: jax.make_jaxpr(jax.vmap(new()))(xs),
        "make_jaxpr(grad(f))": lambda: jax.make_jaxpr(jax.grad(new()))(x),
        "jit trace+lower": lambda: jax.jit(new()).trace(x).lower(),
        "jit trace+lower+compile": lambda: jax.jit(new()).trace(x).lower().compile(),
        "records of one stage": lambda: _records(closed),
    }
    times = interleaved(variants, args.reps, warmup=1)
    for kind in ("vmap", "grad", "jit"):  # the capture's own time, not the recorded call's
        times[f"capture {kind}(f)"] = spent[kind][-args.reps:]
    unit = median(times["make_jaxpr(f)"])
    x_of = {name: median(t) / unit for name, t in times.items()}
    print(f"  make_jaxpr(f): {unit:.3f} s (median of {args.reps}); below, N.NNx = N.NN of it")
    for kind in ("vmap", "grad", "jit"):
        took, floor = median(times[f"capture {kind}(f)"]), median(times[f"floor {kind}(f)"])
        print(f"  capture {kind}(f): {took:.3f} s = {took / unit:.2f}x make_jaxpr, "
              f"{took / floor:.2f}x plain JAX making the same stages ({floor / unit:.2f}x)")
    print(f"  records (text, equations) of one 10,001-equation stage: "
          f"{x_of['records of one stage']:.2f}x")
    print(f"  vmap(f): make_jaxpr(vmap(f)) alone {x_of['make_jaxpr(vmap(f))']:.2f}x; capture = "
          f"make_jaxpr(<recorded f>) + the vmap the call executed, staged + records of 2 stages")
    print(f"  grad(f): make_jaxpr(grad(f)) alone {x_of['make_jaxpr(grad(f))']:.2f}x; capture = "
          f"replays of the recorded f: f, jvp, linearize, linear and vjp at the call's values, "
          f"the grad the call executed + records of 6 stages")
    compile_x = x_of["jit trace+lower+compile"] - x_of["jit trace+lower"]
    print(f"  jit(f): trace+lower {x_of['jit trace+lower']:.2f}x, XLA compile {compile_x:.2f}x; "
          f"capture = JAX's cached trace, lowering and executable + records of 1 stage")
    _print_stage_seconds(capture_jit(x)())

    vmap_stages = capture(transforms.vmap, xs)()
    grad_stages = capture(transforms.grad, x)()
    f_stage = find_stage(vmap_stages, "f")
    diffs = {
        "f -> vmap(f)": (f_stage, find_stage(vmap_stages, "vmap(f)")),
        "f -> grad(f)": (find_stage(grad_stages, "f"), find_stage(grad_stages, "grad(f)")),
    }
    diff_times = {}
    for name, (a, b) in diffs.items():
        diff_times[name] = median([timed(lambda: diff_stages(a, b)) for _ in range(args.reps)])
        d = diff_stages(a, b)
        print(f"  diff {name} ({a.eqn_count} x {b.eqn_count} eqns): {diff_times[name]:.3f} s; "
              f"{d.summary()}")

    # What JAX alone needs for stages a capture cannot drop: f's jaxpr and the
    # transformed one (vmap, grad); for jit every stage is one call of JAX's.
    bounds = {"vmap": ("make_jaxpr(f) + make_jaxpr(vmap(f))", 1 + x_of["make_jaxpr(vmap(f))"]),
              "grad": ("make_jaxpr(f) + make_jaxpr(grad(f))", 1 + x_of["make_jaxpr(grad(f))"]),
              "jit": ("trace, lower, as_text, compile, as_text, analyses", x_of["floor jit(f)"])}
    code = 0
    for kind, (pieces, bound) in bounds.items():
        ratio = median(times[f"capture {kind}(f)"]) / unit
        code |= verdict(f"capture {kind}(f) / make_jaxpr(f)", ratio, CAPTURE_TARGET, "x")
        if bound > CAPTURE_TARGET:
            print(f"      unreachable in this run: JAX alone ({pieces}) takes {bound:.2f}x")
    code |= verdict("diff f -> vmap(f)", diff_times["f -> vmap(f)"], DIFF_TARGET, " s")
    exit_with(code)


def _captured(call) -> tuple[float, tuple]:
    """CPU seconds spent in stage capture while `call()` is recorded, and the call's stages."""
    def run():
        with transforms.record() as session:
            jax.block_until_ready(call())
        return session
    seconds, session = timed_capture(run)
    return seconds, session.calls[0].stages  # type: ignore[attr-defined]


def _records(closed):
    """What recording one stage adds to JAX's work: its text and equation records."""
    stage_records._source_texts = {}
    try:
        return stage_records.built(stage_records.Label("f", "f", "f"), closed, "", 0.0)
    finally:
        stage_records._source_texts = None


def _floor_vmap(f, x, xs):
    jax.make_jaxpr(f)(x)
    jax.make_jaxpr(jax.vmap(f))(xs)


def _floor_grad(f, x):
    jax.make_jaxpr(f)(x)
    jax.make_jaxpr(lambda p, t: jax.jvp(f, (p,), (t,)))(x, x)
    out, f_jvp = jax.linearize(f, x)
    jax.make_jaxpr(lambda p: jax.linearize(f, p))(x)
    jax.make_jaxpr(f_jvp)(x)
    jax.make_jaxpr(jax.vjp(f, x)[1])(out)
    jax.make_jaxpr(jax.grad(f))(x)


def _floor_jit(f, x):
    lowered = jax.jit(f).trace(x).lower()
    lowered.as_text()
    compiled = lowered.compile()
    compiled.as_text()
    compiled.cost_analysis()
    compiled.memory_analysis()


def _print_stage_seconds(stages) -> None:
    parts = ", ".join(f"{s.name} {s.seconds:.3f} s" for s in stages)
    print(f"  jit(f) stages: {parts}")


if __name__ == "__main__":
    main()
