"""The TUI's compiles view, driven with Pilot, on hand-made compile records."""
from __future__ import annotations

from tui_sessions import SIZE, build_app, missing_view_says, seed_logistic, sync, view_body

from transforms.model import (
    Call,
    CompileKey,
    CompileRecord,
    KeyLeaf,
    MissReason,
    Session,
    SourceLocation,
)
from workbench.tui.widgets.compiles.compiles_pane import CompilesPane

AT = SourceLocation("/nowhere/train.py", 12, "main")
KEY = CompileKey(leaves=(KeyLeaf("lr", "float32", (), weak_type=True),), function_id=1)
TRACES = [
    CompileRecord("step", AT, AT, traced=True, lowered=True, compiled=True, trace_seconds=0.5,
                  compile_seconds=1.0, key=KEY),
    CompileRecord("step", AT, AT, traced=True, lowered=True, compiled=True, trace_seconds=0.5,
                  compile_seconds=1.0, key=KEY, number=1,
                  reasons=(MissReason("became_array", "lr", "float32[]", "float32[]"),)),
]
SESSION = Session(calls=[Call(0, "jit", "step", None), Call(1, "jit", "step", None)],
                  compiles=TRACES)


@sync
async def test_compiles_view_names_each_retrace_its_reason_and_fix():
    app = build_app(SESSION, title="recompiles")
    async with app.run_test(size=(120, 40)) as pilot:
        body = await view_body(app, pilot, "7", "compiles", CompilesPane, "#compiles-body")
        assert [line.rstrip() for line in body.splitlines()] == [
            "2 traces, 2 compiles, 3.00 s; your jitted functions traced again 1 time",
            "",
            "step  2 traces, 2 compiles, 3.00 s  traced again 1 time",
            "  first trace train.py:12           1.500 s  (trace/lower/compile)",
            "      key: lr: float32[] weak",
            "  trace #2    train.py:12           1.500 s  (trace/lower/compile)",
            "      why: `lr` was a Python scalar (weakly typed float32[]) and is now a float32[] "
            "array",
            "      JAX's explain_cache_misses: different input types (weak_type)",
            "      fix: pass the same kind each call: always an array (jnp.asarray(x, "
            "jnp.float32)) or always a Python scalar",
        ]


@sync
async def test_a_session_where_nothing_recompiled_says_so_first():
    once = Session(calls=[Call(0, "jit", "step", None)], compiles=TRACES[:1])
    app = build_app(once, title="compiled once")
    async with app.run_test(size=(120, 40)) as pilot:
        body = await view_body(app, pilot, "7", "compiles", CompilesPane, "#compiles-body")
        assert [line.rstrip() for line in body.splitlines()] == [
            "every jitted function compiled once: nothing recompiled",
            "1 trace, 1 compile, 1.50 s",
            "",
            "step  1 trace, 1 compile, 1.50 s",
            "  first trace train.py:12           1.500 s  (trace/lower/compile)",
            "      key: lr: float32[] weak",
        ]


@sync
async def test_a_session_without_jit_traces_has_no_compiles_tab():
    app = build_app(seed_logistic(), title="t")
    async with app.run_test(size=SIZE) as pilot:
        assert "no jit traced or compiled" in await missing_view_says(app, pilot, "7", CompilesPane)
