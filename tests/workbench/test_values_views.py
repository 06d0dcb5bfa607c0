"""Issue 33 item 2: each equation's values beside it (record(values=True)) in `show --steps`,
the step view, the jaxpr graph and the HTML stages view, all through one formatter
(ValueSummary.describe, joined by analysis.values_text)."""
from __future__ import annotations

import jax.numpy as jnp
from rich.console import Console

import transforms as T
from workbench.analysis import StepValue, step_values
from workbench.cli._summary import equation_value_lines
from workbench.export.graphviz import collect_jaxpr
from workbench.html._stages import values_html
from workbench.render.step import StepView


def f(x):
    return jnp.sum(jnp.sin(x) * 2.0)


def _call():
    with T.record(values=True) as session:
        T.grad(f)(jnp.array([0.0, 1.0]))
    return session.calls[0]


def _stage(call, name):
    return next(s for s in call.stages if s.name == name)


def test_show_steps_prints_each_equation_with_its_values_and_why_a_stage_has_none():
    lines = equation_value_lines(_call(), True)
    no_tangents = "not evaluated: a grad call gives no tangents (it pulls a cotangent back instead)"
    assert lines[4:14] == [
        f"  values of jvp(f), linear(f): {no_tangents}",  # one reason, one line
        "  values of linearize(f): 4 equations",
        "    0 sin(f32[2]) -> f32[2] = [0.         0.84147096]",
        "    1 cos(f32[2]) -> f32[2] = [1.        0.5403023]",
        "    2 mul(f32[2], f32[]) -> f32[2] = [0.        1.6829419]",
        "    3 reduce_sum(f32[2]) -> f32[] = 1.6829419",
        "  values of transpose(linear(f)): 3 equations (at the cotangent 1.0, as grad pulls back)",
        "    0 broadcast_in_dim(f32[]) -> f32[2] = [1. 1.]",
        "    1 mul(f32[2], f32[]) -> f32[2] = [2. 2.]",
        "    2 mul(f32[2], f32[2]) -> f32[2] = [2.        1.0806046]",
    ]
    assert equation_value_lines(_call(), False)[1] == f"  values of jvp(f), linear(f): {no_tangents}"


def test_the_step_view_lists_the_equations_a_step_became_with_their_values():
    call = _call()
    last = call.steps[-1]  # the backward mul: cos x times 2
    assert step_values(call, last.index) == [
        StepValue("grad(f)", 6, "mul", "[2.        1.0806046]")]
    console = Console(width=80, record=True, color_system=None)
    console.print(StepView(last, values=step_values(call, last.index)))
    text = console.export_text()
    assert ("values (its equations, evaluated again)\n"
            "grad(f) #6 mul = [2.        1.0806046]\n") in text


def test_the_jaxpr_graph_has_a_value_line_in_each_equation():
    call = _call()
    labels = [n.label for n in collect_jaxpr(_stage(call, "grad(f)"), call).nodes]
    assert labels[1:4] == ["#0 sin\n= [0.         0.84147096]",
                           "#1 cos\n= [1.        0.5403023]",
                           "#2 mul\nliterals: 2.0\n= [0.        1.6829419]"]
    # without the call (or recorded without values) the nodes are as before
    assert collect_jaxpr(_stage(call, "grad(f)")).nodes[1].label == "#0 sin"


def test_the_html_stages_view_has_each_equation_with_its_values():
    call = _call()
    values = next(v for v in call.values if v.stage == "grad(f)")
    html = values_html(_stage(call, "grad(f)"), values)
    assert html.startswith('<p class="dim">values, each equation evaluated again</p><table>')
    assert ("<tr><td>6</td><td>mul(f32[2], f32[2]) -&gt; f32[2]</td>"
            "<td>[2.        1.0806046]</td></tr>") in html
    jvp = next(v for v in call.values if v.stage == "jvp(f)")
    assert values_html(_stage(call, "jvp(f)"), jvp) == (
        '<p class="dim">values: not evaluated: a grad call gives no tangents (it pulls a '
        'cotangent back instead)</p>')
