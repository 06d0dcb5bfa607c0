"""Failure renderables: exact text with Console(color_system=None)."""
from __future__ import annotations

import jax.numpy as jnp
from corpus import CASES_BY_NAME, Primal, Tangent
from rich.console import Console

import transforms as T
from transforms._trees._pytrees import TreeBuilder
from transforms._trees._tree_pairs import pair_trees
from transforms.model import Call, Diagnostic, ErrorRecord, Level, SourceLocation, Step
from workbench.render.failure import DiagnosticsView, FailurePanel


def text(renderable, width=72) -> str:
    console = Console(color_system=None, width=width, record=True)
    console.print(renderable)
    return console.export_text()


BOOL_ERROR = ErrorRecord(
    "jax.errors.TracerBoolConversionError",
    "Attempted boolean conversion of traced array with shape bool[].\nmore text",
    level=1, step=0, source=SourceLocation("demo.py", 3, "absolute_if"),
    rule="bool_conversion", hint="use jnp.where or lax.cond", level_label="vmap#1",
    transform="vmap", argument="x", batch_dim=0,
    tracer="VmapTracer(aval=bool[], batched=bool[5], batch_dim=0)")

CALL = Call(0, "vmap", "absolute_if", None,
            levels=(Level(0, "eval", "eval#0", 0, None, "EvalTrace"),
                    Level(1, "vmap", "vmap#1", 1, 0, "BatchTrace")),
            steps=(Step(0, 1, "gt"),), errors=(BOOL_ERROR,))


def test_failure_panel_of_a_tracer_error():
    assert text(FailurePanel(BOOL_ERROR, CALL)) == (
        "╭─ TracerBoolConversionError [bool_conversion] ────────────────────────╮\n"
        "│ error    Attempted boolean conversion of traced array with shape     │\n"
        "│          bool[].                                                     │\n"
        "│ line     demo.py:3 (absolute_if)                                     │\n"
        "│ level    vmap#1 (vmap)                                               │\n"
        "│ step     #0 gt at vmap#1                                             │\n"
        "│ argument x, batch_dim=0                                              │\n"
        "│ tracer   VmapTracer(aval=bool[], batched=bool[5], batch_dim=0)       │\n"
        "│ hint     use jnp.where or lax.cond                                   │\n"
        "╰──────────────────────────────────────────────────────────────────────╯\n")


def test_failure_panel_without_a_call_and_with_a_mismatch():
    b = TreeBuilder()
    pair = pair_trees("custom_jvp", "primal output vs tangent output",
                      b.build(Primal(0.), "primal_out", "primal"),
                      b.build(Tangent(0., 0.), "tangent_out", "tangent"),
                      "primal output", "tangent output")
    error = ErrorRecord("TypeError", "Custom JVP rule init_jvp ...", level=2, step=None,
                        rule="structure_mismatch", hint="make both the same", function="init_jvp",
                        level_label="grad#1/custom_jvp_rule#2", transform="custom_jvp_rule",
                        mismatch=pair)
    assert text(FailurePanel(error)) == (
        "╭─ TypeError [structure_mismatch] ─────────────────────────────────────╮\n"
        "│ error    Custom JVP rule init_jvp ...                                │\n"
        "│ function init_jvp                                                    │\n"
        "│ level    grad#1/custom_jvp_rule#2 (custom_jvp_rule)                  │\n"
        "│ hint     make both the same                                          │\n"
        "│                                                                      │\n"
        "│ primal output vs tangent output                                      │\n"
        "│ first difference at the root: primal output has a corpus.Primal with │\n"
        "│ children .x; tangent output has a corpus.Tangent with children       │\n"
        "│ .sign, .norm                                                         │\n"
        "│     path     primal (primal_out)   tangent (tangent_out)             │\n"
        "│ ────────────────────────────────────────────────────────             │\n"
        "│ >   (root)   Primal                Tangent                           │\n"
        "│ -   .x       float32[] = 0.0       -                                 │\n"
        "│ +   .sign    -                     float32[] = 0.0                   │\n"
        "│ +   .norm    -                     float32[] = 0.0                   │\n"
        "╰──────────────────────────────────────────────────────────────────────╯\n")


def test_diagnostics_view():
    d = Diagnostic("undefined_name", "repack_NTC uses `value`, which is not defined.",
                   "seed.NTContainer", "container", "repack_NTC",
                   SourceLocation("seed.py", 21, "repack_NTC"), ("value",))
    assert text(DiagnosticsView([d])) == (
        "kind             where                     finding                      \n"
        "────────────────────────────────────────────────────────────────────────\n"
        "undefined_name   seed.py:21 (repack_NTC)   repack_NTC uses `value`,     \n"
        "                                           which is not defined.        \n")
    assert text(DiagnosticsView(())) == (
        "no findings: every custom pytree node round-trips\n")


def test_recorded_failure_renders():
    with T.record() as session:
        try:
            CASES_BY_NAME["seed003_absolute_if_vmap"].run(T)
        except Exception:  # noqa: BLE001 - the failure is what we render
            pass
    call = session.calls[0]
    out = text(FailurePanel(call.errors[0], call), width=100)
    assert "TracerBoolConversionError [bool_conversion]" in out
    assert "level    vmap#1 (vmap)" in out and "argument x, batch_dim=0" in out
    assert "jnp.where" in out


def test_a_failing_renderer_degrades_to_a_note():
    assert text(FailurePanel(None)).startswith("<render-error failure: AttributeError")
    assert text(DiagnosticsView([None])).startswith("<render-error diagnostics: AttributeError")


def _pull_with_a_wrong_cotangent():
    with T.record() as session:
        _, pullback = T.vjp(lambda x: {"p": x, "q": x * 2.}, jnp.ones(2))
        try:
            pullback({"p": jnp.ones(2)})
        except ValueError:  # the failure is what we render
            pass
    return session.calls[1]


PULL_LINE = _pull_with_a_wrong_cotangent.__code__.co_firstlineno + 4


def test_failure_panel_of_a_wrong_cotangent_shows_both_trees():
    call = _pull_with_a_wrong_cotangent()
    line = f"tests/workbench/render/test_render_failure.py:{PULL_LINE}"
    assert text(FailurePanel(call.errors[0], call), width=80) == (
        "╭─ ValueError [cotangent_mismatch] ────────────────────────────────────────────╮\n"
        "│ error unexpected tree structure.                                             │\n"
        f"│ line  {line:<71}│\n"
        "│       (_pull_with_a_wrong_cotangent)                                         │\n"
        "│ level eval#0 (eval)                                                          │\n"
        "│ hint  first difference at the root: the primal output has a dict with        │\n"
        "│       children ['p'], ['q']; the cotangent has a dict with children ['p'].   │\n"
        "│       Give the pullback a cotangent with the primal output's structure (e.g. │\n"
        "│       jax.tree_util.tree_map(jnp.ones_like, primal_out)).                    │\n"
        "│                                                                              │\n"
        "│ primal output vs its cotangent                                               │\n"
        "│ first difference at the root: the primal output has a dict with children     │\n"
        "│ ['p'], ['q']; the cotangent has a dict with children ['p']                   │\n"
        "│     path     primal_out             cotangent                                │\n"
        "│ ────────────────────────────────────────────────────────                     │\n"
        "│ >   (root)   dict                   dict                                     │\n"
        "│     ['p']    float32[2] = [1. 1.]   float32[2] = [1. 1.]                     │\n"
        "│ -   ['q']    float32[2] = [2. 2.]   -                                        │\n"
        "╰──────────────────────────────────────────────────────────────────────────────╯\n")


# --- issue 36, item 13: one convention for paths -----------------------------------------

def test_a_hint_and_a_finding_name_paths_as_the_line_row_does(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    seed = str(tmp_path / "pkg" / "seed.py")
    error = ErrorRecord("NameError", "name 'value' is not defined", level=None, step=None,
                        source=SourceLocation(seed, 49, "repack"),
                        hint=f"Fix repack: at {seed}:49 it uses `value`")
    shown = text(FailurePanel(error), width=100)
    assert "line  pkg/seed.py:49 (repack)" in shown
    assert "hint  Fix repack: at pkg/seed.py:49 it uses `value`" in shown
    assert str(tmp_path) not in shown
    finding = Diagnostic("undefined_name", f"repack ({seed}:49) uses the name `value`", "NTC",
                         source=SourceLocation(seed, 49, "repack"))
    shown = text(DiagnosticsView([finding]), width=100)
    assert "repack (pkg/seed.py:49) uses the name `value`" in shown
    assert str(tmp_path) not in shown
