"""`workbench dump SCRIPT -o -` (or -o /dev/stdout) streams the dump to stdout, a pipe
included, with the script's own stdout sent to stderr (issue 37, item 3)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from workbench.cli import build_parser

SCRIPT = """\
import os
import jax, jax.numpy as jnp
print("printed by the script")
os.write(1, b"written to descriptor 1\\n")
print(jax.grad(jnp.tanh)(1.0))
"""


def _dump(tmp_path, output: str, reader: str = "") -> subprocess.CompletedProcess:
    """`workbench dump s.py -o OUTPUT`, its stdout a pipe (read whole, or by `reader`); its
    temp folder (where a dump that cannot be written falls back) is tmp_path/tmp."""
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    path = tmp_path / "s.py"
    path.write_text(SCRIPT)
    command = [sys.executable, "-m", "workbench", "dump", str(path), "-o", output]
    if not reader:
        return subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=300,
                              env=env)
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          cwd=tmp_path, text=True, env=env) as dump:
        assert dump.stdout is not None and dump.stderr is not None
        head = subprocess.run([sys.executable, "-c", reader], stdin=dump.stdout,
                              capture_output=True, text=True, timeout=300)
        dump.stdout.close()
        err = dump.stderr.read()
        dump.wait(300)
    return subprocess.CompletedProcess(command, dump.returncode, head.stdout, err)


@pytest.mark.parametrize("output", ["-", "/dev/stdout"])
def test_the_dump_streams_to_stdout_and_the_script_prints_to_stderr(tmp_path, output):
    done = _dump(tmp_path, output)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)  # stdout holds the dump alone
    assert [row[data["fields"]["Call"].index("transform")] for row in data["calls"]] == ["grad"]
    assert "printed by the script\nwritten to descriptor 1\n0.41997" in done.stderr
    steps = len(data["calls"][0][data["fields"]["Call"].index("steps")])  # as JAX bound them
    assert done.stderr.endswith(f"workbench: recorded 1 call, {steps} steps; wrote the dump to "
                                f"stdout\n")
    assert not (tmp_path / "-").exists()


def test_the_dump_streams_into_a_reader_of_the_pipe(tmp_path):
    reader = "import json, sys; d = json.load(sys.stdin); print(len(d['calls']))"
    done = _dump(tmp_path, "-", reader)
    assert (done.returncode, done.stdout) == (0, "1\n"), done.stderr


def test_a_reader_that_leaves_early_gets_the_dump_saved_elsewhere(tmp_path):
    done = _dump(tmp_path, "-", "pass")  # gone before the dump is written
    assert done.returncode == 0
    said = done.stderr.splitlines()[-1]
    assert re.match(r"workbench: recorded 1 call, \d+ steps; could not write - \(Broken pipe\), "
                    r"so the recording was saved to ", said), said
    saved = said.rsplit(" ", 1)[1]
    assert saved.startswith(str(tmp_path / "tmp" / "trace.workbench-")) and saved.endswith(".json")
    with open(saved) as f:
        assert json.load(f)["calls"]


def test_stdout_does_not_go_with_processes(tmp_path, capsys):
    from workbench.cli import main as workbench_main
    path = tmp_path / "s.py"
    path.write_text(SCRIPT)
    assert workbench_main(["dump", str(path), "-o", "-", "--processes", "2"]) == 2
    assert capsys.readouterr().err == (
        "workbench: -o - streams one dump to stdout; --processes writes one a process: "
        "give a folder (-o DIR/) or a file name\n")


def test_help_says_so():
    parser = build_parser()
    for command in ("run", "dump"):
        sub = next(a for a in parser._subparsers._group_actions[0].choices.values()
                   if a.prog.endswith(command))
        text = " ".join(sub.format_help().split())
        assert "`-o -` (or -o /dev/stdout) streams the dump to stdout, a pipe included" in text
        assert "the script's own stdout then goes to stderr" in text
