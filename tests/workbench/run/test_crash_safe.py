"""The recording survives the script's hard death (issue 37, items 1 and 5): kill -9, a
segfault, os.abort and os._exit under `workbench dump`, and os._exit at points of a recorded
run (mid-write of a frame included); a journal's bad last frame is dropped with a note."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from _children import dump_script

import transforms as T
from transforms.model import Journal, journal_of, load, read_journal
from workbench.cli import main as workbench_main

pytestmark = pytest.mark.timeout(300)

DIES = """\
import ctypes, os, signal, sys
import jax, jax.numpy as jnp
for i in range(3):
    jax.grad(lambda x: jnp.sum(jnp.tanh(x) ** 2))(jnp.ones(3) * i)
print("three calls done", flush=True)
how = sys.argv[1]
if how == "segv": ctypes.string_at(0)
if how == "exit": os._exit(4)
if how == "kill": os.kill(os.getpid(), signal.SIGKILL)
if how == "abort": os.abort()
"""

ENDINGS = {"kill": (137, "the process died by SIGKILL"),
           "segv": (139, "the process died by SIGSEGV"),
           "abort": (134, "the process died by SIGABRT"),
           "exit": (4, "the process exited with code 4 without saving its recording (os._exit?)")}


@pytest.mark.parametrize("how", list(ENDINGS))
def test_a_hard_death_under_dump_keeps_every_finished_call_and_says_how(tmp_path, how):
    done, out, script = dump_script(tmp_path, "dies.py", DIES, how)
    code, said = ENDINGS[how]
    assert done.returncode == code, done.stderr
    assert not os.path.exists(journal_of(str(out)))
    session = load(out)
    steps = session.step_count  # JAX's releases bind different primitives: as recorded
    assert f"workbench: {said}, after call 2 finished; recovered 3 calls, {steps} steps from " \
           f"its journal\n" in done.stderr
    assert done.stderr.endswith(f"workbench: recorded 3 calls, {steps} steps (recovered); "
                                f"wrote {out}\n")
    assert [c.index for c in session.calls] == [0, 1, 2] and all(c.ok for c in session.calls)
    assert session.metadata["ended"] == f"{said}, after call 2 finished"
    assert session.title == f"dies.py {how} (recovered: {said}, after call 2 finished)"
    assert session.jax_version == jax.__version__  # from the package's metadata, not imported


RECORDED = """\
import os, sys
import jax.numpy as jnp
import transforms as T
from transforms.model import Journal
die_after, mid_write = int(sys.argv[2]), sys.argv[3] == "mid"
journal = Journal.open(sys.argv[1], {"title": "points"})
real_write = os.write
def write(fd, data):
    if fd == journal.fd and data[8:9] == b"C" and calls[0] == die_after:
        if mid_write:
            real_write(fd, bytes(data)[: len(data) // 2])
        os._exit(7)
    return real_write(fd, data)
os.write = write
calls = [0]
with T.record(journal=journal):
    for i in range(5):
        T.grad(lambda x: jnp.sum(jnp.sin(x) * x))(jnp.ones(2) * i)
        calls[0] += 1
"""


@pytest.mark.parametrize("die_after", [0, 2, 4])
@pytest.mark.parametrize("mid", ["before", "mid"])
def test_os_exit_at_points_of_a_run_keeps_every_call_finished_before(tmp_path, die_after, mid):
    """The process ends as call `die_after`'s frame is written: before it, or half of it."""
    script = tmp_path / "recorded.py"
    script.write_text(RECORDED)
    path = str(tmp_path / "t.json")
    done = subprocess.run([sys.executable, str(script), journal_of(path), str(die_after), mid],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 7, done.stderr
    session = load(path)  # no dump: the journal beside it
    # every call finished before, then the one in progress, failed with how the run ended
    assert [(c.index, c.ok) for c in session.calls] == [(i, True) for i in range(die_after)] + \
        [(die_after, False)]
    assert session.calls[-1].errors[0].message == session.metadata["ended"]
    dropped = session.metadata.get("journal_notes", "")
    if mid == "mid":
        assert "is cut short: it and the " in dropped
    else:
        assert dropped == ""
    pid = session.metadata["pid"]  # the writer's, dead: nobody saw how it ended
    said = (f"the process (pid {pid}) ended without a word: no dump saved, and nobody saw how "
            f"it ended, during call {die_after} (grad(<lambda>) at {script}:18 (<module>))")
    ended = session.metadata["ended"]
    # The progress thread writes the call's latest step when it looked while the call ran.
    assert ended == said or ended.startswith(f"{said}, after `")


def _journal_of_three(tmp_path) -> str:
    path = str(tmp_path / "t.json.journal")
    journal = Journal.open(path, {"title": "three"})
    with T.record(journal=journal):
        for i in range(3):
            T.grad(jnp.tanh)(float(i))
    journal.close()
    return path


def test_a_corrupted_final_frame_is_dropped_with_a_note(tmp_path):
    path = _journal_of_three(tmp_path)
    data = bytearray(Path(path).read_bytes())
    data[-3] ^= 0xFF
    Path(path).write_bytes(data)
    recovered = read_journal(path)
    assert [c.index for c in recovered.session.calls] == [0, 1]
    (note,) = recovered.notes
    assert note.startswith("the journal's frame at byte ") and " fails its checksum: " in note
    assert recovered.in_progress.startswith("2 (grad(tanh) at ")


@pytest.mark.parametrize("cut", [1, 5, 9, 40])
def test_a_truncated_final_frame_is_dropped_with_a_note(tmp_path, cut):
    path = _journal_of_three(tmp_path)
    Path(path).write_bytes(Path(path).read_bytes()[:-cut])
    recovered = read_journal(path)
    assert [c.index for c in recovered.session.calls] == [0, 1]
    assert " is cut short" in recovered.notes[0]


def test_show_reads_the_journal_of_a_dump_never_written(tmp_path, capsys):
    path = _journal_of_three(tmp_path)
    Journal.append_end(path, "the process died by SIGKILL")
    dump = path[:-len(".journal")]
    assert workbench_main(["show", dump]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{dump}: 3 calls, ")
    assert "ended: the process died by SIGKILL, after call 2 finished\n" in out


def test_a_normal_end_leaves_the_dump_and_no_journal(tmp_path, capsys):
    script = tmp_path / "ok.py"
    script.write_text("import jax, jax.numpy as jnp\njax.grad(jnp.tanh)(1.0)\n")
    out = tmp_path / "t.json"
    assert workbench_main(["dump", "-o", str(out), str(script)]) == 0
    assert out.exists() and not os.path.exists(journal_of(str(out)))
    assert "ended" not in load(out).metadata


def test_signals_that_stop_the_script_still_save_normally(tmp_path):
    script = tmp_path / "term.py"
    script.write_text("import os, signal, jax, jax.numpy as jnp\njax.grad(jnp.tanh)(1.0)\n"
                      "os.kill(os.getpid(), signal.SIGTERM)\n")
    out = tmp_path / "t.json"
    done = subprocess.run([sys.executable, "-m", "workbench", "dump", "-o", str(out),
                           str(script)], capture_output=True, text=True, timeout=240)
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert "recovered" not in done.stderr and len(load(out).calls) == 1


def test_a_journal_whose_writer_runs_still_says_so(tmp_path):
    path = _journal_of_three(tmp_path)  # written by this process, alive
    session = read_journal(path).as_session()
    assert session.metadata["ended"] == f"still running (pid {os.getpid()}), after call 2 finished"
    assert session.title == f"three (so far: still running (pid {os.getpid()}), after call 2 " \
                            f"finished)"


def test_a_top_level_jits_stages_read_at_the_blocks_end_reach_the_journal(tmp_path):
    path = str(tmp_path / "t.json.journal")
    journal = Journal.open(path, {"title": "jit"})
    def scaled(x):
        return jnp.sin(x) * 2

    with T.record(journal=journal) as session:
        T.jit(scaled)(jnp.ones(3))
        T.grad(jnp.tanh)(1.0)
    journal.close()
    names = [s.name for s in session.calls[0].stages]
    assert "hlo(jit(f))" in names  # read from JAX's caches when the block ended
    recovered = read_journal(path).session
    assert [c.index for c in recovered.calls] == [0, 1]
    assert [s.name for s in recovered.calls[0].stages] == names
    assert [s.text for s in recovered.calls[0].stages] == [s.text for s in session.calls[0].stages]
