#!/usr/bin/env python3
"""Memory a recorded Session keeps, per step, at the default detail (record()).

Records vmap(grad(loss)) of the 8-layer MLP several times (eager calls), then
measures with tracemalloc the memory the Session alone retains: traced memory
with the session alive minus traced memory after deleting it (gc.collect()
before each reading), divided by session.step_count. Caches that outlive the
session (JAX's, ours) are not counted. A warm-up recording runs first. The
target applies to eager calls; the same figure for calls traced under
jax.make_jaxpr (no concrete arrays to describe) is informational.

    .venv/bin/python bench/bench_memory.py [--calls N] [--top K]
"""
from __future__ import annotations

import argparse
import gc
import json
import linecache
import os
import sys
import tracemalloc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
from _common import BATCH, DEPTH, WIDTH, exit_with, header, make_mlp, verdict  # noqa: E402

import transforms  # noqa: E402

TARGET = 500.0  # bytes per step
IN_AXES = (None, 0, 0)


def measure(record_session) -> dict:
    """What one recorded session keeps: traced memory alive minus deleted."""
    record_session()  # warm-up: JAX's compile and trace caches, our code caches
    tracemalloc.start(1)
    gc.collect()
    session = record_session()
    gc.collect()
    with_session, _ = tracemalloc.get_traced_memory()
    snap_with = tracemalloc.take_snapshot()
    steps = session.step_count
    calls = len(session.calls)
    json_bytes = len(json.dumps(session.to_json_dict(), separators=(",", ":")))
    del session
    gc.collect()
    without_session, _ = tracemalloc.get_traced_memory()
    snap_without = tracemalloc.take_snapshot()
    tracemalloc.stop()
    retained = with_session - without_session
    return dict(steps=steps, calls=calls, retained=retained, per_step=retained / steps,
                json_bytes=json_bytes, snap_with=snap_with, snap_without=snap_without)


def report(what: str, m: dict, top: int) -> None:
    print(f"  {what}: session of {m['calls']} calls, {m['steps']} steps")
    print(f"    retained by the session (tracemalloc, alive - deleted): {m['retained']:,} bytes"
          f" = {m['per_step']:.1f} bytes per step")
    print(f"    saved JSON: {m['json_bytes']:,} bytes = {m['json_bytes'] / m['steps']:.1f} bytes per step")
    if not top:
        return
    diff = m["snap_with"].compare_to(m["snap_without"], "lineno")
    diff = [d for d in diff if d.size_diff > 0][:top]
    print(f"    top {len(diff)} source lines of what the session keeps (bytes, blocks):")
    for d in diff:
        frame = d.traceback[0]
        name = frame.filename
        for marker in ("/transforms/", "/site-packages/"):
            if marker in name:
                name = name[name.index(marker) + 1:]
                break
        line = linecache.getline(frame.filename, frame.lineno).strip()
        print(f"      {d.size_diff:>9,} {d.count_diff:>6,}  {name}:{frame.lineno}  {line[:60]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10, help="recorded calls in the session")
    parser.add_argument("--top", type=int, default=8,
                        help="show the K source lines that allocated most of what the session keeps")
    args = parser.parse_args()

    loss, params, xs, ys = make_mlp()

    def record_eager():
        with transforms.record() as session:
            for _ in range(args.calls):
                f = transforms.vmap(transforms.grad(loss), in_axes=IN_AXES)
                jax.block_until_ready(f(params, xs, ys))
        return session

    def record_make_jaxpr():
        with transforms.record() as session:
            for _ in range(args.calls):
                f = transforms.vmap(transforms.grad(loss), in_axes=IN_AXES)
                jax.make_jaxpr(f)(params, xs, ys)
        return session

    header(f"bench_memory: {args.calls} recorded calls of vmap(grad(loss)), "
           f"MLP {DEPTH} layers x {WIDTH} (tanh), batch {BATCH}; default detail")

    eager = measure(record_eager)
    report("eager calls", eager, args.top)
    traced = measure(record_make_jaxpr)
    report("under jax.make_jaxpr (informational)", traced, 0)

    exit_with(verdict("retained bytes per step (eager calls)", eager["per_step"], TARGET, " B"))


if __name__ == "__main__":
    main()
