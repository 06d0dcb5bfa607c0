"""Multi-process runs as data: merging, one session per process, devices per process,
collectives crossing processes, divergence, and how the views show them.

The runs here are made in this process (8 CPU devices, tests/conftest.py): one
recording tagged as two processes owning devices 0,1 and 2,3 of a 4-device mesh.
tests/test_processes_launch.py starts real jax.distributed processes.
"""
from __future__ import annotations

import dataclasses
import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from rich.console import Console
from tui_sessions import status_text as _status, sync, widget_text as _text

import transforms
from transforms.model import DeviceRecord, ProcessInfo, Session, SessionLoadError, load
from workbench.analysis import _process_merge as processes
from workbench.analysis._session_diff import diff_sessions, format_diff
from workbench.cli import main
from workbench.export.devices import collect_devices
from workbench.render.devices import DevicesView, crossing_text
from workbench.run import _distributed_launch as launch
from workbench.tui import build_app
from workbench.tui.screens.process_sessions import ProcessScreen
from workbench.tui.widgets.devices.devices_pane import DevicesPane


def loss(w, x):
    return jnp.mean((x @ w) ** 2)


@functools.cache
def recorded() -> Session:
    mesh = Mesh(np.array(jax.devices()[:4]), ("data",))
    batch, whole = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())
    step = transforms.jit(lambda w, x: w - 0.1 * transforms.grad(loss)(w, x),
                          in_shardings=(whole, batch), out_shardings=whole)
    with transforms.record(stages=True) as session:
        step(jnp.ones(3), jnp.arange(24.0).reshape(8, 3))
    session.title = "train.py"
    return session


def tagged(session: Session, index: int, **changes) -> Session:
    devices = tuple(DeviceRecord(d, d // 2, "cpu", "cpu") for d in range(4))
    info = ProcessInfo(index, 2, (2 * index, 2 * index + 1), devices, host="host",
                       pid=100 + index, status="ok", exit_code=0, **changes)
    return Session(calls=list(session.calls), jax_version=session.jax_version,
                   title=session.title, metadata={"script": "train.py"}, process=info)


def run(*sessions: Session) -> Session:
    return processes.merge(list(sessions) or [tagged(recorded(), 0), tagged(recorded(), 1)])


def test_a_merged_run_saves_loads_and_gives_each_process_as_a_session(tmp_path):
    merged = run()
    merged.save(tmp_path / "run.json")
    back = load(tmp_path / "run.json")
    assert back.calls == [] and [p.info.index for p in back.processes] == [0, 1]
    views = processes.process_sessions(back)
    assert [v.process.index for v in views] == [0, 1]
    assert views[1].calls == recorded().calls and views[1].title == "train.py"
    assert views[1].metadata == {"script": "train.py"}
    assert back.step_count == 2 * recorded().step_count
    assert processes.owners(views[0]) == {0: 0, 1: 0, 2: 1, 3: 1}
    with pytest.raises(ValueError, match="no process 5"):
        processes.process_session(back, 5)


def test_old_dumps_load_with_no_process_facts(tmp_path):
    recorded().save(tmp_path / "one.json")
    data = json.loads((tmp_path / "one.json").read_text())
    for key in ("process", "processes"):
        data.pop(key)
    (tmp_path / "one.json").write_text(json.dumps(data))
    back = load(tmp_path / "one.json")
    assert back.process is None and back.processes == ()
    assert processes.process_sessions(back) == [back]


def test_merging_refuses_untagged_and_duplicate_processes(tmp_path):
    with pytest.raises(ValueError, match="not tagged with a process index"):
        processes.merge([recorded()])
    with pytest.raises(ValueError, match="same process"):
        processes.merge([tagged(recorded(), 0), tagged(recorded(), 0)])
    (tmp_path / "run").mkdir()
    recorded().save(tmp_path / "run" / "a.json")
    with pytest.raises(SessionLoadError, match="not the dump of a process"):
        processes.load_run(tmp_path / "run")


def test_a_folder_of_process_dumps_reads_as_one_run(tmp_path):
    for i in (1, 0):
        tagged(recorded(), i).save(tmp_path / f"process-{i}.json")
    merged = processes.load_run(tmp_path)
    assert [p.info.index for p in merged.processes] == [0, 1]


def hlo(session: Session):
    (stage,) = [s for s in session.calls[0].stages if s.role == "hlo"]
    return stage


def test_the_gradient_all_reduce_is_named_as_crossing_processes():
    view = processes.process_sessions(run())[0]
    owner = processes.owners(view)
    reduces = [c for c in hlo(view).collectives if c.kind == "all-reduce"]
    assert reduces and all(c.ids == "device" for c in reduces)
    assert processes.crossing(reduces[0], owner) == (0, 1)
    assert crossing_text(reduces[0], owner) == "crosses processes 0,1"
    # The same groups on devices each process holds alone stay inside it.
    alone = {0: 0, 1: 1, 2: 2, 3: 3, **{d: 0 for d in range(4)}}
    assert processes.crossing(reduces[0], alone) == ()
    assert crossing_text(reduces[0], alone) == ""


def render(renderable, width: int = 100) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_the_devices_view_shows_processes_as_groups_of_devices():
    view = processes.process_sessions(run())[1]
    text = render(DevicesView(view.calls[0], view.process))
    lines = [line.rstrip() for line in text.splitlines()]
    assert lines[0] == "processes  2 in the run, 4 global devices; this is process 1"
    assert any(line.split() == ["p0", "0,1"] for line in lines)
    assert any(line.split() == ["p1", "2,3", "◀", "this", "recording"] for line in lines)
    assert "x  float32[8,3]  P('data',)  on data=4  across processes 0,1  block [2,3]" in text
    assert "│ data=2 │ p1 dev 2  [4:6, :] │" in text
    assert "whole array on every device (p0: 0,1; p1: 2,3)" in text
    assert "processes crosses processes 0,1" in " ".join(text.split())
    # One process alone: the view is as before, with no process facts.
    single = render(DevicesView(recorded().calls[0]))
    assert "processes" not in single and "│ data=2 │ dev 2  [4:6, :] │" in single


def test_the_devices_graph_boxes_each_processs_devices():
    view = processes.process_sessions(run())[0]
    graph = collect_devices(view.calls[0], owner=processes.owners(view))
    boxes = {c.id: c for c in graph.clusters if c.label.startswith("process ")}
    assert {c.label for c in boxes.values()} == {"process 0", "process 1"}
    for node in graph.nodes:
        if node.label.startswith("dev "):
            device = int(node.label.split()[1])
            assert boxes[node.cluster].label == f"process {device // 2}"
    assert any("crosses processes 0,1" in n.label for n in graph.nodes)


def changed_program() -> Session:
    """Process 1's call with one step's primitive replaced: a different program."""
    call = recorded().calls[0]
    steps = list(call.steps)
    steps[3] = steps[3]._replace(primitive="psum")
    session = tagged(recorded(), 1)
    session.calls = [dataclasses.replace(call, steps=tuple(steps))]
    return session


def test_divergence_names_the_first_different_step_by_process():
    same = processes.process_sessions(run())
    assert processes.first_divergence(same) is None
    found = processes.run_divergence(run(tagged(recorded(), 0), changed_program()))
    assert (found.process_a, found.process_b, found.call, found.step) == (0, 1, 0, 3)
    assert "psum" in found.what_b and recorded().calls[0].steps[3].primitive in found.what_a
    assert found.describe().startswith("processes 0 and 1 traced different programs; first "
                                       "divergent step at call 0, step 3: process 0 has call 0")


def test_a_missing_call_diverges_unless_the_process_was_stopped_inside_its_script():
    short = tagged(recorded(), 1)
    short.calls = []
    found = processes.run_divergence(run(tagged(recorded(), 0), short))
    assert found is not None and found.step is None and "no such call" in found.what_b
    stopped = tagged(recorded(), 1, complete=False)
    stopped.calls = []
    assert processes.run_divergence(run(tagged(recorded(), 0), stopped)) is None
    no_dump = tagged(recorded(), 1, recorded=False)
    no_dump.calls = []
    assert processes.run_divergence(run(tagged(recorded(), 0), no_dump)) is None


def test_diff_of_two_processes_says_where_their_programs_differ(tmp_path, capsys):
    a, b = processes.process_sessions(run(tagged(recorded(), 0), changed_program()))
    d = diff_sessions(a, b)
    assert d.divergence is not None and d.divergence.step == 3
    assert format_diff(d, "A", "B")[-1].startswith("first divergent step: processes 0 and 1")
    assert d.to_json_dict()["divergence"]["step"] == 3
    run(tagged(recorded(), 0), changed_program()).save(tmp_path / "run.json")
    assert main(["diff", str(tmp_path / "run.json")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"A: {tmp_path / 'run.json'} process 0 (")
    assert "first divergent step: processes 0 and 1 traced different programs" in out
    assert main(["diff", str(tmp_path / "run.json"), "--processes", "0,7"]) == 2
    assert "has no process 7" in capsys.readouterr().err


def test_show_lists_the_processes_and_their_devices(tmp_path, capsys):
    run(tagged(recorded(), 0), changed_program()).save(tmp_path / "run.json")
    assert main(["show", str(tmp_path / "run.json")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{tmp_path / 'run.json'}: a run of 2 processes, ")
    assert out[1:3] == ["title: train.py", "devices: 4 global (process 0: 0,1, process 1: 2,3)"]
    assert out[3].startswith("WARNING: processes 0 and 1 traced different programs")
    assert "process 0/2 on host (pid 100): devices 0,1 of 4; ok" in out
    assert main(["show", str(tmp_path / "run.json"), "--process", "1"]) == 0
    only = capsys.readouterr().out
    assert "process 1/2 on host" in only and "process 0/2 on host" not in only
    assert main(["show", str(tmp_path / "run.json"), "--process", "3"]) == 2


def test_each_process_of_the_users_own_launcher_writes_its_own_file(tmp_path, monkeypatch):
    monkeypatch.delenv(launch.ENV_INDEX, raising=False)
    session = tagged(recorded(), 1)
    assert launch.dump_path(str(tmp_path / "t.json"), recorded()) == (str(tmp_path / "t.json"), "")
    path, note = launch.dump_path(str(tmp_path / "t.json"), session)
    assert path == str(tmp_path / "t.process-1.json") and "workbench merge" in note
    assert launch.dump_path(str(tmp_path / "t{process}.json"), session)[0] == \
        str(tmp_path / "t1.json")
    folder = str(tmp_path / "run") + "/"
    path, note = launch.dump_path(folder, session)
    assert path == str(tmp_path / "run" / "process-1.json") and "workbench show" in note


def test_the_launchers_environment_gives_each_process_its_index_and_devices():
    env = launch.child_env(1, 2, "127.0.0.1:1234", 2,
                           {"XLA_FLAGS": "--xla_force_host_platform_device_count=8 --other"})
    assert env[launch.ENV_INDEX] == "1" and env[launch.ENV_COUNT] == "2"
    assert env["JAX_COORDINATOR_ADDRESS"] == "127.0.0.1:1234"
    assert env["JAX_CPU_COLLECTIVES_IMPLEMENTATION"] == "gloo"
    assert env["XLA_FLAGS"] == "--other --xla_force_host_platform_device_count=2"
    assert launch.shell_code(-9) == 137 and launch.ending(-9) == "was killed by SIGKILL (exit 137)"


@pytest.mark.parametrize("argv, message", [
    (["--processes", "0"], "--processes takes 1 to 64"),
    (["--timeout", "5"], "--timeout and --devices-per-process go with --processes N"),
    (["--processes", "2", "--timeout", "-1"], "--timeout takes a positive number"),
])
def test_bad_process_options_are_bad_usage(tmp_path, capsys, argv, message):
    script = tmp_path / "s.py"
    script.write_text("print('hi')\n")
    assert main(["dump", "-o", str(tmp_path / "t.json"), *argv, str(script)]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "t.json").exists()


# --- the TUI: a run's processes, switched with p -----------------------------------------

@sync
async def test_the_tui_switches_process_on_the_same_call_and_view():
    app = build_app(run(), title="run.json")
    async with app.run_test(size=(110, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, ProcessScreen) and screen.session.process.index == 0
        assert "[process 0/2]" in screen.title
        await pilot.press("5")
        await pilot.pause()
        body = _text(screen.query_one(DevicesPane).query_one("#devices-body"))
        assert "processes  2 in the run, 4 global devices; this is process 0" in body
        assert "crosses processes 0,1" in body
        await pilot.press("j", "j", "p")
        await pilot.pause()
        other = app.screen
        assert other is not screen and other.session.process.index == 1
        assert other.active_view == "devices" and "[process 1/2]" in other.title
        assert other.steps.current() == screen.steps.current()
        assert "process 1/2: devices 2,3; ok" in _status(app)
        await pilot.press("p")
        await pilot.pause()
        assert app.screen.session.process.index == 0


@sync
async def test_the_tui_opens_a_divergent_run_on_the_first_divergent_step():
    app = build_app(run(tagged(recorded(), 0), changed_program()), title="run.json", process=1)
    async with app.run_test(size=(110, 40)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert screen.session.process.index == 1
        assert screen.steps.current() == (0, 3)
        assert "WARNING: processes 0 and 1 traced different programs" in _status(app)


def test_a_folder_output_takes_one_dump_per_process(tmp_path, monkeypatch):
    monkeypatch.delenv(launch.ENV_INDEX, raising=False)
    (tmp_path / "run").mkdir()
    path, note = launch.dump_path(str(tmp_path / "run"), recorded())
    assert path == str(tmp_path / "run" / "process-0.json") and "one process" in note
    script = tmp_path / "s.py"
    script.write_text("print('hi')\n")
    assert main(["dump", "-q", "-o", str(tmp_path / "run"), str(script)]) == 0
    assert load(tmp_path / "run" / "process-0.json").process is None
