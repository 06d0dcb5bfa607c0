"""Renderables for stages, as exact text on a colourless fixed-width console.

The stages here are built by hand, so the expected text does not move with
JAX's printing; one test renders a captured stage to check the plumbing.
"""
from __future__ import annotations

import io

import jax
import pytest
from corpus import WS, XS, convolve
from rich.console import Console

import transforms
from transforms.model import (
    EqnRecord,
    Growth,
    GrowthPoint,
    GrowthSeries,
    JaxprRecord,
    Metric,
    PrimitiveCount,
    Stage,
    diff_stages,
)
from workbench.render import (
    ChainView,
    DiffView,
    GrowthChart,
    GrowthPanel,
    GrowthView,
    JaxprView,
    StageStats,
    StageView,
    fold_jaxpr,
    growing_primitive,
)


def render(renderable, width: int = 72) -> str:
    console = Console(color_system=None, width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return "\n".join(line.rstrip() for line in console.export_text().splitlines())


F_TEXT = """\
{ lambda ; a:f32[5]. let
    b:f32[5] = sin a
    c:f32[5] = mul b a
    d:f32[] = reduce_sum[axes=(0,) out_sharding=None] c
  in (d,) }"""
V_TEXT = """\
{ lambda ; a:f32[2,5]. let
    b:f32[2,5] = sin a
    c:f32[2,5] = mul b a
    d:f32[2] = reduce_sum[axes=(1,) out_sharding=None] c
  in (d,) }"""
HISTOGRAM = (PrimitiveCount("mul", 1), PrimitiveCount("reduce_sum", 1), PrimitiveCount("sin", 1))


def eqns(batch: int | None) -> tuple[EqnRecord, ...]:
    x = "float32[5]" if batch is None else f"float32[{batch},5]"
    out = "float32[]" if batch is None else f"float32[{batch}]"
    stack = "" if batch is None else "vmap()"
    axes = "(0,)" if batch is None else "(1,)"
    return (EqnRecord("sin", (), (x,), (x,), "demo.py:4:19 (sin_sum)", stack),
            EqnRecord("mul", (), (x, x), (x,), "demo.py:4:19 (sin_sum)", stack),
            EqnRecord("reduce_sum", (("axes", axes), ("out_sharding", "None")), (x,), (out,),
                      "demo.py:4:11 (sin_sum)", stack))


F = Stage("f", "sin_sum", jaxpr=JaxprRecord("f", F_TEXT, 3, ("float32[5]",), ("float32[]",)),
          role="f", method="jax.make_jaxpr(f)", eqns=eqns(None), histogram=HISTOGRAM)
V = Stage("vmap(f)", "vmap(sin_sum)",
          jaxpr=JaxprRecord("vmap(f)", V_TEXT, 3, ("float32[2,5]",), ("float32[2]",)),
          role="transformed", transform="vmap",
          method="jax.make_jaxpr(jax.vmap(<recorded f>, in_axes=0, out_axes=0))",
          eqns=eqns(2), histogram=HISTOGRAM)

COND_TEXT = """\
let helper = { lambda ; x:f32[]. let y:f32[] = sin x in (y,) } in
{ lambda ; a:f32[]. let
    b:f32[] = cond[
      branches=(
        { lambda ; c:f32[]. let d:f32[] = sin c in (d,) }
        { lambda ; e:f32[]. let
            f:f32[] = cos e
            g:f32[] = neg f
          in (g,) }
      )
    ] 1:i32[] a
    h:f32[] = jit[name=helper jaxpr=helper] b
  in (h,) }"""


def test_fold_collapses_every_sub_jaxpr_at_depth_0():
    assert fold_jaxpr(COND_TEXT, 0) == """\
let helper = { lambda ; x:f32[]. let … in (y,) } in
{ lambda ; a:f32[]. let
    b:f32[] = cond[
      branches=(
        { lambda ; c:f32[]. let … in (d,) }
        { lambda ; e:f32[]. let … 2 lines … in (g,) }
      )
    ] 1:i32[] a
    h:f32[] = jit[name=helper jaxpr=helper] b
  in (h,) }"""


def test_fold_keeps_open_what_is_not_deeper_than_depth():
    assert fold_jaxpr(COND_TEXT, 1) == COND_TEXT
    assert fold_jaxpr(F_TEXT, 0) == F_TEXT  # the program itself never folds


def test_fold_leaves_unbalanced_text_alone():
    unbalanced = "{ lambda ; a:f32[]. let b = { lambda"
    assert fold_jaxpr(unbalanced, 0) == unbalanced


def test_jaxpr_view_folds_and_clips():
    assert render(JaxprView(COND_TEXT, fold=0, max_lines=5)) == """\
let helper = { lambda ; x:f32[]. let … in (y,) } in
{ lambda ; a:f32[]. let
    b:f32[] = cond[
      branches=(
        { lambda ; c:f32[]. let … in (d,) }
… 5 more lines"""


def test_stage_view():
    assert render(StageView(F)) == """\
f  sin_sum
jax.make_jaxpr(f)
{ lambda ; a:f32[5]. let
    b:f32[5] = sin a
    c:f32[5] = mul b a
    d:f32[] = reduce_sum[axes=(0,) out_sharding=None] c
  in (d,) }
equations     3
inputs        f32[5]
outputs       f32[]
name stacks       3  (none)
source lines      2  demo.py:4:19 (sin_sum)
                  1  demo.py:4:11 (sin_sum)
mul         1  ████████████████████
reduce_sum  1  ████████████████████
sin         1  ████████████████████"""


def test_stage_stats_histogram_bars_and_the_rest():
    stage = Stage("f", jaxpr=JaxprRecord("f", "", 7, (), ("float32[]",)),
                  histogram=(PrimitiveCount("mul", 4), PrimitiveCount("add", 2),
                             PrimitiveCount("sin", 1)))
    assert render(StageStats(stage, top=2, bar_width=8)) == """\
equations  7
inputs     ()
outputs    f32[]
mul       4  ████████
add       2  ████
… 1 more"""


def test_unavailable_stage_says_why():
    stage = Stage("grad(f)", "grad(piecewise)", available=False, role="transformed",
                  reason="TracerBoolConversionError: Attempted boolean conversion of traced array",
                  method="jax.make_jaxpr(jax.grad(<f>, argnums=0, has_aux=False))")
    assert render(StageView(stage), width=60) == """\
grad(f)  grad(piecewise)
jax.make_jaxpr(jax.grad(<f>, argnums=0, has_aux=False))
unavailable: TracerBoolConversionError: Attempted boolean
conversion of traced array"""


def test_compiled_and_metric_stages():
    stablehlo = Stage("stablehlo(jit(f))", "StableHLO of jit(f)", role="stablehlo",
                      method="jax.jit(f).lower(*args).as_text()",
                      text="module @jit_f {\n  func.func public @main() {\n  }\n}")
    cost = Stage("cost(jit(f))", "cost analysis of jit(f)", role="cost",
                 method="compiled.cost_analysis()",
                 metrics=(Metric("flops", 5.0), Metric("bytes accessed", 16.0),
                          Metric("optimal_seconds", 0.000125)))
    assert render(StageView(stablehlo)) + "\n" + render(StageView(cost)) == """\
stablehlo(jit(f))  StableHLO of jit(f)
jax.jit(f).lower(*args).as_text()
module @jit_f {
  func.func public @main() {
  }
}
cost(jit(f))  cost analysis of jit(f)
compiled.cost_analysis()
flops                   5
bytes accessed         16
optimal_seconds  0.000125"""


def test_chain_view():
    failed = Stage("grad(f)", role="transformed", available=False,
                   reason="ValueError: Reverse-mode differentiation does not work\nmore text")
    assert render(ChainView((F, V, failed))) == """
 stage     role          eqns   status
 ──────────────────────────────────────────────────────────────────────
 f         f                3   ok
 vmap(f)   transformed      3   ok
 grad(f)   transformed          ValueError: Reverse-mode
                                differentiation does not work
"""


def test_diff_view_side_by_side():
    assert render(DiffView(diff_stages(F, V), F, V, details=False)) == """\
f -> vmap(f): 3 changed, 0 added, 0 removed, 0 same
in:  f32[5] -> f32[2,5]
out: f32[] -> f32[2]
  f32[5] -> f32[2,5] ×3 (new axis 0 of size 2)
  f32[] -> f32[2] ×1 (new axis 0 of size 2)

 #   f                                 #   vmap(f)
 ──────────────────────────────────────────────────────────────────────
 0   sin(f32[5]) -> f32[5]         ~   0   sin(f32[2,5]) -> f32[2,5]
 1   mul(f32[5], f32[5]) ->        ~   1   mul(f32[2,5], f32[2,5]) ->
     f32[5]                                f32[2,5]
 2   reduce_sum(f32[5]) -> f32[]   ~   2   reduce_sum(f32[2,5]) ->
                                           f32[2]
"""


def test_diff_view_details_and_collapsed_context():
    many = F.eqns * 4
    before = Stage("a", jaxpr=JaxprRecord("a", "", 12), eqns=many)
    after = Stage("b", jaxpr=JaxprRecord("b", "", 13),
                  eqns=many[:6] + (EqnRecord("cos", (), ("float32[5]",), ("float32[5]",)),)
                  + many[6:11] + (many[11]._replace(params=(("axes", "(0, 1)"),)),))
    assert render(DiffView(diff_stages(before, after), before, after, context=1)) == """\
a -> b: 1 changed, 1 added, 0 removed, 11 same
in:  ()
out: ()
primitives: cos 0 -> 1

  #   a                                 #   b
 ──────────────────────────────────────────────────────────────────────
      … 5 unchanged
  5   reduce_sum(f32[5]) ->             5   reduce_sum(f32[5]) -> f32[]
      f32[]
                                   +    6   cos(f32[5]) -> f32[5]
  6   sin(f32[5]) -> f32[5]             7   sin(f32[5]) -> f32[5]
      … 3 unchanged
 10   mul(f32[5], f32[5]) ->           11   mul(f32[5], f32[5]) ->
      f32[5]                                f32[5]
 11   reduce_sum(f32[5]) ->        ~   12   reduce_sum(f32[5]) -> f32[]
      f32[]                                   axes: (0,) -> (0, 1)
                                              out_sharding: None -> -
"""


def test_growth_view():
    assert render(GrowthView(seed_growth(), primitive="dot_general"), width=80) == """\
                        equations per batch size

       batch                 loop                 vmap           broken
 ──────────────────────────────────────────────────────────────────────
           1   13 (3 dot_general)   10 (3 dot_general)   ValueError: no
           2   29 (6 dot_general)   10 (3 dot_general)
           3   43 (9 dot_general)   10 (3 dot_general)
 per element                  +14                   +0
"""


def seed_growth() -> Growth:
    loop = GrowthSeries("loop", tuple(
        GrowthPoint(n, c, (PrimitiveCount("dot_general", 3 * n),))
        for n, c in ((1, 13), (2, 29), (3, 43))))
    vmap = GrowthSeries("vmap", tuple(
        GrowthPoint(n, 10, (PrimitiveCount("dot_general", 3),)) for n in (1, 2, 3)))
    broken = GrowthSeries("broken", (GrowthPoint(1, error="ValueError: no\nmore"),))
    return Growth("equations per batch size", (loop, vmap, broken))


def test_growth_chart_draws_bars_on_one_scale():
    # 43 fills the 20 columns; 13 -> 6, 29 -> 13, 10 -> 5 (rounded); an error shows its first line
    assert render(GrowthChart(seed_growth(), width=20)) == """\
equations per batch size
loop
  1 ██████ 13
  2 █████████████ 29
  3 ████████████████████ 43
vmap
  1 █████ 10
  2 █████ 10
  3 █████ 10
broken
  1 ValueError: no"""


def test_growth_chart_shows_any_equation_and_refuses_no_width():
    tiny = Growth("g", (GrowthSeries("s", (GrowthPoint(1, 1), GrowthPoint(10, 1000))),))
    assert render(GrowthChart(tiny, width=4, title=False)) == "s\n   1 █ 1\n  10 ████ 1000"
    with pytest.raises(ValueError, match="width must be at least 1"):
        GrowthChart(tiny, width=0)


def test_growth_panel_is_the_table_and_the_chart_counting_the_growing_primitive():
    g = seed_growth()
    assert growing_primitive(g) == "dot_general"
    assert render(GrowthPanel((g,), bar_width=10), width=80) == """\
                        equations per batch size

       batch                 loop                 vmap           broken
 ──────────────────────────────────────────────────────────────────────
           1   13 (3 dot_general)   10 (3 dot_general)   ValueError: no
           2   29 (6 dot_general)   10 (3 dot_general)
           3   43 (9 dot_general)   10 (3 dot_general)
 per element                  +14                   +0

loop
  1 ███ 13
  2 ███████ 29
  3 ██████████ 43
vmap
  1 ██ 10
  2 ██ 10
  3 ██ 10
broken
  1 ValueError: no"""


def test_growth_panel_of_a_call_without_growth():
    assert render(GrowthPanel(())) == (
        "no growth recorded for this call (transforms.growth keeps it)")
    flat = Growth("g", (GrowthSeries("vmap", (GrowthPoint(1, 10), GrowthPoint(2, 10))),))
    assert growing_primitive(flat) is None


def test_a_failing_renderer_degrades_to_a_note():
    broken = Stage("b", jaxpr=JaxprRecord("b", "", 3), eqns=())  # rows point past its eqns
    assert render(DiffView(diff_stages(F, V), F, broken)) == (
        "<render-error stage diff: IndexError: tuple index out of range>")


def test_a_captured_stage_renders_jaxs_text():
    with transforms.record(stages=True) as session:
        transforms.vmap(convolve)(XS, WS)
    text = render(StageView(session.calls[0].stages[1], stats=False), width=120)
    assert text.splitlines()[:2] == [
        "vmap(f)  vmap(convolve)",
        "jax.make_jaxpr(<the primitives this call executed>)"]
    assert "\n".join(text.splitlines()[2:]) == str(jax.make_jaxpr(jax.vmap(convolve))(XS, WS))
