"""A merged multi-process run keeps each process's jit compiles: process_sessions gives them
back, `workbench show` lists them under their process, the TUI's Compiles view of a process
shows its own; a merged dump from before they were kept loads with none."""
from __future__ import annotations

import json

from tui_sessions import build_app, sync, widget_text as _text

from transforms.model import (
    Call,
    CompileKey,
    CompileRecord,
    KeyLeaf,
    MissReason,
    ProcessInfo,
    Session,
    SourceLocation,
    load,
)
from workbench.analysis import _process_merge as processes
from workbench.cli import main
from workbench.tui.widgets.compiles.compiles_pane import CompilesPane

AT = SourceLocation("/nowhere/train.py", 12, "main")


def _key(size: int) -> CompileKey:
    return CompileKey(leaves=(KeyLeaf("x", "float32", (size,)),), function_id=1)


def _process(index: int, sizes: list[int]) -> Session:
    """Process `index` of 2, whose jitted `step` traced once per size."""
    compiles = [CompileRecord("step", AT, AT, traced=True, lowered=True, compiled=True,
                              compile_seconds=0.5, key=_key(size), number=n, call_index=n,
                              reasons=(MissReason("shape", "x", f"float32[{sizes[0]}]",
                                                  f"float32[{size}]"),) if n else ())
                for n, size in enumerate(sizes)]
    calls = [Call(n, "jit", "step", AT) for n in range(len(sizes))]
    info = ProcessInfo(index, 2, (index,), status="ok", exit_code=0)
    return Session(calls=calls, title="train.py", process=info, compiles=compiles)


def _run() -> Session:
    return processes.merge([_process(0, [32]), _process(1, [32, 16])])


def test_each_process_keeps_its_compiles_through_a_save_and_load(tmp_path):
    _run().save(tmp_path / "run.json")
    views = processes.process_sessions(load(tmp_path / "run.json"))
    assert [[r.key.leaves[0].shape for r in v.compiles] for v in views] == [[(32,)],
                                                                           [(32,), (16,)]]
    assert views[1].compiles == _process(1, [32, 16]).compiles


def test_a_merged_dump_from_before_compiles_were_kept_loads_with_none(tmp_path):
    _run().save(tmp_path / "run.json")
    data = json.loads((tmp_path / "run.json").read_text())
    assert data["fields"]["ProcessRecord"].pop() == "compiles"  # the dump names its columns
    for record in data["processes"]:  # a ProcessRecord row: its last value is the new one
        record.pop()
    (tmp_path / "old.json").write_text(json.dumps(data))
    views = processes.process_sessions(load(tmp_path / "old.json"))
    assert [v.compiles for v in views] == [[], []]
    assert [len(v.calls) for v in views] == [1, 2]


def test_show_lists_each_processs_compiles_under_it(tmp_path, capsys):
    _run().save(tmp_path / "run.json")
    assert main(["show", str(tmp_path / "run.json")]) == 0
    out = capsys.readouterr().out
    second = out[out.index("process 1/2"):]
    assert "  jit compiles: 1 trace, 1 compile, 0.50 s; your jitted functions traced again " \
           "0 times" in out[:out.index("process 1/2")]
    assert "  jit compiles: 2 traces, 2 compiles, 1.00 s; your jitted functions traced again " \
           "1 time" in second
    assert "`x` float32[32] -> float32[16]" in second


@sync
async def test_the_compiles_view_of_each_process_shows_its_own():
    app = build_app(_run(), title="run")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("7")
        await pilot.pause()
        body = _text(app.screen.query_one(CompilesPane).query_one("#compiles-body"))
        assert body.splitlines()[0] == "every jitted function compiled once: nothing recompiled"
        await pilot.press("p")
        await pilot.pause()
        assert app.screen.session.process.index == 1
        body = _text(app.screen.query_one(CompilesPane).query_one("#compiles-body"))
        assert body.splitlines()[0].startswith("2 traces, 2 compiles, 1.00 s; your jitted "
                                               "functions traced again 1 time")
