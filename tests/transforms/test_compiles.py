"""A record() block compiles nothing JAX had compiled, and leaves JAX's caches as it found them.

Compiles are counted by JAX's own monitoring event (one per XLA compilation, with the
computation's name). From cold caches the modules JAX lowers are compared too, as JAX
dumps them (`jax_dump_ir_to`, without source locations): a recorded run lowers the same
modules, in the same order, as a plain one.
"""
from __future__ import annotations

import contextlib
import pathlib
import re
import subprocess
import sys
import textwrap
from collections import Counter
from typing import Any, Callable, Iterator

import jax
import pytest
from corpus import CASES
from repo_paths import ROOT

import transforms

COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"  # JAX's, since before 0.10.2
_compiled: list[str] | None = None


def _on_event(event: str, duration: float, **kwargs: Any) -> None:
    if event == COMPILE_EVENT and _compiled is not None:
        _compiled.append(kwargs.get("fun_name", "?"))


jax.monitoring.register_event_duration_secs_listener(_on_event)


@contextlib.contextmanager
def counting_compiles() -> Iterator[list[str]]:
    """The names of the computations XLA compiles inside the block."""
    global _compiled
    _compiled = seen = []
    try:
        yield seen
    finally:
        _compiled = None


RETURNING = [case for case in CASES if case.raises is None]
CHUNKS = 6  # the corpus in parts: warming all of it is minutes on a loaded machine


def _calls(chunk: int) -> list[tuple[str, Callable[[], Any]]]:
    """A part of the corpus's cases that return, built once with ours: the same objects each run."""
    built = []
    for case in RETURNING[chunk::CHUNKS]:
        fn = case.build(transforms)
        built.append((case.name, lambda fn=fn, case=case: fn(*case.args, **case.kwargs)))
    return built


def _run(calls: list[tuple[str, Callable[[], Any]]]) -> None:
    for _, call in calls:
        jax.block_until_ready(call())


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_a_block_compiles_nothing_that_jax_had_compiled(chunk):
    calls = _calls(chunk)
    _run(calls)  # JAX's caches warm, from plain calls
    with counting_compiles() as plain:
        _run(calls)
    # Warm, JAX compiles only what it compiles on every call (an eager cond, scan or
    # while_loop of bodies made afresh at each call): a block compiles exactly that.
    assert set(plain) <= {"jit(cond)", "jit(scan)", "jit(while)"}, plain
    with counting_compiles() as recorded:
        with transforms.record(stages=False) as session:
            _run(calls)
    assert recorded == plain
    assert len(session.calls) >= len(calls)  # each recorded, from JAX's cached traces
    # Stages may compile for their own views (a stage built at the call's concrete values
    # runs its equations), never what the program compiled.
    for _ in range(2):
        with counting_compiles() as recorded:
            with transforms.record() as session:
                _run(calls)
        assert not Counter(plain) - Counter(recorded), recorded
        assert len(session.calls) >= len(calls)
    with counting_compiles() as after:
        _run(calls)
    assert after == plain  # the blocks left JAX's cache keys as they were


def test_a_jit_traced_before_the_block_is_recorded_in_it_without_compiling():
    def step(w, x):
        return transforms.grad(lambda w: jax.numpy.sum(jax.numpy.tanh(w * x) ** 2))(w)

    jitted = transforms.jit(step)
    w, x = jax.numpy.ones(3), jax.numpy.arange(3.0)
    plain = jitted(w, x)
    with counting_compiles() as compiled:
        with transforms.record() as first:
            inside = jitted(w, x)
            jitted(w, x)  # run again: recorded once per block, as JAX traced it once
        with transforms.record() as second:
            jitted(w, x)
    assert compiled == []
    assert (plain == inside).all()
    for session in (first, second):
        [call] = session.calls
        assert call.transform == "jit"
        assert [level.kind for level in call.levels] == ["jit", "grad"]
        assert call.steps and all(stage.available for stage in call.stages)


def test_a_jit_first_traced_inside_a_block_is_cached_for_plain_calls_after_it():
    def double(x):
        return x * 2.0

    jitted, x = transforms.jit(double), jax.numpy.ones(4)
    with counting_compiles() as inside:
        with transforms.record() as session:
            jitted(x)
    assert inside == ["jit(double)"] and len(session.calls) == 1
    with counting_compiles() as after:
        jitted(x)
        jax.jit(double)(x)  # JAX's own jit of the same function shares it
    assert after == []


# --- from cold caches: the modules JAX lowers -------------------------------------------

_DUMPED = re.compile(r"jax_ir\d+_(?P<name>.*)\.mlir")


def _lowering(tmp: pathlib.Path, recorded: bool) -> tuple[subprocess.Popen, pathlib.Path]:
    """A fresh process lowering the corpus, its modules dumped to a folder of its own.

    Recorded with stages off: stage capture lowers and compiles for its own views (HLO,
    cost, memory), and only that; the program's own modules are what is compared.
    """
    out = tmp / ("recorded" if recorded else "plain")
    script = textwrap.dedent(f"""
        import contextlib, sys
        sys.path.insert(0, {str(ROOT / "tests")!r})
        import jax, transforms
        from corpus import CASES
        block = transforms.record(stages=False) if {recorded!r} else contextlib.nullcontext()
        with block:
            for case in CASES:
                if case.raises is None:
                    jax.block_until_ready(case.build(transforms)(*case.args, **case.kwargs))
    """)
    env = {"JAX_DUMP_IR_TO": str(out), "JAX_INCLUDE_DEBUG_INFO_IN_DUMPS": "false",
           "JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"}
    return subprocess.Popen([sys.executable, "-c", script], env=env, cwd=ROOT), out


def _lowered_modules(run: subprocess.Popen, out: pathlib.Path) -> list[tuple[str, str]]:
    """(file name less its serial, text) of every module the run lowered, once it ended."""
    assert run.wait(timeout=240) == 0
    modules = []
    for path in sorted(out.iterdir()):
        found = _DUMPED.fullmatch(path.name)
        assert found, path.name
        modules.append((found["name"], path.read_text()))
    return modules


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_from_cold_caches_a_block_lowers_jaxs_modules_in_jaxs_order(tmp_path):
    runs = [_lowering(tmp_path, recorded=False), _lowering(tmp_path, recorded=True)]
    try:  # the two run side by side
        plain, recorded = [_lowered_modules(*run) for run in runs]
    finally:
        for run, _ in runs:
            if run.poll() is None:
                run.kill()
    assert len(plain) > 20
    assert [name for name, _ in recorded] == [name for name, _ in plain]
    assert recorded == plain


# --- workbench run of a training script ---------------------------------------------------

_TRAINING = '''
import jax, jax.numpy as jnp
compiled = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, duration, **kw: compiled.append(kw.get("fun_name", "?"))
    if event == "{event}" else None)

def loss(params, x, y):
    w, b = params
    return jnp.mean((jnp.tanh(x @ w + b) - y) ** 2)

@jax.jit
def step(params, x, y):
    value, grads = jax.value_and_grad(loss)(params, x, y)
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads), value

params = (jnp.ones((3, 2)) * 0.1, jnp.zeros(2))
x, y = jnp.arange(12.0).reshape(4, 3) / 12, jnp.ones((4, 2))
for _ in range(5):
    params, value = step(params, x, y)
print("loss", float(value))
print("compiled", sorted(compiled))
'''


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("stages", [[], ["--no-stages"]], ids=["stages", "no_stages"])
def test_workbench_run_of_a_training_script_compiles_what_the_plain_run_compiles(tmp_path, stages):
    """In a fresh process each computation compiles once, recorded or not (the script's own
    count, printed before the recording ends: stage capture's views come after)."""
    script = tmp_path / "train.py"
    script.write_text(_TRAINING.format(event=COMPILE_EVENT))
    env = {"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"}
    plain = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                           text=True, timeout=240, check=True).stdout.splitlines()
    dumped = subprocess.run(
        [sys.executable, "-m", "workbench", "dump", *stages, "-o", str(tmp_path / "t.json"),
         str(script)], env=env, capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert dumped.returncode == 0, dumped.stderr
    recorded = [line for line in dumped.stdout.splitlines() if line.startswith(("loss", "compiled"))]
    assert len(plain) == 2 and "step" in plain[1]
    assert recorded == plain
