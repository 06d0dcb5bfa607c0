#!/usr/bin/env python3
"""The `workbench` command's costs.

1. `workbench run -o trace.json SCRIPT.py` against `python SCRIPT.py`, where the
   script builds an 8-layer MLP and runs one jitted training step (first call:
   tracing and compiling included). Whole processes' CPU time (the machine is shared),
   alternating, median of --reps each; target <= 1.5x.
2. Dumping (Session.save) and loading (transforms.load) a 100,000-step session
   (schema version 4), CPU seconds, median and range of --io-reps runs; target
   < 2 s each. Two sessions: "recorded", vmap(grad(loss)) of the MLP called
   until 100,000 steps are recorded (every call's records are distinct objects,
   as in a real recording), and "replicated", one call's steps repeated (the
   same objects again and again).
3. `workbench show` of a small dump, whole process, wall time against
   `python -c pass`; target <= 0.5 s (it imports no JAX).
4. A million-step session (copies of the recorded one's calls, objects shared as the
   recording shares them: see million_session): save and load (every call decoded) <= 3 s CPU each,
   load(lazy=True) for information, and `workbench open` on it in a headless terminal:
   the session's first frame (after the loading frame) within 2 s of the process's start
   (wall) and peak memory under 2.5x the file's size. The baseline, in the same run: the
   json module alone parsing the file and writing the parsed data back.

    .venv/bin/python bench/bench_cli.py [--reps N] [--steps N] [--io-reps N]
"""
from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import pickle
import subprocess
import sys
import tempfile
import textwrap
import time
from typing import Any, Iterator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (  # noqa: E402
    alternating_child_cpu,
    exit_with,
    header,
    make_mlp,
    median,
    timed,
    verdict,
)

import transforms  # noqa: E402
from transforms.model import (  # noqa: E402
    Call,
    Session,
    gc_paused,  # noqa: E402
)

RUN_TARGET = 1.5
IO_TARGET = 2.0
SHOW_TARGET = 0.5  # seconds of wall time for `workbench show` of a small dump
BIG_IO_TARGET = 3.0  # save, load of a million-step session
OPEN_TARGET = 2.0  # seconds to the first frame of `workbench open` on it
OPEN_MEMORY_TARGET = 2.5  # peak memory over the file's size

# `workbench open` in a headless terminal: seconds from process start to the first frame, and
# the peak memory then (the TUI as the user gets it; Textual's headless driver).
OPEN_PROBE = """
import time
T0 = time.perf_counter()
import json, sys
from workbench import cli
import workbench.tui as tui
seen = {}

def peak_mb():  # NB: not ru_maxrss, which a child inherits from its parent across exec
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM")) / 1e3

async def first_frame(pilot):
    await pilot.pause()
    seen["loading_seconds"] = time.perf_counter() - T0  # the loading frame
    while type(pilot.app.screen).__name__ == "LoadingScreen":  # the dump read behind it
        await pilot.pause(0.01)
    await pilot.pause()
    seen["seconds"] = time.perf_counter() - T0  # the session's first frame
    seen["peak_mb"] = peak_mb()
    await pilot.press("down", "end", "enter")  # to the last call, unfolded
    await pilot.pause()
    seen["after_keys_mb"] = peak_mb()
    pilot.app.exit()

def headless(path, export_dir=None, process=None, load=None, check=None):
    # `workbench open`'s own app (tui.open_dump's), in Textual's headless driver
    app = tui.build_open_app(path, load, export_dir, process, check)
    app.run(headless=True, auto_pilot=first_frame, size=(120, 40))
    return app.return_code or 0

class _Terminal:  # the open command asks for a terminal before it starts the app
    def __init__(self, stream):
        self._stream = stream
    def isatty(self):
        return True
    def __getattr__(self, name):
        return getattr(self._stream, name)

tui.open_dump = headless
sys.stdin, sys.stdout = _Terminal(sys.stdin), _Terminal(sys.stdout)
code = cli.main(["open", sys.argv[1]])
seen["jax_imported"] = "jax" in sys.modules
print(json.dumps(seen))
sys.exit(code)
"""

SCRIPT = """
    import jax
    import jax.numpy as jnp

    DEPTH, WIDTH, BATCH = 8, 64, 16
    key = jax.random.PRNGKey(0)
    params = []
    for _ in range(DEPTH):
        key, kw = jax.random.split(key)
        params.append((jax.random.normal(kw, (WIDTH, WIDTH)) / jnp.sqrt(WIDTH),
                       jnp.zeros((WIDTH,))))
    key, kx, ky = jax.random.split(key, 3)
    xs = jax.random.normal(kx, (BATCH, WIDTH))
    ys = jax.random.normal(ky, (BATCH, WIDTH))

    def loss(params, x, y):
        h = x
        for w, b in params:
            h = jnp.tanh(h @ w + b)
        return jnp.mean((h - y) ** 2)

    @jax.jit
    def train_step(params, x, y):
        grads = jax.grad(loss)(params, x, y)
        return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)

    params = train_step(params, xs, ys)
    jax.block_until_ready(params)
    print("trained one step")
"""


def bench_run(reps: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "mlp_step.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent(SCRIPT))
        dump = os.path.join(tmp, "trace.json")
        commands = {
            "python SCRIPT.py": [sys.executable, script],
            "workbench run -o": [sys.executable, "-m", "workbench", "run", "-q", "-o", dump,
                                 script],
        }
        times = alternating_child_cpu(commands, reps)
        session = transforms.load(dump)
    plain, ours = median(times["python SCRIPT.py"]), median(times["workbench run -o"])
    print(f"  8-layer MLP, one jitted training step, whole process CPU time, median of {reps}:")
    print(f"    python SCRIPT.py           {plain:.3f} s")
    print(f"    workbench run -o t.json    {ours:.3f} s   "
          f"({len(session.calls)} calls, {session.step_count} steps recorded)")
    return verdict("workbench run / python SCRIPT.py", ours / plain, RUN_TARGET, "x")


def bench_show(reps: int) -> int:
    """`workbench show` of a small dump, whole process, against `python -c pass` (wall time:
    what a user waits for; the start of Python itself is the baseline)."""
    loss, params, xs, ys = make_mlp(depth=2)
    with transforms.record(stages=True) as session:
        transforms.vmap(transforms.grad(loss), in_axes=(None, 0, 0))(params, xs, ys)
    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "small.json")
        session.save(dump)
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "workbench show": [sys.executable, "-m", "workbench", "show", dump],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for rep in range(reps + 1):  # the first round warms the file cache, not timed
            order = list(commands) if rep % 2 == 0 else list(commands)[::-1]
            for name in order:
                start = time.perf_counter()
                subprocess.run(commands[name], check=True, stdout=subprocess.DEVNULL,
                               stdin=subprocess.DEVNULL)
                if rep:
                    times[name].append(time.perf_counter() - start)
        size = os.path.getsize(dump)
    python, show = median(times["python -c pass"]), median(times["workbench show"])
    print(f"  workbench show of a small dump ({session.step_count} steps, "
          f"{sum(len(c.stages) for c in session.calls)} stages, {size / 1e3:.0f} kB), "
          f"whole process, wall, median of {reps}:")
    print(f"    python -c pass             {python:.3f} s")
    print(f"    workbench show small.json  {show:.3f} s   ({show / python:.1f}x Python's start)")
    return verdict("workbench show seconds (wall)", show, SHOW_TARGET, " s")


def replicated_session(steps: int) -> Session:
    """A recorded vmap(grad(loss)) of the MLP, its steps replicated to `steps` in all."""
    loss, params, xs, ys = make_mlp()
    with transforms.record() as session:
        transforms.vmap(transforms.grad(loss), in_axes=(None, 0, 0))(params, xs, ys)
    call = session.calls[0]
    per_call = len(call.steps)
    calls = []
    for i in range(-(-steps // per_call)):
        n = min(per_call, steps - i * per_call)
        calls.append(Call(i, call.transform, call.function, call.source, call.options,
                          call.levels, call.steps[:n], call.errors, call.in_tree, call.out_tree,
                          call.inputs, call.outputs))
    return Session(calls=calls, jax_version=session.jax_version)


def recorded_session(steps: int) -> Session:
    """vmap(grad(loss)) of the MLP called until `steps` steps are recorded (then cut to it)."""
    loss, params, xs, ys = make_mlp()
    per_example_grad = transforms.vmap(transforms.grad(loss), in_axes=(None, 0, 0))
    with transforms.record() as session:
        while session.step_count < steps:
            per_example_grad(params, xs, ys)
    last = session.calls[-1]
    extra = session.step_count - steps
    session.calls[-1] = dataclasses.replace(last, steps=last.steps[:len(last.steps) - extra])
    return session


def bench_io(name: str, session: Session, reps: int) -> int:
    steps = session.step_count
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "big.json")
        saves, loads = [], []
        for _ in range(reps):
            saves.append(timed(lambda: session.save(path)))
            loads.append(timed(lambda: transforms.load(path)))
        size = os.path.getsize(path)
        loaded = transforms.load(path)
    assert loaded.step_count == steps and loaded.calls[-1] == session.calls[-1]
    print(f"  {name}: a {steps:,}-step session ({len(session.calls)} calls, "
          f"{size / 1e6:.1f} MB of JSON), CPU seconds over {reps} runs:")
    print(f"    dump (Session.save)        median {median(saves):.3f} s  "
          f"(range {min(saves):.3f}-{max(saves):.3f})")
    print(f"    load (transforms.load)     median {median(loads):.3f} s  "
          f"(range {min(loads):.3f}-{max(loads):.3f})")
    return (verdict(f"{name} dump seconds", median(saves), IO_TARGET, " s")
            | verdict(f"{name} load seconds", median(loads), IO_TARGET, " s"))


def million_session(base: Session, steps: int) -> Session:
    """`steps` steps from copies of a recorded session's calls, calls numbered on.

    Objects are shared as a recording shares them: what the recorded session's calls share
    (a param tuple, a jaxpr's record, the stages of one signature) is shared by every copy, and what
    each call has of its own (its values' records, its trees) each copy has of its own
    (unpickled once per copy). A loaded dump would not do: it decodes equal parts once and
    shares them across calls, which makes a save's keying by identity cheaper."""
    calls = [dataclasses.replace(call, steps=tuple(call.steps)) for call in base.calls]

    def parts(call: Call) -> Iterator[Any]:
        """A call's fields (its stages, levels, trees...) and its steps' parts."""
        for field in dataclasses.fields(call):
            if field.name != "steps":
                yield getattr(call, field.name)
        for step in call.steps:
            yield from (step.params, step.subjaxprs, step.source, step.inputs, step.outputs)

    seen_in: dict[int, int] = {}
    for number, call in enumerate(calls):
        for part in parts(call):
            if seen_in.setdefault(id(part), number) != number:
                seen_in[id(part)] = -1  # in two calls or more: shared
    shared = {id(part): part for call in calls for part in parts(call)
              if seen_in[id(part)] == -1 and part is not None}

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            return id(obj) if id(obj) in shared else None

    class Unpickler(pickle.Unpickler):
        def persistent_load(self, key):
            return shared[key]

    originals = []
    for call in calls:
        buffer = io.BytesIO()
        Pickler(buffer).dump(call)
        originals.append(buffer.getvalue())
    copies: list[Call] = []
    total = 0
    with gc_paused():
        while total < steps:
            for original in originals:
                if total >= steps:
                    break
                call = Unpickler(io.BytesIO(original)).load()
                keep = call.steps[:steps - total]
                copies.append(dataclasses.replace(call, index=len(copies), steps=keep))
                total += len(keep)
    return Session(calls=copies, jax_version=base.jax_version)


def json_baseline(path: str, reps: int) -> tuple[list[float], list[float]]:
    """The same file through the json module alone (parse it; write the parsed data back),
    CPU seconds, with the GC paused as load and save pause it: what any reader or writer of
    this JSON pays before making or reading a record."""
    with open(path, "rb") as f:
        text = f.read()
    with gc_paused():
        loads = [timed(lambda: json.loads(text)) for _ in range(reps)]
        data = json.loads(text)
        dumps = [timed(lambda: json.dumps(data, separators=(",", ":"))) for _ in range(reps)]
    return loads, dumps


def resave_times(path: str, again: str, reps: int) -> list[float]:
    """CPU seconds of saving the session at `path` once loaded (its equal parts one object)."""
    loaded = transforms.load(path)
    return [timed(lambda: loaded.save(again)) for _ in range(reps)]


def bench_million(session: Session, reps: int) -> int:
    steps = session.step_count
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "million.json")
        saves, loads, lazy_loads = [], [], []
        for _ in range(reps):
            saves.append(timed(lambda: session.save(path)))
            loads.append(timed(lambda: transforms.load(path)))
            lazy_loads.append(timed(lambda: transforms.load(path, lazy=True)))
        size = os.path.getsize(path)
        loaded = transforms.load(path, lazy=True)
        assert loaded.step_count == steps and loaded.calls[-1] == session.calls[-1]
        # Informational: a loaded session saved again (a dump's equal parts are one object)
        resaves = resave_times(path, os.path.join(tmp, "again.json"), reps)
        raw_loads, raw_dumps = json_baseline(path, reps)
        opens = []
        for _ in range(reps):
            done = subprocess.run([sys.executable, "-c", OPEN_PROBE, path], check=True,
                                  capture_output=True, text=True, stdin=subprocess.DEVNULL,
                                  timeout=300)
            opens.append(json.loads(done.stdout.strip().splitlines()[-1]))
    first = median([o["seconds"] for o in opens])
    loading = median([o["loading_seconds"] for o in opens])
    peak = max(o["peak_mb"] for o in opens)
    after = max(o["after_keys_mb"] for o in opens)
    print(f"  a {steps:,}-step session ({len(session.calls):,} calls, {size / 1e6:.1f} MB of "
          f"JSON, schema version {transforms.SCHEMA_VERSION}), CPU seconds over {reps} runs:")
    print(f"    save (Session.save)          median {median(saves):.3f} s  "
          f"(range {min(saves):.3f}-{max(saves):.3f}); baseline json.dumps of its data "
          f"{median(raw_dumps):.3f} s: {median(saves) / median(raw_dumps):.2f}x")
    print(f"    save of the session loaded back (informational) median {median(resaves):.3f} s")
    print(f"    load (transforms.load)       median {median(loads):.3f} s  "
          f"(range {min(loads):.3f}-{max(loads):.3f}), every call decoded; baseline json.loads "
          f"of the file {median(raw_loads):.3f} s: {median(loads) / median(raw_loads):.2f}x")
    print(f"    load(lazy=True)              median {median(lazy_loads):.3f} s  "
          f"(range {min(lazy_loads):.3f}-{max(lazy_loads):.3f}), calls decoded when read")
    print(f"    workbench open, loading frame median {loading:.3f} s wall from process start")
    print(f"    workbench open, the session's first frame  median {first:.3f} s wall from process start "
          f"(range {min(o['seconds'] for o in opens):.3f}-"
          f"{max(o['seconds'] for o in opens):.3f}); peak {peak:.0f} MB = "
          f"{peak * 1e6 / size:.2f}x the file ({after:.0f} MB after unfolding the last call); "
          f"JAX imported: {any(o['jax_imported'] for o in opens)}")
    return (verdict("million-step save seconds", median(saves), BIG_IO_TARGET, " s")
            | verdict("million-step load seconds", median(loads), BIG_IO_TARGET, " s")
            | verdict("million-step open: seconds to the session's first frame", first, OPEN_TARGET, " s")
            | verdict("million-step open: peak memory / file size", peak * 1e6 / size,
                      OPEN_MEMORY_TARGET, "x"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="timed runs of each process")
    parser.add_argument("--steps", type=int, default=100_000, help="steps in the big session")
    parser.add_argument("--io-reps", type=int, default=3, help="timed dumps and loads")
    parser.add_argument("--million", type=int, default=1_000_000,
                        help="steps in the biggest session (0: skip it)")
    args = parser.parse_args()
    header("bench_cli: the workbench command")
    code = bench_run(args.reps)
    code |= bench_show(args.reps)
    print(f"  dumps: schema version {transforms.SCHEMA_VERSION}")
    recorded = recorded_session(args.steps)
    code |= bench_io("recorded", recorded, args.io_reps)
    code |= bench_io("replicated", replicated_session(args.steps), args.io_reps)
    if args.million:
        code |= bench_million(million_session(recorded, args.million), args.io_reps)
    exit_with(code)


if __name__ == "__main__":
    main()
