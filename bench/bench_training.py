#!/usr/bin/env python3
"""What stages by default cost a training script, as ratios measured in one run.

1. Whole processes: `workbench run -q -o t.json SCRIPT.py` (stages on, the
   default) against `python SCRIPT.py`, for a 200-step training script of a
   3-layer MLP, in two variants: `jit` (a jitted train_step with
   jax.value_and_grad inside, the usual shape of flax/optax scripts) and
   `eager` (jax.value_and_grad called in the Python loop, no jit). CPU time of
   the child process (user + system, from getrusage), alternating the two
   commands, median of --reps each. Target <= 1.3x for each variant.
2. Stage capture against JAX building the same stages itself, in process, CPU
   time, median of --reps, each repetition on a freshly built loss (so no JAX
   cache of an earlier repetition helps either side):
     eager: value_and_grad(loss) recorded; capture = the time inside
            transforms._stages.capture for that call. JAX: make_jaxpr of loss,
            of jax.jvp, jax.linearize, the linear map at the point, the vjp
            backward and jax.value_and_grad, on the real function.
     jit:   the jitted train_step recorded; capture = transforms._stages.capture
            (the inner value_and_grad's stages, at the end of JAX's trace) plus
            DeferredJit.finish (the step's jaxpr, StableHLO, HLO, cost, memory).
            JAX: jax.jit(train_step).trace(...).lower().compile() with its
            texts and analyses, and the same six jaxprs of the inner
            value_and_grad at the step's argument types.
   Every stage's text is checked equal to JAX's before timing. Target <= 0.8x.
3. Memory a session keeps per recorded step, with stages and without, for
   --steps eager training steps (tracemalloc: alive minus after deleting it,
   divided by the step count; the stages are captured once and shared).

    .venv/bin/python bench/bench_training.py [--reps N] [--capture-reps N] [--steps N]
"""
from __future__ import annotations

import argparse
import gc
import os
import re
import statistics
import sys
import textwrap
import time
import tracemalloc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
from _common import (  # noqa: E402
    alternating_child_cpu,
    exit_with,
    header,
    median,
    script_and_dump,
    timed_capture,
    verdict,
)

import transforms  # noqa: E402
from transforms.model import find_stage  # noqa: E402

RUN_TARGET = 1.3
CAPTURE_TARGET = 0.8

MODEL = """
    import jax
    import jax.numpy as jnp

    def init(key, sizes=(32, 64, 64, 10)):
        params = []
        for n_in, n_out in zip(sizes[:-1], sizes[1:]):
            key, k = jax.random.split(key)
            params.append({"w": jax.random.normal(k, (n_in, n_out)) / jnp.sqrt(n_in),
                           "b": jnp.zeros(n_out)})
        return params

    def loss(params, x, y):
        h = x
        for layer in params[:-1]:
            h = jax.nn.relu(h @ layer["w"] + layer["b"])
        logits = h @ params[-1]["w"] + params[-1]["b"]
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, axis=-1))
"""

SCRIPTS = {
    "jit": MODEL + """
    @jax.jit
    def train_step(params, x, y):
        value, grads = jax.value_and_grad(loss)(params, x, y)
        return jax.tree_util.tree_map(lambda p, g: p - 0.05 * g, params, grads), value

    key = jax.random.PRNGKey(0)
    params = init(key)
    x = jax.random.normal(key, (64, 32))
    y = jax.nn.one_hot(jax.random.randint(key, (64,), 0, 10), 10)
    for step in range(200):
        params, value = train_step(params, x, y)
    print("final loss", float(value))
""",
    "eager": MODEL + """
    key = jax.random.PRNGKey(0)
    params = init(key)
    x = jax.random.normal(key, (64, 32))
    y = jax.nn.one_hot(jax.random.randint(key, (64,), 0, 10), 10)
    for step in range(200):
        value, grads = jax.value_and_grad(loss)(params, x, y)
        params = jax.tree_util.tree_map(lambda p, g: p - 0.05 * g, params, grads)
    print("final loss", float(value))
""",
}


def bench_run(variant: str, reps: int) -> int:
    with script_and_dump(f"train_{variant}", SCRIPTS[variant]) as (script, dump):
        commands = {
            "python SCRIPT.py": [sys.executable, script],
            "workbench run": [sys.executable, "-m", "workbench", "run", "-q", "-o", dump, script],
        }
        times = alternating_child_cpu(commands, reps)
        session = transforms.load(dump)
    plain, ours = median(times["python SCRIPT.py"]), median(times["workbench run"])
    stages = sum(len(c.stages) for c in session.calls)
    shared = len({id(c.stages) for c in session.calls if c.stages})
    print(f"  {variant}: 200 training steps, child CPU seconds, median of {reps}:")
    print(f"    python SCRIPT.py                 {plain:.3f} s")
    print(f"    workbench run -o t.json          {ours:.3f} s   ({len(session.calls)} calls, "
          f"{session.step_count} steps, {stages} stages in {shared} shared set(s))")
    return verdict(f"{variant}: workbench run / python SCRIPT.py", ours / plain, RUN_TARGET, "x")


# --- 2. capture against JAX building the same stages -----------------------------------

def fresh_model():
    namespace: dict = {}
    exec(textwrap.dedent(MODEL), namespace)  # a new loss each time: no JAX cache is shared
    key = jax.random.PRNGKey(0)
    params = namespace["init"](key)
    x = jax.random.normal(key, (64, 32))
    y = jax.nn.one_hot(jax.random.randint(key, (64,), 0, 10), 10)
    return namespace["loss"], params, x, y


def make_step(T, loss):
    def train_step(params, x, y):
        value, grads = T.value_and_grad(loss)(params, x, y)
        return jax.tree_util.tree_map(lambda p, g: p - 0.05 * g, params, grads), value
    return T.jit(train_step)


def jax_ad_stages(f: str, loss, params, x, y) -> dict[str, str]:
    """What JAX makes itself for value_and_grad(loss) at these arguments, by stage name
    (`f` for the call's own function). At values, x and y are constants of the
    autodiff jaxprs; at types (inside a jit), they are inputs after the parameters."""
    out: dict[str, str] = {f: str(jax.make_jaxpr(loss)(params, x, y))}
    if not isinstance(x, jax.ShapeDtypeStruct):
        def at(p):
            return loss(p, x, y)
        out[f"jvp({f})"] = str(jax.make_jaxpr(lambda p, t: jax.jvp(at, p, t))((params,),
                                                                              (params,)))
        out[f"linearize({f})"] = str(jax.make_jaxpr(lambda p: jax.linearize(at, p))(params))
        out[f"linear({f})"] = str(jax.make_jaxpr(jax.linearize(at, params)[1])(params))
        primal, backward = jax.vjp(at, params)
        out[f"transpose(linear({f}))"] = str(jax.make_jaxpr(backward)(primal))
    else:
        inner: dict[str, str] = {}

        def jvp(p, t, x, y):
            return jax.jvp(lambda q: loss(q, x, y), p, t)

        def linearized(p, x, y):
            primal, linear = jax.linearize(lambda q: loss(q, x, y), p)
            inner[f"linear({f})"] = str(jax.make_jaxpr(linear)(p))
            return primal, linear

        def forward(p, x, y):
            primal, backward = jax.vjp(lambda q: loss(q, x, y), p)
            inner[f"transpose(linear({f}))"] = str(jax.make_jaxpr(backward)(primal))
            return primal
        out[f"jvp({f})"] = str(jax.make_jaxpr(jvp)((params,), (params,), x, y))
        out[f"linearize({f})"] = str(jax.make_jaxpr(linearized)(params, x, y))
        jax.make_jaxpr(forward)(params, x, y)
        out.update(inner)
    out[f"value_and_grad({f})"] = str(jax.make_jaxpr(jax.value_and_grad(loss))(params, x, y))
    return out


def capture_eager(_=None):
    loss, params, x, y = fresh_model()

    def run():
        with transforms.record() as session:
            transforms.value_and_grad(loss)(params, x, y)
        return session
    seconds, session = timed_capture(run)
    return seconds, session.calls[0].stages, (loss, params, x, y)


def jax_eager(model) -> tuple[float, dict]:
    loss, params, x, y = fresh_model()
    gc.collect()
    start = time.process_time()
    texts = jax_ad_stages("f", loss, params, x, y)
    return time.process_time() - start, texts


def capture_jit(_=None):
    loss, params, x, y = fresh_model()
    step = make_step(transforms, loss)

    def run():
        with transforms.record() as session:
            jax.block_until_ready(step(params, x, y))
        return session
    seconds, session = timed_capture(run)
    return seconds, session.calls[0].stages, (loss, params, x, y)


def jax_jit(model) -> tuple[float, dict]:
    loss, params, x, y = fresh_model()
    step = make_step(jax, loss)
    types = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype),
                                   (params, x, y))
    gc.collect()
    start = time.process_time()
    traced = step.trace(params, x, y)
    texts = {"f": str(traced.jaxpr)}
    lowered = traced.lower()
    texts["stablehlo(jit(f))"] = lowered.as_text()
    compiled = lowered.compile()
    texts["hlo(jit(f))"] = compiled.as_text()
    compiled.cost_analysis()
    compiled.memory_analysis()
    texts.update(jax_ad_stages("loss", loss, *types))
    return time.process_time() - start, texts


def _hlo_body(text: str) -> list[str]:
    """The instructions of optimised HLO, without the module name and source metadata."""
    lines = text.splitlines()[1:]
    return [re.sub(r",? ?(metadata=\{[^}]*\}|stack_frame_id=\d+)", "", line)
            for line in lines if ("=" in line and not line[:1].isdigit())
            or line.startswith(("ENTRY", "}", "%"))]


def check_same_text(variant: str, stages, texts: dict) -> None:
    for name, text in texts.items():
        stage = find_stage(stages, name)
        ours = stage.jaxpr.text if stage.jaxpr is not None else stage.text
        if name == "hlo(jit(f))":  # the same program; where it was called from differs
            ours, text = _hlo_body(ours), _hlo_body(text)
        if ours != text:
            raise SystemExit(f"FAIL: {variant}: stage {name} differs from JAX's own")


def bench_capture(variant: str, reps: int) -> int:
    ours_fn, jax_fn = {"eager": (capture_eager, jax_eager), "jit": (capture_jit, jax_jit)}[variant]
    ours, theirs = [], []
    for rep in range(reps + 1):
        first, second = (ours_fn, jax_fn) if rep % 2 == 0 else (jax_fn, ours_fn)
        results = {}
        for fn in (first, second):
            results[fn] = fn(None)
        seconds, stages, _ = results[ours_fn]
        jax_seconds, texts = results[jax_fn]
        if rep == 0:
            check_same_text(variant, stages, texts)  # and warm up both sides
            continue
        ours.append(seconds)
        theirs.append(jax_seconds)
    a, b = median(ours), median(theirs)
    print(f"  {variant}: stage capture {a * 1e3:.1f} ms, JAX making the same stages "
          f"{b * 1e3:.1f} ms (CPU, median of {reps}; texts equal)")
    return verdict(f"{variant}: capture / JAX's own", a / b, CAPTURE_TARGET, "x")


# --- 3. memory per step ----------------------------------------------------------------

def session_bytes(stages: bool, steps: int) -> tuple[float, int]:
    loss, params, x, y = fresh_model()
    g = transforms.value_and_grad(loss)
    gc.collect()
    tracemalloc.start()
    with transforms.record(stages=stages) as session:
        for _ in range(steps):
            value, grads = g(params, x, y)
            params = jax.tree_util.tree_map(lambda p, d: p - 0.05 * d, params, grads)
    del value, grads
    gc.collect()
    alive = tracemalloc.get_traced_memory()[0]
    count = session.step_count
    del session
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return (alive - after) / count, count


def bench_memory(steps: int) -> None:
    with_stages, count = session_bytes(True, steps)
    without, _ = session_bytes(False, steps)
    print(f"  memory a session keeps per step ({steps} eager value_and_grad steps, {count} "
          f"steps recorded): {with_stages:.0f} bytes with stages, {without:.0f} without "
          f"(+{statistics.mean([with_stages - without]):.0f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3, help="timed runs of each process")
    parser.add_argument("--capture-reps", type=int, default=7, help="timed captures")
    parser.add_argument("--steps", type=int, default=50, help="steps for the memory figure")
    args = parser.parse_args()
    header("bench_training: stages by default in a training script")
    code = 0
    for variant in ("jit", "eager"):
        code |= bench_run(variant, args.reps)
    for variant in ("jit", "eager"):
        code |= bench_capture(variant, args.capture_reps)
    bench_memory(args.steps)
    exit_with(code)


if __name__ == "__main__":
    main()
