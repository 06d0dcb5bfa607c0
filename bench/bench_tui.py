"""The TUI on big sessions: first paint, navigation keys, search-next, memory.

Two sessions: 100,000 recorded steps (a loop-heavy vmap(grad(f)) recorded, then
its steps replicated with new indices), and a call whose jaxpr stages have
16,500 equations (a Python loop under vmap, recorded with stages=True: the size
where jaxplorer took 13 s to load). Measured in the same run as a plain
baseline: an empty Textual App's first paint.

Figures are wall times in Textual's headless driver (it renders every frame,
then discards the bytes): from starting the app to its first frame, and from a
key to the frame that shows its effect. Memory is tracemalloc's count of what
the running TUI allocated, against the session's own size (a deep getsizeof).

Targets: first paint, and the screen settled ("ready"), <= 1 s; each
navigation key and each search-next <= 100 ms, timed from the settled screen
(median, 90th percentile and slowest printed; the target is on the slowest);
TUI memory <= 3x the session. A key sent at the very first frame waits for
the screen to settle: printed too, for information. Prints PASS or FAIL, exits 1 on FAIL.
"""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import statistics
import sys
import time
import tracemalloc
from typing import Any

import jax.numpy as jnp
from textual.app import App
from textual.widgets import Static

import transforms as T
from transforms.record import Session
from workbench.tui import build_app

STEPS = 100_000
EQNS = 16_500


# --- sessions --------------------------------------------------------------------

def loop_heavy(x):
    for _ in range(250):
        x = jnp.sin(x) * 1.01 + 0.1
    return jnp.sum(x)


def session_of_steps(n: int) -> Session:
    """Record vmap(grad(loop_heavy)), then replicate its steps to n with new indices."""
    with T.record(inline_jnp=True) as s:
        T.vmap(T.grad(loop_heavy))(jnp.ones((4, 3)))
    call = s.calls[0]
    base = call.steps
    steps = []
    while len(steps) < n:
        offset = len(steps)
        for st in base:
            if len(steps) >= n:
                break
            cause = st.cause + offset if st.cause is not None else None
            steps.append(st._replace(index=st.index + offset, cause=cause))
    big = dataclasses.replace(call, steps=tuple(steps))
    return Session(calls=[big], jax_version=s.jax_version)


def make_loop(n_eqns: int):
    # One iteration stages to 3 equations (slice, squeeze, sin), plus a final stack.
    n = n_eqns // 3

    def python_loop(xs):
        return jnp.stack([jnp.sin(xs[i]) for i in range(n)])
    return python_loop, n


def session_of_stage(n_eqns: int) -> Session:
    fn, n = make_loop(n_eqns)
    with T.record(stages=True, inline_jnp=True) as s:
        T.vmap(fn)(jnp.ones((2, n)))
    return s


def deep_size(obj: Any) -> int:
    """Bytes of an object graph, each object counted once."""
    seen: set[int] = set()
    stack = [obj]
    total = 0
    while stack:
        o = stack.pop()
        if id(o) in seen or o is None or isinstance(o, (bool, type)):
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, (list, tuple, set, frozenset)):
            stack.extend(o)
        elif hasattr(o, "__slots__"):
            stack.extend(getattr(o, name) for name in o.__slots__ if hasattr(o, name))
        elif hasattr(o, "__dict__"):
            stack.append(vars(o))
    return total


# --- timing ----------------------------------------------------------------------

class Frames:
    """Times of the frames an app draws (wraps App._display)."""

    def __init__(self, app: App):
        self.times: list[float] = []
        self.start = 0.0
        original = app._display

        def display(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            self.times.append(time.perf_counter())
            return result
        app._display = display  # type: ignore[method-assign]

    def after(self, t: float) -> float | None:
        later = [x for x in self.times if x >= t]
        return later[-1] if later else None


class Baseline(App):
    def compose(self):
        yield Static("hello")


async def first_paint(make_app) -> tuple[float, App, Frames, Any]:
    start = time.perf_counter()
    app = make_app()
    frames = Frames(app)
    context = app.run_test(size=(120, 40))
    pilot = await context.__aenter__()
    while not frames.times:
        await asyncio.sleep(0.001)
    frames.start = start
    return frames.times[0] - start, app, frames, (context, pilot)


async def ready(pilot, frames: Frames) -> float:
    """From starting the app to its last frame before it first went idle: after
    this the screen is settled and a key is answered at once."""
    await pilot.pause()
    return frames.times[-1] - frames.start


async def key_latency(pilot, frames: Frames, key: str) -> float:
    """From sending a key to the last frame drawn before the app went idle."""
    t0 = time.perf_counter()
    await pilot.press(key)
    await pilot.pause()
    shown = frames.after(t0)
    return (shown if shown is not None else time.perf_counter()) - t0


def summary(xs: list[float]) -> tuple[float, float]:
    xs = sorted(xs)
    return statistics.median(xs), xs[min(len(xs) - 1, int(0.9 * len(xs)))]


async def bench_session(name: str, session: Session, keys: list[str], search: list[str],
                        rows: list[tuple[str, float, str]]) -> None:
    gc.collect()
    # A key pressed at the very first frame waits for the screen to settle.
    paint, app, frames, (context, pilot) = await first_paint(lambda: build_app(session))
    app.animation_level = "none"
    early = await key_latency(pilot, frames, keys[0])
    await context.__aexit__(None, None, None)
    gc.collect()

    paint, app, frames, (context, pilot) = await first_paint(lambda: build_app(session))
    app.animation_level = "none"
    rows.append((f"{name}: first paint", paint, "paint"))
    rows.append((f"{name}: ready (settled after first paint)", await ready(pilot, frames), "paint"))
    rows.append((f"{name}: key {keys[0]!r} sent at the first frame", early, "s"))
    nav = [await key_latency(pilot, frames, k) for k in keys]
    med, p90 = summary(nav)
    rows.append((f"{name}: navigation key, median", med, "s"))
    rows.append((f"{name}: navigation key, p90", p90, "s"))
    rows.append((f"{name}: navigation key, slowest ({keys[nav.index(max(nav))]})", max(nav), "nav"))
    t0 = time.perf_counter()
    for k in search:
        await pilot.press(k)
    await pilot.pause()
    rows.append((f"{name}: search {''.join(search[1:-1])!r} (all matches)",
                 time.perf_counter() - t0, "s"))
    nexts = [await key_latency(pilot, frames, k) for k in ["n"] * 15 + ["N"] * 5]
    med, p90 = summary(nexts)
    rows.append((f"{name}: search-next, median", med, "s"))
    rows.append((f"{name}: search-next, p90", p90, "s"))
    rows.append((f"{name}: search-next, slowest", max(nexts), "nav"))
    await context.__aexit__(None, None, None)


async def memory_of(session: Session, keys: list[str]) -> int:
    """Bytes the running TUI holds beyond the session, after first paint and some keys."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    paint, app, frames, (context, pilot) = await first_paint(lambda: build_app(session))
    for k in keys:
        await pilot.press(k)
    await pilot.pause()
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    await context.__aexit__(None, None, None)
    tracemalloc.stop()
    return held


async def main_async(args: argparse.Namespace) -> int:
    rows: list[tuple[str, float, str]] = []
    base, app, frames, (context, pilot) = await first_paint(Baseline)
    await context.__aexit__(None, None, None)
    # warm Textual's imports and caches, as a user's second launch would be
    base, app, frames, (context, pilot) = await first_paint(Baseline)
    await context.__aexit__(None, None, None)
    rows.append(("baseline: empty App first paint", base, "s"))

    t = time.perf_counter()
    steps = session_of_steps(args.steps)
    print(f"recorded and replicated {steps.step_count:,} steps in {time.perf_counter() - t:.1f} s")
    t = time.perf_counter()
    staged = session_of_stage(args.eqns)
    stage = max(staged.calls[0].stages, key=lambda s: s.eqn_count or 0)
    print(f"recorded a call with {len(staged.calls[0].stages)} stages, the largest "
          f"{stage.name!r} of {stage.eqn_count:,} equations, in {time.perf_counter() - t:.1f} s")

    nav_keys = ["down"] * 20 + ["pagedown"] * 5 + ["end", "up", "up", "home"] + ["pageup"]
    await bench_session(f"{steps.step_count:,} steps", steps, nav_keys,
                        ["slash", *"sin", "enter"], rows)
    stage_keys = ["2"] + ["down"] * 15 + ["pagedown"] * 5 + ["end", "home", "b", "a"]
    await bench_session(f"{stage.eqn_count:,}-equation stages", staged, stage_keys,
                        ["slash", *"sin", "enter"], rows)

    results = []
    for label, session, keys in ((f"{steps.step_count:,} steps", steps, nav_keys[:10]),
                                 (f"{stage.eqn_count:,}-equation stages", staged, stage_keys[:10])):
        size = deep_size(session)
        held = await memory_of(session, keys)
        results.append((label, size, held))

    ok = True
    print(f"\n{'figure':<52} {'value':>12}  target")
    for label, value, kind in rows:
        target = ""
        if kind == "paint":
            target = "<= 1 s"
            ok &= value <= 1.0
        elif kind == "nav":
            target = "<= 100 ms"
            ok &= value <= 0.1
        ratio = f"  ({value / base:.1f}x baseline)" if "first paint" in label else ""
        print(f"{label:<52} {value * 1000:>9.1f} ms  {target}{ratio}")
    for label, size, held in results:
        ratio = held / size
        ok &= ratio <= 3.0
        print(f"{label + ': TUI memory / session size':<52} {ratio:>12.2f}  <= 3x   "
              f"(session {size / 1e6:.1f} MB, TUI {held / 1e6:.1f} MB)")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--eqns", type=int, default=EQNS)
    args = parser.parse_args()
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
