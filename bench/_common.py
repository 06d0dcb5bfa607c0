"""Shared pieces of the benchmarks: the MLP workload, timing, reporting."""
from __future__ import annotations

import contextlib
import gc
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from typing import Callable, Iterator

import jax
import jax.numpy as jnp

from transforms._capture._step_core import step_core_class

WIDTH = 64
DEPTH = 8
BATCH = 16


def make_mlp(depth: int = DEPTH, width: int = WIDTH, batch: int = BATCH, seed: int = 0):
    """An MLP (tanh), its per-example loss, and (params, xs, ys) to call it with."""
    key = jax.random.PRNGKey(seed)
    params = []
    for _ in range(depth):
        key, kw = jax.random.split(key)
        w = jax.random.normal(kw, (width, width), jnp.float32) / jnp.sqrt(width)
        params.append((w, jnp.zeros((width,), jnp.float32)))
    key, kx, ky = jax.random.split(key, 3)
    xs = jax.random.normal(kx, (batch, width), jnp.float32)
    ys = jax.random.normal(ky, (batch, width), jnp.float32)

    def loss(params, x, y):
        h = x
        for w, b in params:
            h = jnp.tanh(h @ w + b)
        return jnp.mean((h - y) ** 2)

    return loss, params, xs, ys


def timed(fn: Callable[[], object]) -> float:
    """CPU seconds of this process for one call of fn, after an untimed gc.collect().

    CPU time, not wall time: these machines are shared (2 cores, other jobs
    running), and wall time would count their work as ours. Both variants of
    a comparison are timed the same way, interleaved, in the same run.
    """
    gc.collect()
    start = time.process_time()
    fn()
    return time.process_time() - start


def timed_capture(run: Callable[[], object]) -> tuple[float, object]:
    """CPU seconds spent in stage capture while `run()` records, and what it returned.

    Stage capture is `transforms._stages.capture` (when a call ends) and
    `DeferredJit.finish` (a top-level jit's compiled stages, when the block
    ends); the recorded call itself (JAX's trace, jit's compile) is not counted.
    """
    import transforms._stages._chain as stages_module
    spent = [0.0]
    originals = stages_module.capture, stages_module.DeferredJit.finish

    def timing(fn):
        def wrapper(*args, **kwargs):
            start = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[0] += time.process_time() - start
        return wrapper
    stages_module.capture = timing(originals[0])  # type: ignore[assignment]
    stages_module.DeferredJit.finish = timing(originals[1])  # type: ignore[method-assign]
    try:
        result = run()
    finally:
        stages_module.capture, stages_module.DeferredJit.finish = originals  # type: ignore
    return spent[0], result


def interleaved(variants: dict[str, Callable[[], object]], reps: int,
                warmup: int = 2) -> dict[str, list[float]]:
    """Time each variant `reps` times, alternating which one goes first."""
    names = list(variants)
    for _ in range(warmup):
        for name in names:
            variants[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for rep in range(reps):
        order = names if rep % 2 == 0 else names[::-1]
        for name in order:
            times[name].append(timed(variants[name]))
    return times


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def header(title: str) -> None:
    print(f"{title}")
    print(f"  Python {platform.python_version()}, jax {jax.__version__}, "
          f"backend {jax.default_backend()}, {platform.machine()}, "
          f"{step_core_class().__name__} records the steps")


def verdict(name: str, value: float, target: float, unit: str = "") -> int:
    ok = value <= target
    print(f"{'PASS' if ok else 'FAIL'}: {name} = {value:.3f}{unit} (target <= {target}{unit})")
    return 0 if ok else 1


def exit_with(code: int) -> None:
    sys.stdout.flush()
    sys.exit(code)


def child_cpu(command: list[str]) -> float:
    """CPU seconds (user + system) of a whole child process: what it cost, whatever else
    runs on the machine beside it."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def alternating_child_cpu(commands: dict[str, list[str]], reps: int) -> dict[str, list[float]]:
    """Each command's child CPU seconds over `reps` rounds, the order alternating each round;
    a first round, not timed, warms the file cache."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for rep in range(reps + 1):
        order = list(commands) if rep % 2 == 0 else list(commands)[::-1]
        for name in order:
            seconds = child_cpu(commands[name])
            if rep:
                times[name].append(seconds)
    return times


@contextlib.contextmanager
def script_and_dump(name: str, source: str) -> Iterator[tuple[str, str]]:
    """A script written from `source` (dedented) in a temporary folder, and a dump path
    beside it, for benchmarks that run `workbench run` as a whole process."""
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, f"{name}.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent(source))
        yield script, os.path.join(tmp, "t.json")
