"""A fault of the recorder is kept on the call, not dropped (ARCHITECTURE: nothing lost
silently): the sharding reader made to raise, the call records an `internal` Diagnostic,
`workbench show` prints it and the TUI's failure and pytree views show it. 8 CPU devices
(tests/conftest.py).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from rich.console import Console

import transforms
from transforms._devices import _sharding
from transforms.model import LOST, Diagnostic, load
from workbench.cli import main
from workbench.render.diagnostics import DiagnosticsView
from workbench.tui.navigation import CallIndex
from workbench.tui.widgets.failure.failure_pane import failure_view

LOST_INPUTS = "the workbench failed reading the inputs' shardings: RuntimeError: no layouts today"
LOST_OUTPUTS = ("the workbench failed reading the outputs' shardings: RuntimeError: "
                "no layouts today")


def text(renderable, width=100) -> str:
    console = Console(color_system=None, width=width, record=True)
    console.print(renderable)
    return console.export_text()


def _raise(*args, **kwargs):
    raise RuntimeError("no layouts today\nsecond line")


def loss(w, x):
    return jnp.sum(jnp.tanh(x @ w))


@pytest.fixture(scope="module")
def sharded() -> tuple:
    devices = jax.devices()
    assert len(devices) >= 8, "tests/conftest.py must give JAX 8 CPU devices"
    mesh = Mesh(np.array(devices[:8]).reshape(4, 2), ("data", "model"))
    w = jax.device_put(jnp.ones((4, 2)), NamedSharding(mesh, P()))
    x = jax.device_put(jnp.ones((8, 4)), NamedSharding(mesh, P("data")))
    return w, x


def test_a_failing_sharding_reader_is_recorded_not_dropped(sharded, monkeypatch, tmp_path,
                                                           capsys):
    monkeypatch.setattr(_sharding, "call_input_shardings", _raise)
    monkeypatch.setattr(_sharding, "call_output_shardings", _raise)
    with transforms.record() as session:
        ours = transforms.grad(loss)(*sharded)
    np.testing.assert_array_equal(ours, jax.grad(loss)(*sharded))  # the user's call is JAX's
    call = session.calls[0]
    assert call.shardings == ()
    assert call.diagnostics == (Diagnostic(LOST, LOST_INPUTS, ""),
                                Diagnostic(LOST, LOST_OUTPUTS, ""))

    path = tmp_path / "lost.json"
    session.save(path)
    assert load(path).calls[0].diagnostics == call.diagnostics  # the dump keeps them
    capsys.readouterr()
    assert main(["show", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if line.startswith("  diagnostic")] == [
        f"  diagnostic internal: {LOST_INPUTS}",
        f"  diagnostic internal: {LOST_OUTPUTS}",
    ]

    shown = text(failure_view(call, CallIndex(call), "grad(loss)"))
    assert [line.rstrip() for line in shown.splitlines()] == [
        "grad(loss) ran without error.",
        "No call of this session failed: nothing to show here.",
        "",
        "The recorder could not record all of this call:",
        "kind       where   finding",
        "─" * 100,
        "internal           the workbench failed reading the inputs' shardings: RuntimeError: no layouts",
        "                   today",
        "internal           the workbench failed reading the outputs' shardings: RuntimeError: no layouts",
        "                   today",
    ]
    assert "reading the inputs' shardings" in text(DiagnosticsView(call.diagnostics))


def test_a_failing_executable_reader_is_recorded_on_the_jit_call(sharded, monkeypatch):
    monkeypatch.setattr(_sharding, "named_for_call", _raise)
    w, x = sharded
    with transforms.record(stages=True) as session:
        transforms.jit(loss)(w, x)
    (call,) = session.calls
    assert call.shardings == ()
    assert call.diagnostics == (Diagnostic(
        LOST, "the workbench failed reading the executable's shardings: RuntimeError: "
        "no layouts today", ""),)


def test_nothing_lost_means_no_diagnostic(sharded):
    with transforms.record(stages=True) as session:
        transforms.grad(loss)(*sharded)
        transforms.jit(loss)(*sharded)
    assert [c.diagnostics for c in session.calls] == [(), ()]
    assert all(c.shardings for c in session.calls)


def test_collectives_that_cannot_be_read_are_noted_on_the_stage(sharded, monkeypatch,
                                                                tmp_path, capsys):
    monkeypatch.setattr(_sharding, "collectives_in_hlo", _raise)
    with transforms.record(stages=True) as session:
        transforms.jit(loss)(*sharded)
    (stage,) = [s for s in session.calls[0].stages if s.role == "hlo"]
    assert stage.available and stage.collectives == () and stage.shardings
    note = "its collectives were not read (RuntimeError: no layouts today)"
    assert stage.note == note
    path = tmp_path / "lost.json"
    session.save(path)
    capsys.readouterr()
    assert main(["show", str(path)]) == 0
    assert f"    note: {note}" in capsys.readouterr().out.splitlines()
