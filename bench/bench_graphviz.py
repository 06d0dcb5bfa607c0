"""Graphviz exporter on a 10,000-equation jaxpr.

    .venv/bin/python bench/bench_graphviz.py [--eqns 10000] [--calibrate]

Targets (issue 6): DOT source in under 2 s; a collapsed view rendered to SVG in
under 10 s; the full graph rendered in under 60 s or refused up front, naming
the collapse options. --calibrate also times `dot` on graphs of growing size,
the figures behind MAX_RENDER_NODES.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from transforms._stages import _records as _stage_records  # noqa: E402  (bench only: stage one jaxpr without a call)
from workbench import export  # noqa: E402
from workbench.export import GraphTooLarge, collect_jaxpr, to_dot  # noqa: E402


def program(blocks: int):
    def f(x, w):
        for _ in range(blocks):  # a Python loop: the jaxpr grows by 4 equations per block
            x = jnp.sin(x) * w + jnp.cos(x)
        return x
    return f


def stage_of(n_eqns: int):
    f = program(n_eqns // 4)
    closed = jax.make_jaxpr(f)(jnp.ones(8), jnp.ones(8))
    label = _stage_records.Label("f", "bench program", "f")
    return _stage_records.built(label, closed, "jax.make_jaxpr(f)", 0.0)


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--eqns", type=int, default=10_000)
    parser.add_argument("--calibrate", action="store_true")
    args = parser.parse_args()
    stage, seconds = timed(lambda: stage_of(args.eqns))
    print(f"stage: {len(stage.eqns)} equations, staged and recorded in {seconds:.2f} s")
    ok = True

    text, seconds = timed(lambda: to_dot(collect_jaxpr(stage)))
    print(f"full graph, DOT source (collect + to_dot): {seconds:.2f} s, {len(text) / 1e6:.1f} MB"
          f"  [target < 2 s] {'ok' if seconds < 2 else 'SLOW'}")
    ok &= seconds < 2

    with tempfile.TemporaryDirectory() as folder:
        session = _session(stage)
        if shutil.which("dot") is None:
            print("no `dot` binary: rendering figures skipped (apt-get install -y graphviz)")
            return 0 if ok else 1
        for name, kwargs in (("collapse_repeats", {"collapse_repeats": True}),
                             ("max_nodes=500", {"max_nodes": 500}),
                             ("focus=5000 radius=3", {"focus": len(stage.eqns) // 2,
                                                      "radius": 3})):
            out = os.path.join(folder, "collapsed.svg")
            _, seconds = timed(lambda: export.graph(session, "jaxpr", 0, out=out, quiet=True,
                                                    **kwargs))
            print(f"collapsed view ({name}) -> SVG: {seconds:.2f} s  [target < 10 s] "
                  f"{'ok' if seconds < 10 else 'SLOW'}")
            ok &= seconds < 10
        out = os.path.join(folder, "full.svg")
        start = time.perf_counter()
        try:
            export.graph(session, "jaxpr", 0, out=out, quiet=True)
            seconds = time.perf_counter() - start
            print(f"full graph -> SVG: rendered in {seconds:.2f} s  [target < 60 s]")
            ok &= seconds < 60
        except GraphTooLarge as e:
            seconds = time.perf_counter() - start
            print(f"full graph -> SVG: refused up front in {seconds:.2f} s: {e}")
            ok &= all(word in str(e) for word in ("collapse_repeats", "max_nodes", "focus"))
        if args.calibrate:
            for n in (500, 1000, 2000, 3000, 4000):
                small = _session(stage_of(n))
                out = os.path.join(folder, f"n{n}.svg")
                _, seconds = timed(lambda: export.graph(small, "jaxpr", 0, out=out, quiet=True,
                                                        force=True))
                print(f"calibrate: {n} equations -> SVG in {seconds:.2f} s")
    return 0 if ok else 1


def _session(stage):
    from transforms.model import Call, Session
    return Session(calls=[Call(0, "make_jaxpr", "f", None, stages=(stage,))])


if __name__ == "__main__":
    sys.exit(main())
