#!/usr/bin/env python3
"""Cached calls of transforms.jit(f) against jax.jit(f).

Both are compiled first; then batches of calls alternate between the two
(each call waited for with block_until_ready), and the ratio is the median over
batch pairs of (per-call time, transforms) / (per-call time, jax): each pair is
timed back to back, so a machine slowing down between pairs moves both.
Measured outside a record() block and inside one, for a function first traced in
the block (as under `workbench run`) and for the jit jitted and called before the block:
all three with the target. Inside a block, f jitted again (JAX answers it from the
executables jax.jit(f) made) asks JAX's `.trace` on each call (informational).

    .venv/bin/python bench/bench_jit_cached.py [--calls N] [--batches B] [--cpu-time]
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from _common import exit_with, header, median, verdict  # noqa: E402

import transforms  # noqa: E402

TARGET = 1.05
_CLOCK = [time.perf_counter]  # --cpu-time: time.process_time (a busy shared machine)


def f(x):
    return jnp.sin(x) * 2.0 + jnp.cos(x)


def g(x):  # f's twin, jitted first inside the block (as `workbench run` jits a script's)
    return jnp.sin(x) * 2.0 + jnp.cos(x)


def h(x):  # f's twin, jitted and called before the block (jax.jit(f) shares f's caches)
    return jnp.sin(x) * 2.0 + jnp.cos(x)


def per_call_times(fns: dict, x, calls: int, batches: int) -> dict[str, list[float]]:
    """Seconds per call for each function, `batches` batches of calls/batches calls."""
    per_batch = max(1, calls // batches)
    out: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    for b in range(batches):
        order = names if b % 2 == 0 else names[::-1]
        for name in order:
            g = fns[name]
            gc.collect()
            start = _CLOCK[0]()
            for _ in range(per_batch):
                g(x).block_until_ready()
            out[name].append((_CLOCK[0]() - start) / per_batch)
    return out


def paired_ratio(times: dict[str, list[float]]) -> float:
    """The median over batch pairs of transforms.jit's time over jax.jit's."""
    return median([w / p for w, p in zip(times["transforms.jit"], times["jax.jit"])])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000, help="calls of each function")
    parser.add_argument("--batches", type=int, default=200, help="interleaved batches")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time batches in this process's CPU time, not wall time (on a "
                             "machine other processes keep busy)")
    args = parser.parse_args()
    if args.cpu_time:
        _CLOCK[0] = time.process_time

    x = jnp.linspace(0.0, 1.0, 16, dtype=jnp.float32)
    plain = jax.jit(f)
    wrapped = transforms.jit(f)
    # Outside a block, a call of ours is JAX's own object called (chosen in C, or through a
    # property where the C core is not built).
    assert wrapped._call_target() is wrapped._jitted, "a call goes through ours"
    for g in (plain, wrapped):  # compile, then warm up
        for _ in range(200):
            g(x).block_until_ready()
    assert bool(jnp.all(plain(x) == wrapped(x)))

    header(f"bench_jit_cached: cached calls of a jitted f(x: float32[16]); "
           f"{args.calls} calls each in {args.batches} interleaved batches"
           + (" (CPU time)" if args.cpu_time else ""))
    t = per_call_times({"jax.jit": plain, "transforms.jit": wrapped}, x, args.calls, args.batches)
    p, w = median(t["jax.jit"]), median(t["transforms.jit"])
    ratio = paired_ratio(t)
    print(f"  jax.jit        median {p * 1e6:7.2f} us/call")
    print(f"  transforms.jit median {w * 1e6:7.2f} us/call")
    print(f"  ratio transforms/jax (outside record()): {ratio:.3f}")

    # Inside a record() block, a jit jitted and called before it: its first call records
    # the trace JAX cached before the block (traced once more, for the recording); once
    # every trace JAX can answer its calls from is recorded, a call is JAX's own object.
    earlier = transforms.jit(h)
    for _ in range(200):
        earlier(x).block_until_ready()
    with transforms.record() as session:
        for _ in range(200):
            earlier(x).block_until_ready()
        assert earlier._call_target() is earlier._jitted, "a call in the block goes through ours"
        recorded_steps = session.step_count
        ti = per_call_times({"jax.jit": plain, "transforms.jit": earlier}, x,
                            args.calls, args.batches)
        assert earlier._call_target() is earlier._jitted, "a call in the block went through ours"
        assert session.step_count == recorded_steps, "a cached call recorded steps"
        assert len(session.calls) == 1, "a cached call was recorded again"
    pi, wi = median(ti["jax.jit"]), median(ti["transforms.jit"])
    before = paired_ratio(ti)
    print(f"  inside record(), jitted and called before the block: jax.jit {pi * 1e6:.2f} us/call, "
          f"transforms.jit {wi * 1e6:.2f} us/call, ratio {before:.3f}")

    # Inside a block, f jitted again: JAX answers its calls from the executables of
    # jax.jit(f) and transforms.jit(f) above (its caches are shared between functions that
    # compare equal), traces the entry never saw made, so each call asks JAX's .trace
    # (an informational figure).
    with transforms.record() as session:
        again = transforms.jit(f)
        for _ in range(200):
            again(x).block_until_ready()
        tj = per_call_times({"jax.jit": plain, "transforms.jit": again}, x,
                            args.calls, args.batches)
        assert len(session.calls) == 1, "a cached call was recorded again"
    pj, wj = median(tj["jax.jit"]), median(tj["transforms.jit"])
    print(f"  inside record(), jitted again in the block: jax.jit {pj * 1e6:.2f} us/call, "
          f"transforms.jit {wj * 1e6:.2f} us/call, ratio {paired_ratio(tj):.3f} (informational: each "
          f"call asks JAX's .trace)")

    # Inside a block, of a function first traced in it: every trace JAX can answer from
    # was recorded there, so a call is JAX's own, as outside.
    with transforms.record() as session:
        fresh = transforms.jit(g)
        for _ in range(200):
            fresh(x).block_until_ready()
        assert fresh._call_target() is fresh._jitted, "a call in the block goes through ours"
        tb = per_call_times({"jax.jit": plain, "transforms.jit": fresh}, x,
                            args.calls, args.batches)
        assert len(session.calls) == 1, "a cached call was recorded again"
    pb, wb = median(tb["jax.jit"]), median(tb["transforms.jit"])
    inside = paired_ratio(tb)
    print(f"  inside record(), first traced in the block: jax.jit {pb * 1e6:.2f} us/call, "
          f"transforms.jit {wb * 1e6:.2f} us/call, ratio {inside:.3f}")

    failed = verdict("cached-call ratio transforms.jit/jax.jit", ratio, TARGET)
    failed |= verdict("cached-call ratio inside record()", inside, TARGET)
    failed |= verdict("cached-call ratio inside record(), jitted before it", before, TARGET)
    exit_with(failed)


if __name__ == "__main__":
    main()
