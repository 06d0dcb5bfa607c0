"""The `workbench show` command on a hand-built session: exact output, exit codes."""
import json
import subprocess
import sys

import pytest

from transforms.model import Call, ErrorRecord, Level, Session, SourceLocation, Step, ValueRecord
from workbench.cli import main

SCALAR = ValueRecord("array", "ArrayImpl", "float32[]", value="1.")
BATCHED = ValueRecord("batched", "BatchTracer", "float32[]", level=1, batch_dim=0,
                      children=(("val", ValueRecord("array", "ArrayImpl", "float32[3]")),))


def _session() -> Session:
    levels = (Level(0, "eval", "eval#0", 0, None, "EvalTrace"),
              Level(1, "vmap", "vmap#1", 1, 0, "BatchTrace", "absolute"))
    steps = (Step(0, 1, "gt", inputs=(BATCHED, SCALAR), outputs=(BATCHED,)),
             Step(1, 0, "gt", inputs=(SCALAR, SCALAR), outputs=(SCALAR,), cause=0),
             Step(2, 1, "TracerBoolConversionError", kind="error", cause=0))
    error = ErrorRecord("jax.errors.TracerBoolConversionError",
                        "Attempted boolean conversion of traced array with shape bool[].\nmore",
                        level=1, step=0, source=SourceLocation("demo.py", 4, "absolute"))
    call = Call(0, "vmap", "absolute", SourceLocation("demo.py", 8, "<module>"),
                levels=levels, steps=steps, errors=(error,))
    return Session(calls=[call], jax_version="0.10.2", python_version="3.11.7")


def test_show_prints_levels_steps_and_errors(tmp_path, capsys):
    path = tmp_path / "trace.json"
    _session().save(path)
    assert main(["show", str(path), "--steps"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{path}: 1 call, 3 steps (jax 0.10.2, python 3.11.7)",
        "call 0: vmap(absolute) at demo.py:8 (<module>)  [FAILED]",
        "  eval#0  EvalTrace  1 step",
        "    #1 gt (1., 1.) -> (1.)",
        "    vmap#1  BatchTrace  2 steps",
        "      #0 gt (VmapTracer(aval=float32[], batched=float32[3], batch_dim=0), 1.)"
        " -> (VmapTracer(aval=float32[], batched=float32[3], batch_dim=0))",
        "      #2 TracerBoolConversionError () -> ()",
        "  error at step 0: jax.errors.TracerBoolConversionError: Attempted boolean conversion"
        " of traced array with shape bool[].",
        "  stages: none (recorded with stages off: record(stages=False) or workbench run "
        "--no-stages)",
    ]


@pytest.mark.parametrize("content, fragment", [
    (None, "no such file"),
    ("", "the file is empty"),
    ('{"schema": "jax-transform-workbench/session", "schema_version": 1, "calls": [', "truncated"),
    ("not json at all", "not a workbench session dump: it is not JSON"),
    ('{"a": 1 2}', "corrupt JSON at line 1, column 9"),
    ('{"hello": 1}', "not a workbench session"),
    (json.dumps({"schema": "jax-transform-workbench/session", "schema_version": 99, "calls": []}),
     "written with schema version 99"),
])
def test_show_bad_files_exit_2_with_a_message(tmp_path, capsys, content, fragment):
    path = tmp_path / "trace.json"
    if content is not None:
        path.write_text(content)
    assert main(["show", str(path)]) == 2
    captured = capsys.readouterr()
    assert fragment in captured.err
    assert "Traceback" not in captured.err


def test_show_missing_call_exits_2(tmp_path, capsys):
    path = tmp_path / "trace.json"
    _session().save(path)
    assert main(["show", str(path), "--call", "3"]) == 2
    assert "has no call 3 (it has 1: 0..0)" in capsys.readouterr().err


def test_console_script_help_runs_as_a_process():
    out = subprocess.run([sys.executable, "-m", "workbench", "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert "usage: workbench" in out and "Exit codes: 0 ok" in out


def test_show_says_a_call_failed_before_tracing_not_that_stages_were_off(tmp_path, capsys):
    """Issue 36, item 6: a jit whose argument could not be flattened has no levels."""
    error = ErrorRecord("NameError", "name 'value' is not defined", None, None)
    session = Session(calls=[Call(0, "jit", "test_func", None, errors=(error,))])
    path = tmp_path / "trace.json"
    session.save(path)
    assert main(["show", str(path)]) == 0
    assert "  stages: none (the call failed before JAX traced it)" in \
        capsys.readouterr().out.splitlines()


def test_run_says_the_script_is_missing_before_asking_for_a_terminal(tmp_path, capsys):
    """Issue 36, item 17: without a terminal, a missing script is the error to fix first."""
    missing = str(tmp_path / "nosuch.py")
    assert main(["run", missing]) == 2
    assert capsys.readouterr().err == f"workbench: {missing}: no such file\n"
