"""Programs written as flax (linen, nnx) and equinox users write them, read as their authors
wrote them: jnp's own jits are one step each, named for the operation and the user's line,
and a call's steps are grouped by the module or named scope they ran in."""
from __future__ import annotations

import inspect
import os
import re

import jax
import jax.numpy as jnp
import pytest

import transforms as T
from transforms.model import load
from workbench.analysis import step_label
from workbench.cli import main
from workbench.cli._summary import summarize_call
from workbench.run._runner import jax_patched
from workbench.tui.navigation import GROUP, LEVEL, STEP, Outline

eqx = pytest.importorskip("equinox")
nn = pytest.importorskip("flax.linen")
nnx = pytest.importorskip("flax.nnx")

FILE = os.path.basename(__file__)


def _line(marker: str) -> int:
    """The line of this file ending with `marker` (one)."""
    lines = inspect.getsource(inspect.getmodule(_line)).splitlines()
    (found,) = [n for n, line in enumerate(lines, start=1) if line.endswith(marker)]
    return found


# --- a linen MLP with an attention block, as its users write it -------------------------

class Attention(nn.Module):
    @nn.compact
    def __call__(self, x):
        q = nn.Dense(4, name="query")(x)  # LINE query
        k = nn.Dense(4, name="key")(x)  # LINE key
        # NB: not jax.nn.softmax, a custom_jvp from jax 0.12.1 (its body a level of its own:
        # test_recorded_content), so that each JAX release records these steps alike
        scores = jnp.exp(q @ k.T)  # LINE scores
        weights = scores / scores.sum(axis=-1, keepdims=True)  # LINE softmax
        return weights @ x  # LINE out


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = Attention(name="attn")(x)
        return nn.Dense(1, name="head")(x)[:, 0]  # LINE head


def run_linen():
    model = MLP()
    x = jnp.linspace(-1.0, 1.0, 12).reshape(3, 4)
    params = model.init(jax.random.key(0), x)

    @jax.jit
    def loss(params):
        return jnp.mean(jnp.take(model.apply(params, x), jnp.array([0, 2])))  # LINE take

    return loss(params)


@pytest.fixture(scope="module")
def linen_call():
    with T.record() as session, jax_patched():
        run_linen()
    (call,) = session.calls
    return call


def test_a_linen_mlps_show_names_its_modules(linen_call):
    assert summarize_call(linen_call)[1:7] == [
        "    jit#1  DynamicJaxprTrace  19 steps",
        "      in MLP/attn/query  3 steps",
        "      in MLP/attn/key  3 steps",
        "      in MLP/attn  6 steps",
        "      in MLP/head  3 steps",
        "      in MLP  1 step",
    ]
    assert summarize_call(linen_call)[7].startswith("  input params['params']")


def test_show_steps_lists_a_modules_steps_under_its_path(linen_call):
    lines = summarize_call(linen_call, with_steps=True)
    start = lines.index("      in MLP/head:")
    assert [line.split(" (")[0] for line in lines[start:start + 8]] == [
        "      in MLP/head:",
        "        #12 dot_general",
        "        #13 reshape",
        f"        #14 add at {FILE}:{_line('# LINE head')}",
        "      in MLP:",
        "        #15 squeeze",
        "      #16 convert_element_type",
        f"      #17 take at {FILE}:{_line('# LINE take')}",
    ]
    assert lines[start + 8] == (f"      #18 mean at {FILE}:{_line('# LINE take')} "
                                "(JitTracer(float32[2])) -> (JitTracer(float32[]))")


def test_no_jnp_wrapper_is_listed_as_a_top_step(linen_call):
    """jnp's jits (inline ones like add, and jnp.take's plain `_take`) read as operations;
    every other step is a primitive."""
    library = [s for s in linen_call.steps if s.library]
    assert {s.title for s in library} >= {"jit[name=_take]", "jit[name=add]",
                                         "jit[name=matmul]"}
    assert not any(step_label(s).startswith("jit[") for s in linen_call.steps)
    take = next(s for s in library if s.title == "jit[name=_take]")
    assert not take.inline  # a plain jit of JAX's, not an inlined wrapper
    assert step_label(take) == f"take at {FILE}:{_line('# LINE take')}"


def test_a_users_own_jit_stays_a_level_or_a_jit_step():
    def double(y):
        return 2.0 * y

    with T.record() as session:  # jax's own jit, not the recorder's: a step at the level
        T.grad(lambda x: jax.jit(double)(jnp.sin(x)))(1.0)
    steps = session.calls[0].steps
    mine = [s for s in steps if s.title == "jit[name=double]"]
    assert mine and not any(s.library for s in mine)
    assert [step_label(s) for s in mine] == ["jit[name=double]"] * len(mine)
    with T.record() as session, jax_patched():  # `workbench run`: the user's jit is a level
        jax.jit(double)(1.0)
    assert [lv.label for lv in session.calls[0].levels] == ["jit#1"]


def sin_twice(x):
    return jnp.sum(jnp.sin(x) * jax.jit(jnp.sin)(x))  # LINE sin twice


def test_a_users_jit_of_a_jnp_function_is_the_users_jit():
    """`jax.jit(jnp.sin)` under `workbench run` is the user's jit: a level of its own and a
    jit step at the grad's level, as are the jits JAX derives from it (its known part, its
    transpose); jnp.sin's own jit, beside it, is the operation `sin`."""
    with T.record() as session, jax_patched():
        jax.grad(sin_twice)(jnp.ones(3))
    (call,) = session.calls
    assert [lv.label for lv in call.levels] == ["eval#0", "grad#1", "grad#1/jit#2"]
    at = f"at {FILE}:{_line('# LINE sin twice')}"
    grad_level = [step_label(s) for s in call.steps if s.level == 1]
    assert grad_level == [f"sin {at}", "jit[name=sin]", f"multiply {at}", f"reduce_sum {at}"]
    users = [s for s in call.steps if s.title == "jit[name=sin]" and not s.inline]
    assert len(users) == 3 and not any(s.library for s in users)  # grad's, known, transposed
    assert [s.phase for s in users if s.level == 0] == ["forward", "backward"]


def test_the_navigator_groups_a_levels_steps_by_module(linen_call):
    from transforms.model import Session
    outline = Outline(Session(calls=[linen_call]))
    index = outline.index(0)
    shown = []
    for i in range(len(outline)):
        kind, _, pos = outline.row(i)
        if kind == GROUP:
            shown.append(f"[{index.scope(pos)}]")
        elif kind == STEP:
            shown.append(step_label(linen_call.steps[pos]))
    at = {name: f"at {FILE}:{_line('# LINE ' + name)}"
          for name in ("query", "key", "scores", "softmax", "out", "head", "take")}
    assert shown == [
        "[MLP/attn/query]", "dot_general", "reshape", f"add {at['query']}",
        "[MLP/attn/key]", "dot_general", "reshape", f"add {at['key']}",
        "[MLP/attn]", "transpose", f"matmul {at['scores']}", f"exp {at['scores']}",
        f"reduce_sum {at['softmax']}", f"true_divide {at['softmax']}", f"matmul {at['out']}",
        "[MLP/head]", "dot_general", "reshape", f"add {at['head']}",
        "[MLP]", "squeeze",
        "convert_element_type", f"take {at['take']}", f"mean {at['take']}",
    ]
    # a module's group folds and unfolds; its steps' parent is its row
    group = next(i for i in range(len(outline)) if outline.row(i)[0] == GROUP)
    assert outline.parent_row(group + 1) == group
    assert outline.row(outline.parent_row(group))[0] == LEVEL
    before = len(outline)
    outline.toggle(group)
    assert len(outline) == before - 3
    assert outline.row_of_step(0, outline.row(group + 1)[2]) is not None  # unfolds it
    assert len(outline) == before


def test_show_of_a_saved_linen_session_names_its_modules(linen_call, tmp_path, capsys):
    from transforms.model import Session
    path = str(tmp_path / "mlp.json")
    Session(calls=[linen_call]).save(path)
    assert [c.steps == linen_call.steps for c in load(path).calls] == [True]
    assert main(["show", path]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "      in MLP/attn/query  3 steps" in out and "      in MLP/head  3 steps" in out


# --- equinox's modules, by attribute, and jax.named_scope's scopes ------------------------

def test_equinox_steps_are_grouped_by_its_modules_attributes():
    mlp = eqx.nn.MLP(2, 1, 4, 1, key=jax.random.key(0))
    x = jnp.ones((3, 2))
    with T.record() as session, jax_patched():
        eqx.filter_jit(lambda m: jax.vmap(m)(x).sum())(mlp)
    (call,) = [c for c in session.calls if c.transform == "jit"]
    # NB: counts of the MLP's own steps are JAX's: up to 0.12.0 jnp.moveaxis binds a jit
    # even where it moves nothing, from 0.12.1 it binds nothing there. Each layer is one
    # group (equinox's own scope, eqx.nn.Linear, is the same for both).
    patterns = [r"    jit#1  DynamicJaxprTrace  (\d+) steps",
                r"      in MLP/layers\[0\]  2 steps",
                r"      in MLP  (\d+) steps?",
                r"      in MLP/layers\[1\]  2 steps",
                r"      jit#1/vmap#2 \(MLP\)  BatchTrace  (\d+) steps",  # vmap of the module
                r"        in MLP/layers\[0\]  2 steps",
                r"        in MLP  (\d+) steps?",
                r"        in MLP/layers\[1\]  2 steps"]
    lines = summarize_call(call)[1:9]
    found = [re.fullmatch(p, line) for p, line in zip(patterns, lines)]
    assert all(found), lines
    level, mlp, vmap_level, vmap_mlp = [int(m.group(1)) for m in found if m and m.groups()]
    assert level == 4 + mlp + 1 and vmap_level == 4 + vmap_mlp  # and the loss's sum


def test_named_scopes_group_steps_and_transformations_are_left_out():
    def f(x):
        with jax.named_scope("encoder"):
            h = jnp.tanh(x)
        with jax.named_scope("decoder"):
            return jnp.sum(h * 2.0)

    with T.record() as session:
        T.grad(f)(jnp.ones(3))
    # NB: the step counts are JAX's (0.12 binds fewer than 0.10.2); a level's steps outside
    # any scope (grad's own) are not listed under one
    patterns = [r"  eval#0  EvalTrace  (\d+) steps?", r"    in encoder  (\d+) steps?",
                r"    in decoder  (\d+) steps?", r"    grad#1  LinearizeTrace  (\d+) steps?",
                r"      in encoder  (\d+) steps?", r"      in decoder  (\d+) steps?"]
    lines = summarize_call(session.calls[0])[1:7]
    found = [re.fullmatch(p, line) for p, line in zip(patterns, lines)]
    assert all(found), lines
    n = [int(m.group(1)) for m in found if m]
    assert 0 < n[1] + n[2] <= n[0] and 0 < n[4] + n[5] <= n[3]


class NnxModel(nnx.Module):
    def __init__(self, rngs):
        self.linear1 = nnx.Linear(2, 4, rngs=rngs)
        self.blocks = nnx.List([nnx.Linear(4, 4, rngs=rngs), nnx.Linear(4, 1, rngs=rngs)])

    def __call__(self, x):
        h = jnp.tanh(self.linear1(x))  # LINE nnx tanh
        for block in self.blocks:
            h = block(h)  # LINE nnx block
        return h.sum()  # LINE nnx sum


def test_nnx_steps_are_grouped_by_module_path_though_nnx_records_no_scope():
    model = NnxModel(nnx.Rngs(0))
    with T.record() as session, jax_patched():
        jax.jit(jax.value_and_grad(lambda m: m(jnp.ones((3, 2)))))(model)
    (call,) = session.calls
    assert {s.scope for s in call.steps} == {""}  # nnx pushes no name scope
    assert all(not step_label(s).startswith("jit[name=_") for s in call.steps)
    # the module path: the model's class, then each module's attribute, in the navigator
    # as in show; the backward pass (JAX's transpose: no module's method on the stack) in none
    outline = Outline(session)
    index = outline.index(0)
    groups: list[tuple[str, list[str]]] = []
    for i in range(len(outline)):
        kind, _, pos = outline.row(i)
        if kind == GROUP:
            groups.append((index.scope(pos), []))
        elif kind == STEP and outline.row(outline.parent_row(i))[0] == GROUP:
            groups[-1][1].append(step_label(call.steps[pos]))
    at = {name: f"at {FILE}:{_line('# LINE nnx ' + name)}" for name in ("tanh", "block", "sum")}
    layers = [("NnxModel/linear1", ["dot_general", "reshape", f"add {at['tanh']}"]),
              ("NnxModel", [f"tanh {at['tanh']}"]),
              ("NnxModel/blocks[0]", ["dot_general", "reshape", f"add {at['block']}"]),
              ("NnxModel/blocks[1]", ["dot_general", "reshape", f"add {at['block']}"]),
              ("NnxModel", [f"reduce_sum {at['sum']}"])]
    assert groups == layers * 2  # the jit's level, then value_and_grad's
    lines = summarize_call(call)  # show's
    assert lines.count("      in NnxModel/blocks[1]  3 steps") == 1
    assert lines.count("        in NnxModel/blocks[1]  3 steps") == 1  # the inner level's
    assert {s.module for s in call.steps if s.phase == "backward"} == {""}


def test_the_tower_graph_boxes_a_levels_steps_by_module(linen_call):
    from workbench.export import collect_tower
    graph = collect_tower(linen_call)
    boxes = {c.id: c for c in graph.clusters if c.kind == "scope"}
    assert [c.label for c in boxes.values()] == ["MLP/attn/query", "MLP/attn/key", "MLP/attn",
                                                 "MLP/head", "MLP"]
    assert {c.parent for c in boxes.values()} == {"cluster_L0"}
    nodes = {n.id: n for n in graph.nodes}
    assert nodes["s14"].cluster == "cluster_L0_s12"  # MLP/head's add, in MLP/head's box
    assert nodes["s14"].label.splitlines()[0] == f"#14 add at {FILE}:{_line('# LINE head')}"
    assert nodes["s17"].cluster == "cluster_L0"  # take, outside every module


def test_the_jaxpr_graph_boxes_equations_by_module_nested_by_path(linen_call):
    from transforms.model import find_stage
    from workbench.export import collect_jaxpr
    graph = collect_jaxpr(find_stage(linen_call.stages, "f"), linen_call)
    assert [(c.id, c.label, c.parent) for c in graph.clusters if c.kind == "scope"] == [
        ("cluster_scope0", "MLP", None), ("cluster_scope1", "attn", "cluster_scope0"),
        ("cluster_scope2", "query", "cluster_scope1"), ("cluster_scope3", "key", "cluster_scope1"),
        ("cluster_scope4", "head", "cluster_scope0")]
    boxed: dict[str | None, list[str]] = {}
    for node in graph.nodes:
        if node.kind == "eqn":
            boxed.setdefault(node.cluster, []).append(node.label.splitlines()[0])
    assert boxed["cluster_scope2"] == ["#0 dot_general", "#1 reshape", "#2 add"]  # MLP/attn/query
    assert boxed["cluster_scope3"] == ["#3 dot_general", "#4 reshape", "#5 add"]
    assert boxed["cluster_scope1"] == ["#6 transpose", "#7 dot_general", "#8 exp", "#9 reduce_sum",
                                       "#10 broadcast_in_dim", "#11 div", "#12 dot_general"]
    assert boxed["cluster_scope4"] == ["#13 dot_general", "#14 reshape", "#15 add"]
    assert boxed["cluster_scope0"] == ["#16 squeeze"]
    assert boxed[None] == ["#18 reduce_sum", "#19 div"]  # the loss, outside every module


def test_the_tui_lists_a_modules_steps_under_its_row_and_folds_it(linen_call):
    from tui_sessions import build_app, sync

    from transforms.model import Session
    from workbench.tui.widgets.navigator.step_list import StepList

    @sync
    async def drive():
        app = build_app(Session(calls=[linen_call]))
        async with app.run_test(size=(100, 40)) as pilot:
            steps = app.screen.query_one(StepList)
            rows = [steps.row_text(i).plain.strip() for i in range(steps.row_count)]
            assert rows[:6] == ["▾   jit(run_linen.<locals>.loss)  19 steps", "▾ jit#1  19",
                                "▾ MLP/attn/query  3", "0 dot_general  → float32[3,4]",
                                "1 reshape  → float32[1,4]",
                                f"2 add at {FILE}:{_line('# LINE query')}  → float32[3,4]"]
            assert steps.cursor == 3  # the first step
            await pilot.press("left")  # a step: to its module's row
            assert steps.cursor == 2
            await pilot.press("left")  # the module's row: folded
            assert steps.row_text(3).plain.strip() == "▾ MLP/attn/key  3"
            assert steps.row_text(2).plain.strip() == "▸ MLP/attn/query  3"
            await pilot.press("enter")  # unfolded again
            assert steps.row_count == len(rows)

    drive()


def test_a_filter_keeps_the_modules_of_the_steps_it_shows(linen_call):
    from transforms.model import Session
    from workbench.tui.navigation import StepFilter
    outline = Outline(Session(calls=[linen_call]))
    outline.filter = StepFilter.parse("p:dot_general")
    outline.rebuild()
    index = outline.index(0)
    shown = [f"[{index.scope(pos)}]" if kind == GROUP else step_label(linen_call.steps[pos])
             for kind, _, pos in map(outline.row, range(len(outline))) if kind in (GROUP, STEP)]
    assert shown == ["[MLP/attn/query]", "dot_general", "[MLP/attn/key]", "dot_general",
                     "[MLP/head]", "dot_general"]
    outline.filter = StepFilter.parse("p:take")  # `take` as listed, outside every module
    outline.rebuild()
    assert [outline.row(i)[0] for i in range(len(outline))] == [0, LEVEL, STEP]


def test_the_step_view_names_a_library_cause_as_the_navigator_lists_it():
    from rich.console import Console

    from workbench.render.step import StepView

    def loss(x):
        return jnp.sum(jnp.tanh(x))

    with T.record() as session, jax_patched():
        jax.jit(jax.grad(loss))(jnp.ones(3))
    (call,) = session.calls
    caused = next(s for s in call.steps if s.cause is not None
                  and call.steps[s.cause].library)
    cause = call.steps[caused.cause]
    console = Console(width=200, record=True)
    console.print(StepView(caused, cause=cause))
    text = console.export_text()
    assert f"caused by #{cause.index} {step_label(cause)} at" in text
    assert "jit[name=" not in text.split("caused by")[1].splitlines()[0]


def test_the_step_view_names_the_scope_a_step_ran_in():
    from rich.console import Console

    from workbench.render.step import StepView

    def f(x):
        with jax.named_scope("encoder"), jax.named_scope("layer_0"):
            return jax.lax.sin(x)

    with T.record() as session:
        T.grad(f)(1.0)
    sin = next(s for s in session.calls[0].steps if s.primitive == "sin")
    console = Console(width=200, record=True)
    console.print(StepView(sin))
    assert "name stack: jvp(encoder)/layer_0  (in encoder/layer_0)" in console.export_text()
