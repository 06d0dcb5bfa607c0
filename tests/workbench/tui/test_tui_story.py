"""Issue 15: the TUI tells each example's story, keeps the user's place, stays fast at size.

Driven with Pilot on the gallery's own recordings; what is asserted is what the
widgets draw (`render_line`) or hold, not only what the model computed.
"""
from __future__ import annotations

import dataclasses
import functools
import io
import json
import os
import subprocess
import sys
import textwrap

import pytest
from rich.console import Console
from tui_sessions import seed_convolve, seed_logistic, sync, wait_until

from transforms.model import Session
from workbench.gallery import find, run_example
from workbench.run._watch import Watch
from workbench.tui import build_app as _build_app, build_gallery_app
from workbench.tui.navigation import CALL, Outline, call_labels, composed_label, pack, step_haystack
from workbench.tui.screens.picker import PickerScreen
from workbench.tui.screens.session import SessionScreen
from workbench.tui.widgets.common.status_bar import StatusBar
from workbench.tui.widgets.common.text_lines import TextLines
from workbench.tui.widgets.navigator.step_list import StepList
from workbench.tui.widgets.pytree.pytree_pane import PytreePane
from workbench.tui.widgets.stages.stages_pane import StagesPane

SIZE = (120, 40)


def build_app(*args, **kwargs):
    app = _build_app(*args, **kwargs)
    app.animation_level = "none"
    return app


@functools.lru_cache(maxsize=None)
def example(name: str) -> Session:
    outcome = run_example(find(name))
    assert outcome.ok, outcome.error
    return outcome.session


def shown(widget) -> str:
    """What a LineList draws now."""
    return "\n".join(widget.render_line(y).text.rstrip() for y in range(widget.size.height))


def text_of(widget) -> str:
    console = Console(width=300, color_system=None, file=io.StringIO(), record=True)
    console.print(widget.content)
    return console.export_text()


def status(app) -> str:
    return text_of(app.screen.query_one(StatusBar))


async def select_call(app, pilot, call: int) -> None:
    steps = app.screen.query_one(StepList)
    steps.set_cursor(steps.outline.find(pack(CALL, call, 0)))
    await pilot.pause()


# --- 1 and 3: the pytree view shows every line, with values -------------------------

@sync
async def test_pytree_view_shows_the_scalar_output_leaf_and_its_value():
    app = build_app(example("grad_tanh"), title="grad of tanh")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        text = shown(app.screen.query_one(PytreePane))
        assert "out: float32[] = 0.0706508" in text  # the last line of the last tree
        assert "float32[] = 2.0" in text and "x (gradient)" in text


@sync
async def test_pytree_view_shows_the_ntcontainer_gradient_with_its_ones():
    app = build_app(example("ntcontainer_fixed"), title="NTContainer")
    async with app.run_test(size=SIZE) as pilot:
        await select_call(app, pilot, 2)  # grad(test_func)
        await pilot.press("3")
        text = shown(app.screen.query_one(PytreePane))
        assert "container (gradient)" in text
        assert ".array" in text and "float32[3,2] = [[1. 1.] [1. 1.] [1. 1.]]" in text
        assert "name='composite-container', flag=0" in text  # the static members


@sync
async def test_pytree_view_of_the_jit_and_vmap_calls_shows_their_outputs():
    app = build_app(example("ntcontainer_fixed"), title="NTContainer")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        # jit records its output as traced (its trees are recorded while it traces), with
        # its value replayed once the trace is over
        assert "out: float32[]  traced JitTracer(float32[]) = " in shown(
            app.screen.query_one(PytreePane))
        await select_call(app, pilot, 1)
        assert "out: float32[3] = [1. 5. 9.]" in shown(app.screen.query_one(PytreePane))


@sync
async def test_pytree_view_scrolls_to_the_last_row_of_a_long_tree():
    session = seed_logistic()
    app = build_app(session)
    async with app.run_test(size=(100, 12)) as pilot:
        await pilot.press("3")
        pane = app.screen.query_one(PytreePane)
        pane.focus()
        await pilot.press("end")
        text = shown(pane)
        assert "out (output)" in text and "[1]: float32[4] = [-0.316695" in text  # the last


@sync
async def test_big_concrete_leaves_show_summary_statistics():
    import jax.numpy as jnp

    import transforms as T
    with T.record() as session:
        T.grad(lambda w: jnp.sum(jnp.tanh(w)))(jnp.linspace(0.0, 1.0, 1000))
        T.vmap(lambda x: x > 0.5)(jnp.linspace(0.0, 1.0, 100))  # over 64: counted
    app = build_app(session)
    async with app.run_test(size=(160, 30)) as pilot:
        await pilot.press("3")
        text = shown(app.screen.query_one(PytreePane))
        assert "float32[1000] = ≈0.5 ±0.289 [≥0, ≤1]" in text
        await select_call(app, pilot, 1)
        assert "bool[100] = true: 50 of 100" in shown(app.screen.query_one(PytreePane))


# --- 2: the story: description and printed output ------------------------------------

@sync
async def test_the_session_shows_its_description_and_printed_output():
    session = example("ntcontainer_fixed")
    app = build_app(session, title="NTContainer")
    async with app.run_test(size=SIZE) as pilot:
        story = text_of(app.screen.query_one("#story"))
        assert "grad returns an NTContainer" in " ".join(story.split())
        await pilot.press("6")
        out = shown(app.screen.query_one("#output-pane", TextLines))
        assert out.startswith("What it shows\nWith repack_NTC fixed")
        assert "What it printed\n15.0\n[1. 5. 9.]\nNTContainer(name=" in out
        assert app.screen.steps.has_focus


@sync
async def test_the_seed_000_output_names_the_fix():
    app = build_app(example("ntcontainer_broken"), title="broken")
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("6")
        await pilot.pause()  # NB: on a loaded machine the pane may not have drawn yet
        out = shown(app.screen.query_one("#output-pane", TextLines))
        assert "NameError: name 'value' is not defined" in out
        # the pane wraps the hint where the file's path (the checkout's) leaves room
        assert "it should use `array`" in " ".join(out.split())


@sync
async def test_the_tracers_example_prints_its_vmap_tracer():
    app = build_app(example("print_tracers"), title="tracers")
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.press("6")
        assert "VmapTracer(aval=int32[], batched=int32[3])" in shown(
            app.screen.query_one("#output-pane", TextLines))


@sync
async def test_the_picker_shows_the_highlighted_examples_description_and_g_goes_last():
    gallery = [("grad of tanh", example("grad_tanh")),
               ("NTContainer", example("ntcontainer_fixed"))]
    app = build_app(gallery)
    async with app.run_test(size=(100, 20)) as pilot:
        assert isinstance(app.screen, PickerScreen)
        assert "jax.grad takes a scalar-valued function" in text_of(app.screen.query_one("#about"))
        await pilot.press("G")
        assert "NTContainer" in " ".join(text_of(app.screen.query_one("#about")).split())
        await pilot.press("g")
        await pilot.press("enter")
        assert isinstance(app.screen, SessionScreen) and app.screen.session_title == "grad of tanh"


# --- 4: composed labels, equal ones told apart ---------------------------------------

def test_labels_keep_the_composition():
    assert composed_label(example("per_example_grads").calls[0]) == "vmap(grad(example_loss))"
    assert [composed_label(c) for c in example("higher_derivatives").calls] == [
        "grad(cubic)", "grad(grad(cubic))", "grad(grad(grad(cubic)))"]
    assert composed_label(example("loop_vs_vmap").calls[1]) == "jit(vmap(convolve))"
    # custom rule levels are not transformations the user applied
    assert composed_label(example("primal_tangent_mismatch").calls[1]) == "grad(program)"


def test_equal_labels_are_told_apart_by_their_line():
    session = example("grad_control_flow")
    labels = call_labels(session)
    assert labels[0] != labels[1]
    assert labels[0].startswith("grad(piecewise) at _grad_and_vmap.py:")
    assert labels[2] == "grad(sqrt_newton)"
    first = session.calls[0]
    looped = Session(calls=[first, dataclasses.replace(first, index=59)])
    # by index, as `show` and `graph --call` number calls (with calls dropped, not positions)
    assert call_labels(looped) == ["grad(piecewise) (call 0)", "grad(piecewise) (call 59)"]


@sync
async def test_the_navigator_shows_composed_labels():
    app = build_app(example("higher_derivatives"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("home", "enter", "down", "enter")  # fold the first two calls
        text = shown(app.screen.query_one(StepList))
        assert "grad(grad(grad(cubic)))" in text and "grad(grad(cubic))" in text


# --- 5: keys keep the user's place ----------------------------------------------------

@sync
async def test_view_keys_keep_the_navigators_focus_and_arrows_keep_moving():
    app = build_app(seed_logistic())
    async with app.run_test(size=SIZE) as pilot:
        steps = app.screen.query_one(StepList)
        for key in ("2", "3", "4", "1", "6", "2"):
            before = steps.cursor
            await pilot.press(key, "down")
            assert steps.has_focus, key
            assert steps.cursor == before + 1, key
        # the stages view's keys work from the navigator too
        pane = app.screen.query_one(StagesPane)
        a = pane.pair.a
        await pilot.press("a")
        assert pane.pair.a != a and steps.has_focus


@sync
async def test_the_views_follow_the_cursor_after_a_filter_is_cleared():
    app = build_app(example("higher_derivatives"))
    async with app.run_test(size=SIZE) as pilot:
        steps = app.screen.query_one(StepList)
        for keys in (["f", *"l:grad#3", "enter"], ["f", *["backspace"] * 8, "enter"],
                     ["down"] * 5, ["f", *"zzz"], ["f", *["backspace"] * 3, "enter"]):
            await pilot.press(*keys)
            await pilot.pause()
            call, step = steps.current()
            assert (app.screen.call_index, app.screen.step_pos) == (call, step), keys


@sync
async def test_growth_key_goes_to_the_call_that_has_growth_data():
    """Issue 36, item 8: `w` on a call without growth goes to the call that has it."""
    app = build_app(example("loop_vs_vmap"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2", "w")
        await pilot.pause()
        assert "growth with batch size: call 3 vmap(convolve)" in status(app)
        assert app.screen.call_index == 3
        assert "Python loop" in text_of(app.screen.query_one("#stage-extra-body"))


@sync
async def test_a_session_without_failures_offers_no_next_failure():
    app = build_app(seed_convolve())
    async with app.run_test(size=SIZE) as pilot:
        bar = text_of(app.screen.query_one("#keys"))
        assert "Next failure" not in bar
        assert "Next failing step" not in [c[0] for c in app.screen.commands()]
        await pilot.press("4")
        body = text_of(app.screen.query_one("#failure-body"))
        assert "ran without error" in body and "No call of this session failed" in body


@sync
async def test_a_session_with_failures_points_at_them():
    app = build_app(example("primal_tangent_mismatch"))
    async with app.run_test(size=SIZE) as pilot:
        assert "Next failure" in text_of(app.screen.query_one("#keys"))
        await pilot.press("4")
        body = text_of(app.screen.query_one("#failure-body"))
        assert "Failed: calls 1 grad(program), 2 jvp(program)" in body


@sync
async def test_the_step_marks_have_a_legend():
    app = build_app(example("primal_tangent_mismatch"))
    async with app.run_test(size=SIZE):
        legend = text_of(app.screen.query_one("#legend"))
        assert "← backward pass" in legend and "ʳ inside a custom_jvp/custom_vjp rule" in legend
        assert "✗ failed" in legend


def test_a_level_recorded_twice_is_listed_once():
    session = example("primal_tangent_mismatch")
    outline = Outline(session)
    labels = [session.calls[c].levels[i].label for k, c, i in map(outline.row, range(len(outline)))
              if k == 1 and c == 0 and i < len(session.calls[c].levels)]
    assert labels.count("jit#1/custom_jvp_fun#2") == 1


@sync
async def test_stage_stats_put_each_stage_on_its_own_rows():
    app = build_app(seed_logistic())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2", "t")
        lines = text_of(app.screen.query_one("#stage-extra-body")).splitlines()
        pane = app.screen.query_one(StagesPane)
        names = [pane.left.stage.name, pane.right.stage.name]
        assert [line.strip() for line in lines if line.strip() in names] == names


# --- 6: locations are the user's frames ---------------------------------------------

def test_gallery_locations_are_the_examples_own_lines():
    for name in ("primal_tangent_mismatch", "ntcontainer_broken", "absolute_vmap",
                 "jit_grad_control_flow"):
        for call in example(name).calls:
            places = [call.source] + [e.source for e in call.errors] + [
                s.source for s in call.steps]
            files = {os.path.basename(p.file) for p in places if p is not None}
            assert "_registry.py" not in files, (name, call.index, files)
    broken = example("ntcontainer_broken")
    assert {c.errors[0].source.function for c in broken.calls} == {"repack_NTC"}
    assert all(c.source.function == "ntcontainer_broken" for c in broken.calls)


# --- 7: exports go into one folder, named after session and call ---------------------

@sync
async def test_exports_land_in_the_export_folder_named_after_session_and_call(tmp_path,
                                                                             monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = build_app(example("higher_derivatives"), title="derivatives")
    async with app.run_test(size=SIZE) as pilot:
        await select_call(app, pilot, 1)
        await pilot.press("e")
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("s")
    folder = tmp_path / "workbench-exports"
    names = sorted(p.name for p in folder.iterdir())
    assert [p.name for p in tmp_path.iterdir()] == ["workbench-exports"]
    json_name = next(n for n in names if n.endswith(".json"))
    assert json_name.startswith("derivatives") and "call1-grad-grad-cubic" in json_name
    assert any(n.endswith("-step.svg") and "call1" in n for n in names)


# --- 8: speed and imports --------------------------------------------------------------

def test_search_finds_what_a_step_by_step_search_finds():
    session = seed_logistic()
    outline = Outline(session)
    for query in ("mul", "tanh", "grad#2", "vmap", "float32[4]", "zzz", "example_loss"):
        want = []
        for j in range(len(outline)):
            kind, c, i = outline.row(j)
            call = session.calls[c]
            if kind == 2:
                hay = step_haystack(call.steps[i], outline.index(c).label(call.steps[i].level))
            elif kind == 1:
                lv = call.levels[i]
                hay = f"{lv.label} {lv.kind} {lv.trace_type}".lower()
            else:
                hay = outline.call_label(c).lower()
            if query.lower() in hay:
                want.append(j)
        assert outline.search(query) == want, query


def test_the_tui_imports_no_jax(tmp_path):
    """Opening a dump, drawing each view and quitting never imports JAX from workbench.tui.

    `transforms` is stood in for by its bare package, so this holds whatever
    transforms/__init__.py imports (the read-only commands' own test covers that)."""
    path = tmp_path / "s.json"
    example("ntcontainer_fixed").save(path)
    code = textwrap.dedent(f"""
        import asyncio, json, sys, types, os
        import importlib.util
        spec = importlib.util.find_spec("transforms")
        stub = types.ModuleType("transforms")
        stub.__path__ = list(spec.submodule_search_locations)
        sys.modules["transforms"] = stub
        from transforms.model import load
        from workbench.tui import build_app
        app = build_app(load({str(path)!r}), title="t")
        async def main():
            async with app.run_test(size=(100, 30)) as pilot:
                for key in ("down", "2", "3", "4", "6", "1", "slash", "s", "i", "enter", "n"):
                    await pilot.press(key)
                await pilot.pause()
        asyncio.run(main())
        print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("jax", "jaxlib"))))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_the_import_probe_would_see_jax(tmp_path):
    """The probe above can fail: importing JAX is seen."""
    code = "import sys, json, jax; print(json.dumps(sorted(m for m in sys.modules if m == 'jax')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["jax"]


# --- 9: the picker at once; --watch ---------------------------------------------------

@sync
async def test_the_picker_shows_at_once_and_opens_an_entry_when_it_is_recorded():
    import threading
    release = threading.Event()
    recorded: list[int] = []

    def record(i: int) -> Session:
        release.wait(10)
        recorded.append(i)
        return example("ntcontainer_fixed") if i == 2 else example("grad_tanh")

    app = build_gallery_app([("grad of tanh", "the first"), ("tanh again", "the second"),
                             ("NTContainer", "the third")], record)
    app.animation_level = "none"
    async with app.run_test(size=(100, 20)) as pilot:
        assert isinstance(app.screen, PickerScreen)
        options = app.screen.query_one("#sessions")
        assert "recording…" in str(options.get_option_at_index(2).prompt)
        assert "the first" in text_of(app.screen.query_one("#about"))
        await pilot.press("G", "enter")  # not recorded yet: it opens when it is
        assert "it opens when ready" in text_of(app.screen.query_one(StatusBar))
        release.set()
        await wait_until(pilot, lambda: isinstance(app.screen, SessionScreen),
                         "the entry asked for to open once recorded")
        assert app.screen.session_title == "NTContainer"
        await app.workers.wait_for_complete()  # the last entry recorded
        await pilot.pause()  # and the new screen settled before the app shuts down
        # the one under way (0) finishes, then the one asked for goes before the others
        assert recorded[:2] == [0, 2]


SCRIPT = """\
import jax
import jax.numpy as jnp

def loss(w):
    return jnp.sum(jnp.{fn}(w) ** 2)

print("grad:", jax.grad(loss)(jnp.ones(3)))
"""


def test_watch_records_a_script_in_a_fresh_process_with_its_output(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(fn="tanh"))
    recording = Watch(str(script)).record()
    assert recording.session is not None, recording.note
    assert [composed_label(c) for c in recording.session.calls] == ["grad(loss)"]
    assert "grad: [" in recording.session.metadata["output"]
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    failed = Watch(str(broken)).record()
    assert failed.session is None and "SyntaxError" in failed.note


@pytest.mark.slow
@sync
async def test_run_watch_refreshes_the_open_ui_in_place_keeping_the_selection(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(fn="tanh"))
    watch = Watch(str(script), interval=0.1)
    first = watch.record()
    assert first.session is not None, first.note
    app = build_app(first.session, title="train.py", watch=watch)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("down", "down", "3")
        before = app.screen
        place = before.current_place()
        assert place.step is not None
        # NB: the script's size changes too, so the watch sees it whatever the clock's
        # resolution for its modification time.
        script.write_text(SCRIPT.format(fn="sin") + 'print("second run")\n')
        await wait_until(pilot, lambda: app.screen is not before and
                         isinstance(app.screen, SessionScreen),
                         "the UI to show the new recording after the script changed",
                         timeout=60)
        screen = app.screen
        await pilot.pause()
        assert any(s.primitive.endswith("sin") or "sin" in s.title
                   for s in screen.session.calls[0].steps)
        assert (screen.call_index, screen.step_pos, screen.active_view) == (
            place.call, place.step, "pytree")
        assert screen.steps.has_focus
        assert "re-recorded" in text_of(screen.query_one(StatusBar))
        await pilot.press("6")
        assert "second run" in shown(screen.query_one("#output-pane", TextLines))


def test_tree_rows_are_made_on_demand_and_searched_by_their_text():
    import dataclasses

    from transforms.model import TreeNode
    from workbench.tui.tree_rows import call_tree_rows, wrap
    call = example("ntcontainer_fixed").calls[2]
    rows = call_tree_rows(call, width=60)
    texts = [rows[i].plain for i in range(len(rows))]
    assert any("[[1. 1.]" in t for t in texts)  # NumPy's print, wrapped, not cut
    for query in ("array", "static", "gradient", "zzz"):
        found = rows.search(query)
        assert found == [i for i, t in enumerate(texts) if query in t.lower()], query
    # a value found across a wrap: its entry's first row
    assert rows.search("[[0. 1.] [2. 3.] [4. 5.]]")
    assert wrap("float32[3] = [1., 2., 3.]", 12) == ["float32[3] =", "[1., 2., 3.]"]
    assert wrap("float32[3] = [1., 2., 3.]", 9) == ["float32[3", "] = [1.,", "2., 3.]"]
    # 10,000 leaves: rows for all of them, without making each row's pieces
    tree = call.trees[0]
    leaves = [TreeNode(0, None, 0, "", "", "node", "dict", children=tuple(range(1, 10_001)))] + [
        TreeNode(i + 1, 0, 1, f"['w{i}']", f"['w{i}']", "leaf", "jax.Array", aval="float32[]",
                 value=str(i)) for i in range(10_000)]
    big = dataclasses.replace(call, trees=(dataclasses.replace(tree, nodes=tuple(leaves)),),
                              pairs=())
    many = call_tree_rows(big)
    assert len(many) == 10_003 and many[10_001].plain.endswith("['w9999']: float32[] = 9999")
    assert many.search("w9999") == [10_001]


# --- issue 36, item 6: a call that failed before JAX traced it -----------------------

@sync
async def test_a_call_that_failed_before_tracing_is_not_said_to_have_stages_off():
    app = build_app(example("ntcontainer_broken"))
    async with app.run_test(size=(140, 40)) as pilot:
        await select_call(app, pilot, 0)  # jit(test_func): could not flatten its argument
        await pilot.press("2")
        await app.workers.wait_for_complete()
        await pilot.pause()
        head = app.screen.query_one(StagesPane).query_one("#stage-head")
        assert text_of(head).strip() == \
            "this call recorded no stages (the call failed before JAX traced it)"


# --- issue 36, item 4: a jaxpr printed in colour ---------------------------------------

@sync
async def test_the_story_shows_a_jaxpr_printed_in_colour_as_plain_text():
    # JAX prints jaxprs in colour when it was imported on a terminal (the TUI's)
    printed = ("{ \x1b[34;1mlambda \x1b[39;22m; a\x1b[35m:f32[]\x1b[39m. \x1b[34;1mlet"
               "\x1b[39;22m b\x1b[35m:f32[]\x1b[39m = sin a \x1b[34;1min\x1b[39;22m (b,) }\n"
               "title \x1b]0;pwned\x07\n")
    session = dataclasses.replace(example("trace_jaxpr"), metadata={"output": printed})
    app = build_app(session, title="coloured")
    async with app.run_test(size=(100, 20)) as pilot:
        await pilot.press("6")
        out = shown(app.screen.query_one("#output-pane", TextLines)).strip().splitlines()
        assert out[:3] == ["What it printed", "{ lambda ; a:f32[]. let b:f32[] = sin a in (b,) }",
                           "title \\x1b]0;pwned\\x07"]


# --- issue 36, item 7: keys that did not do what help says -----------------------------

@sync
async def test_z_hides_and_brings_back_the_navigator_from_the_stages_view():
    from textual.widgets import Input

    from workbench.tui.widgets.navigator.navigator import Navigator
    app = build_app(example("loop_vs_vmap"))
    async with app.run_test(size=SIZE) as pilot:
        nav = app.screen.query_one(Navigator)
        await pilot.press("2", "G", "z")
        assert not nav.display
        await pilot.press("z")
        assert nav.display
        await pilot.press("z")
        assert not nav.display  # not typed into the filter box
        assert app.screen.query_one("#filter", Input).value == ""


@sync
async def test_l_and_right_unfold_a_call_folded_with_h():
    app = build_app(example("loop_vs_vmap"))
    async with app.run_test(size=SIZE) as pilot:
        steps = app.screen.query_one(StepList)
        await pilot.press("home", "h")
        assert shown(steps).splitlines()[0].startswith("▸   jit(convolve)")
        await pilot.press("l")
        assert shown(steps).splitlines()[:2] == ["▾   jit(convolve)  10 steps",
                                                 "    ▾ jit#1  10"]
        await pilot.press("h", "right")
        assert shown(steps).splitlines()[0] == "▾   jit(convolve)  10 steps"
