"""Real multi-process runs: 2 processes on 127.0.0.1, 2 CPU devices each, gloo collectives.

Each test starts its processes in a session of their own and kills that whole
group when it ends, passed or failed, so no process outlives a test. Ports are
chosen free; every run is bounded by a timeout.
"""
from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import DATA as TEST_DATA

from transforms.model import load
from workbench.analysis import _process_merge as processes
from workbench.run import _distributed_launch as launch

DATA = TEST_DATA / "processes"
# Generous for a loaded 2-core machine; a run takes a few seconds when it is quiet.
RUN_TIMEOUT = 120
# A test waits up to RUN_TIMEOUT for its run: more than the default per-test timeout.
pytestmark = pytest.mark.timeout(300)


def run_group(command: list[str], env: dict[str, str] | None = None,
              cwd: str | os.PathLike | None = None) -> subprocess.CompletedProcess:
    """Run `command` in a process group of its own; kill the group whatever happens."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True, env=env, cwd=cwd,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=RUN_TIMEOUT)
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def workbench(*args: str, cwd: str | os.PathLike | None = None) -> subprocess.CompletedProcess:
    return run_group([sys.executable, "-m", "workbench", *args], cwd=cwd)


def run_processes(tmp_path: Path, script: str, *options: str) -> subprocess.CompletedProcess:
    return workbench("run", "--processes", "2", "--devices-per-process", "2",
                     "--timeout", "60", "-o", str(tmp_path / "run.json"), *options,
                     str(DATA / script), cwd=tmp_path)


def assert_not_running(pids: list[int]) -> None:
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def lines_with(text: str, fragment: str) -> list[str]:
    return [line for line in text.splitlines() if fragment in line]


@pytest.mark.slow
def test_a_data_parallel_step_recorded_in_both_processes_gives_jaxs_results(tmp_path):
    # The same script without the workbench: two processes started by hand.
    port = launch.free_port()
    envs = [launch.child_env(i, 2, f"127.0.0.1:{port}", 2) for i in range(2)]
    procs = [subprocess.Popen([sys.executable, str(DATA / "train_step.py"), f"127.0.0.1:{port}",
                               str(i)], env=envs[i], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, start_new_session=True)
             for i in range(2)]
    try:
        plain = sorted(line for p in procs
                       for line in lines_with(p.communicate(timeout=RUN_TIMEOUT)[0], " w "))
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert all(p.returncode == 0 for p in procs)

    done = run_processes(tmp_path, "train_step.py", "--stages")
    assert done.returncode == 0, done.stderr
    # Each process's output, prefixed with its index, identical to the plain run's.
    ours = sorted(re.sub(r"^\[\d\] ", "", line) for line in lines_with(done.stdout, " w "))
    assert ours == plain
    assert lines_with(done.stdout, "[0] process 0 of 2 w ")
    assert lines_with(done.stdout, "[1] process 1 of 2 w ")

    run = load(tmp_path / "run.json")
    assert [p.info.index for p in run.processes] == [0, 1]
    views = processes.process_sessions(run)
    owner = processes.owners(views[0])
    assert sorted(set(owner.values())) == [0, 1] and len(owner) == 4
    for view in views:
        info = view.process
        assert (info.count, info.status, info.exit_code, info.recorded) == (2, "ok", 0, True)
        assert len(info.local_devices) == 2
        assert all(owner[d] == info.index for d in info.local_devices)
        step = next(c for c in view.calls if c.function == "step")
        x = next(r for r in step.shardings if r.name == "x")
        assert {owner[b.device] for b in x.blocks} == {0, 1}  # blocks in both processes
        (hlo,) = [s for s in step.stages if s.role == "hlo"]
        reduces = [c for c in hlo.collectives if c.kind == "all-reduce"]
        assert reduces and processes.crossing(reduces[0], owner) == (0, 1)
    assert processes.run_divergence(run) is None
    assert_not_running([p.info.pid for p in run.processes])

    shown = workbench("show", str(tmp_path / "run.json"))
    assert shown.returncode == 0
    assert "a run of 2 processes" in shown.stdout
    assert re.search(r"process 0/2 on .* devices 0,1 of 4; ok", shown.stdout)
    assert re.search(r"process 1/2 on .* devices \d+,\d+ of 4; ok", shown.stdout)
    compared = workbench("diff", str(tmp_path / "run.json"))
    assert compared.returncode == 0
    assert "the two processes traced the same programs" in compared.stdout
    drawn = workbench("graph", str(tmp_path / "run.json"), "--view", "devices", "--call",
                      str(step.index), "--process", "1", "-o", str(tmp_path / "devices.dot"))
    assert drawn.returncode == 0, drawn.stderr
    dot = (tmp_path / "devices.dot").read_text()
    assert "process 0" in dot and "process 1" in dot and "crosses processes 0,1" in dot


@pytest.mark.slow
def test_a_process_tracing_a_different_program_is_flagged_at_its_first_divergent_step(tmp_path):
    # Process 0 waits in an all-reduce process 1 never joins: the timeout ends the run. It
    # must leave process 1 time to start JAX and finish on a loaded machine (at 6 s, with
    # the tests run two at a time beside other work, process 1 was once stopped too).
    done = workbench("run", "--processes", "2", "--devices-per-process", "2", "--timeout", "20",
                     "-o", str(tmp_path / "run.json"), str(DATA / "divergent.py"), cwd=tmp_path)
    assert done.returncode == launch.STOPPED_EXIT
    assert lines_with(done.stderr, "still running after --timeout 20 s: process 0 (pid ")
    warning = lines_with(done.stderr, "WARNING: processes 0 and 1 traced different programs")
    assert warning and "call 0, step 1" in warning[0]
    assert "_reduce_sum" in warning[0] and "divergent.py:18" in warning[0]

    run = load(tmp_path / "run.json")
    found = processes.run_divergence(run)
    assert (found.process_a, found.process_b, found.call, found.step) == (0, 1, 0, 1)
    assert all(p.info.status == "stopped" for p in run.processes)
    compared = workbench("diff", str(tmp_path / "run.json"))
    assert compared.returncode == 0
    assert "first divergent step: processes 0 and 1 traced different programs" in \
        compared.stdout
    assert_not_running([p.info.pid for p in run.processes])


@pytest.mark.slow
def test_a_killed_process_is_named_and_the_survivors_dump_is_kept(tmp_path):
    done = run_processes(tmp_path, "killed.py")
    assert done.returncode == 128 + signal.SIGKILL, done.stderr
    assert re.search(r"process 1 \(pid \d+\) was killed by SIGKILL \(exit 137\)", done.stderr)
    run = load(tmp_path / "run.json")
    survivor, killed = (p.info for p in run.processes)
    assert (killed.status, killed.exit_code, killed.recorded) == ("killed", 137, False)
    assert survivor.status == "stopped" and survivor.recorded and not survivor.complete
    assert "process 1 was killed by SIGKILL" in survivor.message
    (call,) = run.processes[0].calls  # the first sum; the second never finished
    assert call.function == "sum"
    assert lines_with(done.stdout, "[0] first 12.0") and lines_with(done.stdout, "[1] first 12.0")
    assert_not_running([survivor.pid, killed.pid])


def test_processes_started_by_the_users_own_launcher_write_a_folder_read_as_one_run(tmp_path):
    port = launch.free_port()
    folder = tmp_path / "run"
    procs = []
    for i in range(2):
        env = launch.child_env(i, 2, f"127.0.0.1:{port}", 2)
        for name in (launch.ENV_INDEX, launch.ENV_COUNT, launch.ENV_COORDINATOR):
            env.pop(name)  # nothing of ours: the script passes its own arguments
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "workbench", "dump", "-o", f"{folder}{os.sep}",
             str(DATA / "train_step.py"), f"127.0.0.1:{port}", str(i)], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True))
    try:
        errors = [p.communicate(timeout=RUN_TIMEOUT)[1] for p in procs]
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert [p.returncode for p in procs] == [0, 0], errors
    assert sorted(os.listdir(folder)) == ["process-0.json", "process-1.json"]
    assert "`workbench show" in errors[1] and "process 1 of 2" in errors[1]
    shown = workbench("show", str(folder))
    assert shown.returncode == 0, shown.stderr
    assert "a run of 2 processes" in shown.stdout and "process 1/2" in shown.stdout
    merged = workbench("merge", str(tmp_path / "merged.json"), str(folder))
    assert merged.returncode == 0, merged.stderr
    assert [p.info.index for p in load(tmp_path / "merged.json").processes] == [0, 1]


@pytest.mark.slow
@pytest.mark.parametrize("exit_code", [0, 5])
def test_a_script_that_never_joins_the_job_is_told_how_to(tmp_path, exit_code):
    script = tmp_path / "alone.py"
    script.write_text("import sys, jax, jax.numpy as jnp\nprint(jax.grad(jnp.tanh)(1.0))\n"
                      f"sys.exit({exit_code})\n")
    done = workbench("dump", "--processes", "2", "-o", str(tmp_path / "run.json"), str(script),
                     cwd=tmp_path)
    assert done.returncode == (exit_code or 2)
    assert "Traceback" not in done.stderr and not (tmp_path / "run.json").exists()
    assert done.stderr.splitlines()[-1] == (
        "workbench: alone.py never called jax.distributed.initialize(), so each of its 2 "
        "processes ran alone (as process 0 of 1) and their recordings are not one run's. Call "
        "jax.distributed.initialize() before the script's first JAX computation (with no "
        "arguments: workbench gives each process the coordinator, the count and its index), "
        "or run the script without --processes")
