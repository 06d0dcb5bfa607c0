"""`workbench show`'s table of jit compiles, `diff`'s compile lines and --fail-on-recompile,
`run --max-compiles`: exact text and exit codes, on hand-built dumps and a real run."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from transforms.model import (
    CompileKey,
    CompileRecord,
    KeyLeaf,
    MissReason,
    Session,
    SourceLocation,
)
from workbench.cli import main

HERE = SourceLocation("/work/train.py", 41, "main")
STEP_AT = SourceLocation("/work/train.py", 10, "train_step")


def _trace(number: int, reasons: tuple[MissReason, ...] = (), rows: int = 32) -> CompileRecord:
    key = CompileKey(leaves=(KeyLeaf("batch['x']", "float32", (rows, 784)),), function_id=1)
    return CompileRecord("train_step", HERE, STEP_AT, traced=True, lowered=True,
                         compiled=True, trace_seconds=0.25, lower_seconds=0.25,
                         compile_seconds=1.0, key=key, reasons=reasons, number=number)


SMALLER = MissReason("smaller_batch", "batch['x']", "float32[32,784]", "float32[16,784]")


def _save(tmp_path, name: str, *records: CompileRecord) -> str:
    path = tmp_path / name
    Session(jax_version="0.10.2", python_version="3.11.7", compiles=list(records)).save(path)
    return str(path)


def test_show_prints_the_table_of_compiles_with_reasons_and_fixes(tmp_path, capsys):
    internal = CompileRecord("broadcast_in_dim", HERE, traced=True, compiled=True,
                             trace_seconds=0.01, compile_seconds=0.04)
    path = _save(tmp_path, "a.json", _trace(0), internal, _trace(1, (SMALLER,), rows=16))
    assert main(["show", path]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-6:] == [
        "jit compiles: 3 traces, 3 compiles, 3.05 s; your jitted functions traced again 1 time",
        "  function                call site    traces  compiles  seconds  why again",
        "  train_step              train.py:41       2         2     3.00",
        "      `batch['x']` float32[32,784] -> float32[16,784] (the last, smaller batch)",
        "        fix: drop the last partial batch, or pad it to the batch size (and mask it)",
        "  (jax) broadcast_in_dim  train.py:41       1         1     0.05",
    ]


def test_show_prints_no_table_without_compiles(tmp_path, capsys):
    path = tmp_path / "empty.json"
    Session(jax_version="0.10.2").save(path)
    assert main(["show", str(path)]) == 0
    assert "jit compiles" not in capsys.readouterr().out


def test_diff_fails_on_recompile_only_when_b_retraced_more(tmp_path, capsys):
    once = _save(tmp_path, "once.json", _trace(0))
    twice = _save(tmp_path, "twice.json", _trace(0), _trace(1, (SMALLER,), rows=16))
    assert main(["diff", once, twice]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2:4] == [
        "jit train_step at train.py:41: traces 1 -> 2, compiles 1 -> 2, 1.50 s -> 3.00 s",
        "  new in B: `batch['x']` float32[32,784] -> float32[16,784] (the last, smaller batch)",
    ]
    assert main(["diff", once, twice, "--fail-on-recompile"]) == 1
    assert capsys.readouterr().err == (
        "workbench: traced again more often in B: train_step at train.py:41 0 -> 1\n")
    assert main(["diff", twice, once, "--fail-on-recompile"]) == 0
    assert main(["diff", twice, twice, "--fail-on-recompile"]) == 0
    capsys.readouterr()
    assert main(["diff", once, twice, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["compiles"] == [{
        "function": "train_step", "place": "train.py:41", "internal": False,
        "traces": [1, 2], "compiles": [1, 2], "retraces": [0, 1], "seconds": [1.5, 3.0],
        "new_reasons": ["`batch['x']` float32[32,784] -> float32[16,784] (the last, smaller "
                        "batch)"]}]


SCRIPT = textwrap.dedent("""\
    import jax
    import jax.numpy as jnp

    @jax.jit
    def step(x, lr):
        return x * lr

    for rows in (4, 4, 2):
        step(jnp.ones(rows), 0.5)
    """)


def test_run_max_compiles_exits_4_with_the_reasons(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    command = [sys.executable, "-m", "workbench", "run", "-q", "-o", str(tmp_path / "t.json")]
    over = subprocess.run([*command, "--max-compiles", "1", str(script)],
                          capture_output=True, text=True, timeout=300)
    assert over.returncode == 4, over.stderr
    assert over.stderr == (
        "workbench: --max-compiles 1: your jitted functions compiled 2 times\n"
        "  step at train.py:9: 2 compiles\n"
        "    `x` float32[4] -> float32[2] (the last, smaller batch)\n")
    within = subprocess.run([*command, str(script), "--max-compiles", "2"],
                            capture_output=True, text=True, timeout=300)
    assert within.returncode == 0, within.stderr
    bad = subprocess.run([*command, "--max-compiles", "-1", str(script)],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2


def test_max_compiles_takes_one_recording_not_watch_or_processes(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    out = str(tmp_path / "t.json")
    assert main(["run", "-o", out, "--max-compiles", "1", "--processes", "2", str(script)]) == 2
    assert capsys.readouterr().err == ("workbench: --max-compiles checks one recording of the "
                                       "script; it does not take --watch or --processes\n")
