#!/usr/bin/env python3
"""Tracing overhead of recording: vmap(grad(loss)) of an 8-layer MLP.

Times `jax.make_jaxpr(f)(params, xs, ys)` end to end, where f is built afresh
each repetition (so no cache hides the cost), for
  plain:     f = jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))
  recorded:  with transforms.record(): f = transforms.vmap(transforms.grad(loss), ...)
The two alternate, and the ratio is median(recorded) / median(plain), both
measured in this run. Also reports the same ratio for an eager call (no
make_jaxpr; results waited for) as an informational figure.

    .venv/bin/python bench/bench_trace_overhead.py [--reps N] [--profile]
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
from _common import BATCH, DEPTH, WIDTH, exit_with, header, interleaved, make_mlp, median, verdict  # noqa: E402

import transforms  # noqa: E402

TARGET = 1.3
IN_AXES = (None, 0, 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30, help="timed repetitions of each variant")
    parser.add_argument("--profile", action="store_true",
                        help="also print a cProfile of one recorded make_jaxpr run")
    args = parser.parse_args()

    loss, params, xs, ys = make_mlp()

    def plain_jaxpr():
        f = jax.vmap(jax.grad(loss), in_axes=IN_AXES)
        return jax.make_jaxpr(f)(params, xs, ys)

    def recorded_jaxpr():
        with transforms.record() as session:
            f = transforms.vmap(transforms.grad(loss), in_axes=IN_AXES)
            jaxpr = jax.make_jaxpr(f)(params, xs, ys)
        return jaxpr, session

    def plain_eager():
        f = jax.vmap(jax.grad(loss), in_axes=IN_AXES)
        return jax.block_until_ready(f(params, xs, ys))

    def recorded_eager():
        with transforms.record() as session:
            f = transforms.vmap(transforms.grad(loss), in_axes=IN_AXES)
            out = jax.block_until_ready(f(params, xs, ys))
        return out, session

    # The recording must not change what JAX computes.
    plain_text = str(plain_jaxpr())
    jaxpr, session = recorded_jaxpr()
    assert str(jaxpr) == plain_text, "recorded make_jaxpr differs from plain JAX"
    steps = session.step_count

    header(f"bench_trace_overhead: vmap(grad(loss)), MLP {DEPTH} layers x {WIDTH} (tanh), "
           f"batch {BATCH}; {args.reps} interleaved reps each")
    print(f"  recorded make_jaxpr session: {len(session.calls)} call(s), {steps} steps")

    t = interleaved({"plain": plain_jaxpr, "recorded": recorded_jaxpr}, args.reps)
    p, r = median(t["plain"]), median(t["recorded"])
    ratio = r / p
    print(f"  make_jaxpr  plain    median (CPU) {p * 1e3:8.2f} ms  (min {min(t['plain']) * 1e3:.2f})")
    print(f"  make_jaxpr  recorded median (CPU) {r * 1e3:8.2f} ms  (min {min(t['recorded']) * 1e3:.2f})"
          f"  = {(r - p) / steps * 1e6:.1f} us extra per recorded step")
    print(f"  make_jaxpr ratio recorded/plain: {ratio:.3f}")

    te = interleaved({"plain": plain_eager, "recorded": recorded_eager}, args.reps)
    pe, re_ = median(te["plain"]), median(te["recorded"])
    print(f"  eager       plain    median {pe * 1e3:8.2f} ms")
    print(f"  eager       recorded median {re_ * 1e3:8.2f} ms")
    print(f"  eager ratio recorded/plain (informational): {re_ / pe:.3f}")

    if args.profile:
        import cProfile
        import pstats
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(5):
            recorded_jaxpr()
        prof.disable()
        stats = pstats.Stats(prof)
        print("\ncProfile of 5 recorded make_jaxpr runs, by own time (tottime):")
        stats.sort_stats("tottime").print_stats(25)
        print("by cumulative time, transforms/ only:")
        stats.sort_stats("cumulative").print_stats(r"transforms[/\\]", 25)

    exit_with(verdict("make_jaxpr ratio recorded/plain", ratio, TARGET))


if __name__ == "__main__":
    main()
