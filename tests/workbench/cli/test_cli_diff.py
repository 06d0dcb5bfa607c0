"""`workbench diff`, `workbench schema`, `workbench open` on hand-built and bad dumps."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from transforms.model import (
    Call,
    JaxprRecord,
    Level,
    PrimitiveCount,
    Session,
    Stage,
    Step,
    ValueRecord,
    _schema as schema,
)
from workbench.analysis._session_diff import diff_sessions
from workbench.cli import main

X = ValueRecord("array", "ArrayImpl", "float32[]")


def _stage(name: str, prims: tuple[str, ...]) -> Stage:
    hist = {}
    for p in prims:
        hist[p] = hist.get(p, 0) + 1
    return Stage(name, jaxpr=JaxprRecord(name, "", len(prims), primitives=prims),
                 histogram=tuple(PrimitiveCount(p, n) for p, n in  # most frequent first, as recorded
                                 sorted(hist.items(), key=lambda kv: (-kv[1], kv[0]))))


def _call(index: int, function: str, prims: tuple[str, ...], transform: str = "grad") -> Call:
    levels = (Level(0, "eval", "eval#0", 0, None, "EvalTrace"),
              Level(1, transform, f"{transform}#1", 1, 0, "LinearizeTrace", function))
    steps = tuple(Step(i, 1, p, inputs=(X,), outputs=(X,)) for i, p in enumerate(prims))
    return Call(index, transform, function, None, levels=levels, steps=steps,
                stages=(_stage("f", prims), _stage(f"{transform}(f)", prims + ("mul",))))


def _save(tmp_path, name: str, *calls: Call):
    path = tmp_path / name
    Session(calls=list(calls), jax_version="0.10.2", python_version="3.11.7").save(path)
    return str(path)


def workbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=120)


def test_diff_names_the_calls_and_stages_that_changed(tmp_path, capsys):
    a = _save(tmp_path, "a.json", _call(0, "loss", ("sin", "mul")), _call(1, "old", ("cos",)))
    b = _save(tmp_path, "b.json", _call(0, "loss", ("sin", "mul", "mul", "add")),
              _call(1, "new", ("cos",)))
    assert main(["diff", a, b]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"A: {a} (2 calls, 3 steps)",
        f"B: {b} (2 calls, 5 steps)",
        "call 0 grad(loss): changed",
        "  steps: 2 -> 4 (+2)",
        "  stage f: 2 -> 4 equations (+2)  [add +1, mul +1]",
        "  stage grad(f): 3 -> 5 equations (+2)  [add +1, mul +1]",
        "call 1 grad(old): only in A",
        "call 1 grad(new): only in B",
        "calls: 1 changed, 0 same, 1 only in A, 1 only in B; equation counts grew in 2 stage(s)",
    ]
    assert main(["diff", a, b, "--fail-on-growth"]) == 1
    assert "equation counts grew in 2 stage(s): call 0 grad(loss) f 2 -> 4" in (
        capsys.readouterr().err)
    assert main(["diff", b, a, "--fail-on-growth"]) == 0  # shrinking is fine
    assert main(["diff", b, a, "--fail-on-change"]) == 1


def test_diff_json_for_scripts(tmp_path):
    a = _save(tmp_path, "a.json", _call(0, "loss", ("sin",)))
    b = _save(tmp_path, "b.json", _call(0, "loss", ("sin", "cos")))
    done = workbench("diff", a, b, "--json", "--fail-on-growth")
    assert done.returncode == 1
    data = json.loads(done.stdout)
    assert data["related"] and data["grew"] and data["summary"]["changed"] == 1
    stage = data["calls"][0]["stages"][0]
    assert stage == {"name": "f", "status": "changed", "eqns": [1, 2], "grew": True,
                     "available": [True, True], "primitives": {"cos": [0, 1]}}


def test_identical_traces_are_the_same(tmp_path, capsys):
    a = _save(tmp_path, "a.json", _call(0, "loss", ("sin",)))
    assert main(["diff", a, a, "--fail-on-change", "--fail-on-growth"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "calls: 0 changed, 1 same, 0 only in A, 0 only in B; no equation count grew")
    assert not diff_sessions(Session(), Session()).changed


def test_diff_of_unrelated_traces_says_so_and_exits_2(tmp_path):
    a = _save(tmp_path, "a.json", _call(0, "loss", ("sin",)))
    b = _save(tmp_path, "b.json", _call(0, "predict", ("cos",), transform="vmap"))
    done = workbench("diff", a, b)
    assert done.returncode == 2
    assert "the traces look unrelated: none of A's 1 call matches one of B's 1" in done.stdout


@pytest.mark.parametrize("content, fragment", [
    (None, "no such file"),
    ('{"schema": "jax-transform-workbench/session", "schema_version": 1, "calls": [{"ind',
     "truncated"),
    (json.dumps({"schema": "jax-transform-workbench/session", "schema_version": 99,
                 "calls": []}), "written with schema version 99"),
])
@pytest.mark.parametrize("command", ["diff", "open", "show", "schema"])
def test_bad_dumps_exit_2_with_a_message(tmp_path, capsys, content, fragment, command):
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    good = _save(tmp_path, "good.json", _call(0, "loss", ("sin",)))
    args = {"diff": ["diff", good, str(bad)], "open": ["open", str(bad)],
            "show": ["show", str(bad)], "schema": ["schema", "--validate", str(bad)]}[command]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err


def test_a_truncated_dump_as_a_process(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "jax-transform-workbench/session", "schema_version": 1, "ca')
    done = workbench("diff", str(bad), str(bad))
    assert done.returncode == 2
    assert "truncated" in done.stderr and "Traceback" not in done.stderr


def test_open_without_a_terminal_points_at_show(tmp_path):
    good = _save(tmp_path, "good.json", _call(0, "loss", ("sin",)))
    done = workbench("open", good)
    assert done.returncode == 2 and f"workbench show {good}" in done.stderr


def test_schema_command_prints_the_generated_schema():
    done = workbench("schema")
    assert done.returncode == 0
    printed = json.loads(done.stdout)
    assert printed == schema.session_schema()
    assert printed["properties"]["schema_version"]["maximum"] >= 1
    assert set(printed["$defs"]) >= {"Call", "Step shape", "Level in tables[tuple[Level, ...]]",
                                     "Stage in tables[tuple[Stage, ...]]",
                                     "ValueRecord in tables[ValueRecord]"}
    assert printed["properties"]["fields"]["properties"]["Step"]["const"][:3] == [
        "index", "level", "primitive"]


def test_the_validator_reports_paths(tmp_path):
    path = _save(tmp_path, "a.json", _call(0, "loss", ("sin",)))
    with open(path) as f:
        data = json.load(f)
    assert schema.schema_problems(data) == []
    call = data["calls"][0]
    where = {name: i for i, name in enumerate(data["fields"]["Call"])}
    call[where["steps"]][0] = "zero"  # a step: a step shape's number (or [index, number])
    data["tables"]["Step"][0][0] = "one"  # a step shape's level
    data["tables"]["tuple[Level, ...]"][0][0].append("extra")  # a call's levels: shared
    call[where["function"]] = 3
    data["tables"]["ValueRecord"] = [["array"]]
    problems = schema.schema_problems(data)
    assert f"$.calls[0][{where['function']}]: expected string, got 3" in problems
    width = {name: len(names) for name, names in data["fields"].items()}
    assert (f"$.tables.tuple[Level, ...][0][0]: expected at most {width['Level']} items, "
            f"got {width['Level'] + 1}") in problems
    assert (f'$.calls[0][{where["steps"]}][0]: "zero" matches none of integer | array'
            in problems)
    assert '$.tables.Step[0][0]: expected integer, got "one"' in problems
    assert (f"$.tables.ValueRecord[0]: expected at least {width['ValueRecord']} items, got 1"
            in problems)


@pytest.mark.parametrize("command", ["demo", "run", "dump", "open", "show", "diff", "schema"])
def test_every_command_has_help_with_exit_codes(command, capsys):
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0
    assert "Exit codes:" in capsys.readouterr().out
