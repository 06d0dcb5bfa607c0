"""Notebook HTML of big sessions (issue 38): time to render and size of the HTML.

Two sessions of 100,000 steps: one call (a loop-heavy vmap(grad(f)) recorded with its
stages, its steps replicated with new indices: the call view draws its jaxpr graph with
Graphviz) and 1,000 calls of 100 steps (the MLP's vmap(grad) of bench_cli, replicated:
the session's call table and its first calls in full). Each is rendered as a notebook
output (`Session._repr_html_`) and as the standalone page (`workbench html`), best of
three, wall time (Graphviz runs as a child process, which CPU time would not count).

Targets (the issue's): under 2 s and under 5 MB of HTML each. Prints PASS or FAIL, exits 1
on FAIL.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time

import transforms as T
from transforms.model import Session
from workbench.html import page

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _common import make_mlp  # noqa: E402
from bench_tui import session_of_steps  # noqa: E402

STEPS = 100_000
SECONDS = 2.0
MEGABYTES = 5.0


def one_call(steps: int) -> Session:
    """bench_tui's loop-heavy vmap(grad(f)), recorded with its stages, `steps` steps."""
    session = session_of_steps(steps, stages=True)
    session.title = f"one call of {steps:,} steps"
    return session


def many_calls(steps: int, per_call: int = 100) -> Session:
    """The MLP's vmap(grad(loss)) with stages, as steps // per_call calls."""
    loss, params, xs, ys = make_mlp()
    with T.record(stages=True) as s:
        T.vmap(T.grad(loss), in_axes=(None, 0, 0))(params, xs, ys)
    call = s.calls[0]
    calls = [dataclasses.replace(call, index=i, steps=call.steps[:per_call])
             for i in range(steps // per_call)]
    return Session(calls=calls, jax_version=s.jax_version,
                   title=f"{len(calls):,} calls of {per_call} steps")


def measure(render, reps: int) -> tuple[float, int]:
    best, size = float("inf"), 0
    for _ in range(reps):
        start = time.perf_counter()
        html = render()
        best = min(best, time.perf_counter() - start)
        size = len(html.encode("utf-8"))
    return best, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    ok = True
    print(f"HTML of {args.steps:,}-step sessions (best of {args.reps}, wall time)")
    for session in (one_call(args.steps), many_calls(args.steps)):
        assert session.step_count == args.steps
        for what, render in (("notebook output", session._repr_html_),
                             ("standalone page", lambda: page(session))):
            seconds, size = measure(render, args.reps)
            good = seconds < SECONDS and size < MEGABYTES * 1e6
            ok &= good
            print(f"  {session.title:28} {what:16} {seconds:6.3f} s  {size / 1e6:6.2f} MB  "
                  f"{'ok' if good else 'OVER'} (< {SECONDS:g} s, < {MEGABYTES:g} MB)")
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
