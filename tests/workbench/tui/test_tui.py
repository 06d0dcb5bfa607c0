"""The TUI's behaviour, driven with Pilot: navigate, filter, search, switch views, export, help."""
from __future__ import annotations

import dataclasses
import io
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest
from rich.console import Console
from textual.command import CommandList
from textual.widgets import Static
from tui_sessions import (
    SIZE,
    build_app,
    corpus_session,
    random_session,
    seed_absolute,
    seed_logistic,
    status_text as _status,
    sync,
    wait_until,
    widget_text as _text,
)

import transforms
from workbench.tui.navigation import STEP, Selection
from workbench.tui.screens.help import HelpScreen, _keys, key_sections
from workbench.tui.screens.picker import PickerScreen
from workbench.tui.screens.session import SessionScreen
from workbench.tui.widgets.common.line_list import LineList
from workbench.tui.widgets.navigator.step_list import StepList
from workbench.tui.widgets.pytree.pytree_pane import PytreePane
from workbench.tui.widgets.stages.stages_pane import StagesPane
from workbench.tui.widgets.step.step_pane import StepPane


def _step_body(app) -> str:
    return _text(app.screen.query_one(StepPane).query_one("#step-body"))


def _shown_lines(widget) -> list[str]:
    """The lines a LineList draws now, as text."""
    return [widget.render_line(y).text.rstrip() for y in range(widget.size.height)]


def _current_step(app):
    steps = app.screen.query_one(StepList)
    call, pos = steps.current()
    return None if pos is None else app.screen.session.calls[call].steps[pos]


@sync
async def test_navigate_steps_and_views():
    app = build_app(seed_logistic(), title="t")
    async with app.run_test(size=SIZE) as pilot:
        steps = app.screen.query_one(StepList)
        assert steps.has_focus
        first = _current_step(app)
        assert first is not None and first.primitive in _step_body(app)
        await pilot.press("down", "down")
        step = _current_step(app)
        assert step.index != first.index and step.primitive in _step_body(app)
        await pilot.press("end")
        assert steps.cursor == steps.row_count - 1
        await pilot.press("home")
        assert steps.cursor == 0 and "vmap(grad(example_loss))" in _step_body(app)
        await pilot.press("enter")  # fold the call
        assert steps.row_count == 1
        await pilot.press("enter", "pagedown")
        assert steps.row_count > 1 and steps.cursor > 0
        for key, view in (("2", "stages"), ("3", "pytree"), ("4", "failure"), ("1", "step")):
            await pilot.press(key)
            assert app.screen.active_view == view


@sync
async def test_step_view_shows_the_tracer_tower_and_source():
    app = build_app(seed_logistic())
    async with app.run_test(size=(120, 60)) as pilot:
        await pilot.press("/", *"tanh", "enter")
        step = _current_step(app)
        # The first tanh is at the innermost level: grad's tracer holding vmap's batched value.
        while "grad" not in app.screen.steps.outline.index(0).label(step.level):
            await pilot.press("n")
            step = _current_step(app)
        body = _step_body(app)
        assert "GradTracer" in body and "primal: VmapTracer" in body
        assert "batched value: float32[4]" in body
        assert "return 0.5 * (jnp.tanh(x / 2) + 1)" in body


@sync
async def test_filter_by_primitive_and_errors():
    app = build_app(seed_absolute())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f", *"p:gt", "enter")
        steps = app.screen.query_one(StepList)
        assert steps.has_focus
        o = steps.outline
        prims = {app.screen.session.calls[c].steps[i].primitive
                 for c, i in ((o.row(r)[1], o.row(r)[2]) for r in range(len(o)) if o.row(r)[0] == STEP)}
        assert prims == {"gt"}
        assert "filter 'p:gt'" in _status(app)


@sync
async def test_search_next_and_previous():
    app = build_app(seed_logistic())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("/", *"mul", "enter")
        steps = app.screen.query_one(StepList)
        assert len(steps.matches) > 2
        first = steps.cursor
        assert "mul" in _current_step(app).primitive
        await pilot.press("n")
        assert steps.cursor == steps.matches[steps.matches.index(first) + 1]
        await pilot.press("N")
        assert steps.cursor == first
        assert "match" in _status(app)


@sync
async def test_search_in_stage_text():
    app = build_app(seed_logistic())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        pane = app.screen.query_one(StagesPane)
        assert app.screen.steps.has_focus  # a view key keeps the navigator's focus
        await pilot.press("tab")  # the stages view's left text is next
        assert pane.left.has_focus and pane.left.stage.name == "f"
        await pilot.press("/", *"log", "enter")
        assert pane.left.matches and "log" in pane.left.lines[pane.left.cursor]
        await pilot.press("n")
        assert "log" in pane.left.lines[pane.left.cursor].lower()


@sync
async def test_a_jits_stages_open_on_its_jaxpr_and_the_stablehlo_it_lowers_to():
    with transforms.record() as session:
        transforms.jit(lambda x: jnp.sum(x ** 2))(jnp.arange(3.0))
    app = build_app(session)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        pane = app.screen.query_one(StagesPane)
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert (pane.left.stage.name, pane.right.stage.name) == ("f", "stablehlo(jit(f))")
        assert "stablehlo.reduce" in "\n".join(pane.right.lines)
        assert ("side by side: f and stablehlo(jit(f)) (no equations to align: "
                "stablehlo(jit(f)) is compiled text)") in _text(pane.query_one("#stage-head"))


@sync
async def test_step_selects_its_equation_and_back():
    app = build_app(seed_logistic())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("/", *"p:tanh", "escape")  # closing the bar keeps the cursor
        await pilot.press("/", *"tanh", "enter")
        await pilot.press("2")
        pane = app.screen.query_one(StagesPane)
        assert "tanh" in pane.left.lines[pane.left.cursor]
        assert "tanh" in pane.right.lines[pane.right.cursor]
        # enter on an equation goes back to a step that made it
        await pilot.press("tab", "down", "down", "down")
        line = pane.left.lines[pane.left.cursor]
        await pilot.press("enter")
        assert app.screen.active_view == "step"
        step = _current_step(app)
        assert step.primitive in line


@sync
async def test_stages_pick_diff_and_stats():
    app = build_app(seed_logistic())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        pane = app.screen.query_one(StagesPane)
        await app.workers.wait_for_complete()  # the diff of the two stages
        await pilot.pause()
        assert pane.right.marks  # grad added equations: marked on the right
        assert "added" in _text(pane.query_one("#stage-head"))
        await pilot.press("a")
        assert pane.left.stage.name == "jvp(f)"
        await pilot.press("B")
        assert pane.right.stage.name == "grad(f)"
        await app.workers.wait_for_complete()
        await pilot.press("d")
        assert pane.has_class("-diff")
        await pilot.press("d", "t")
        assert "equations" in _text(pane.query_one("#stage-extra-body"))


@sync
async def test_failure_view_and_jump_to_failing_step():
    app = build_app(seed_absolute())
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("4")
        body = _text(app.screen.query_one("#failure-body"))
        assert "TracerBoolConversionError" in body and "hint" in body
        assert "if x > 0" in body
        await pilot.press("tab")  # into the failure pane
        app.screen.query_one("#failure-pane").focus()
        await pilot.press("enter")
        step = _current_step(app)
        assert app.screen.active_view == "step"
        assert step.index in app.screen.steps.outline.index(0).failing
        await pilot.press("home", "x")
        assert _current_step(app).index in app.screen.steps.outline.index(0).failing


@sync
async def test_pytree_view_pairs_leaves():
    app = build_app(seed_logistic())
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("3")
        body = "\n".join(_shown_lines(app.screen.query_one(PytreePane)))
        # Each input tree by its parameter name, with its leaves' avals and small values as
        # NumPy prints them.
        assert "W (input)" in body and "W: float32[3] = [ 0.1  0.4 -0.3]" in body


@sync
async def test_export_json_graph_and_svg(tmp_path):
    app = build_app(seed_logistic(), export_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("e")
        await app.workers.wait_for_complete()
        await pilot.pause()
        files = list(tmp_path.glob("*.json"))
        assert len(files) == 1 and "wrote call 0" in _status(app)
        loaded = transforms.load(files[0])
        assert loaded.calls[0].steps == seed_logistic().calls[0].steps
        await pilot.press("i")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert "graph" in _status(app)  # written, or said to be unavailable
        await pilot.press("s")
        (view,) = tmp_path.glob("*-step.svg")
        # kept spaces: librsvg drops a run's leading non-breaking spaces without it (issue 36)
        assert view.read_text().startswith('<svg xml:space="preserve" ')


@sync
async def test_export_to_a_missing_folder_says_so(tmp_path):
    (tmp_path / "a-file").write_text("in the way")
    app = build_app(seed_logistic(), export_dir=tmp_path / "a-file" / "exports")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("e")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert "export failed" in _status(app)


@sync
async def test_help_lists_every_key_and_closes():
    app = build_app(seed_logistic())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        shown = " ".join(k for _, keys in key_sections() for k, _ in keys)
        for binding in SessionScreen.BINDINGS + StepList.BINDINGS + StagesPane.BINDINGS:
            assert _keys(binding.key).split(",")[0] in shown
        await pilot.press("escape")
        assert isinstance(app.screen, SessionScreen)


@sync
async def test_command_palette_runs_product_commands():
    app = build_app(seed_logistic())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+p")
        await pilot.press(*"Stages view")
        found = app.screen.query_one(CommandList)
        await wait_until(pilot, lambda: found.highlighted is not None,
                         "the palette to list what it found")
        await app.workers.wait_for_complete()  # the palette's search, to its last match
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen.active_view == "stages"


@sync
async def test_quit_keys():
    for key in ("q", "ctrl+q"):
        app = build_app(seed_logistic())
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press(key)
        assert app.return_code == 0


@sync
async def test_gallery_picker_opens_and_returns():
    app = build_app([("logistic", seed_logistic()), ("absolute", seed_absolute())])
    async with app.run_test(size=SIZE) as pilot:
        assert isinstance(app.screen, PickerScreen)
        await pilot.press("down", "enter")
        assert isinstance(app.screen, SessionScreen)
        assert app.screen.session is seed_absolute()
        await pilot.press("escape")
        assert isinstance(app.screen, PickerScreen)
        await pilot.press("enter", "o")
        assert isinstance(app.screen, PickerScreen)


@sync
async def test_resizes_and_small_terminals():
    app = build_app(seed_logistic())
    async with app.run_test(size=SIZE) as pilot:
        for size in ((40, 12), (200, 60), (80, 24)):
            await pilot.resize_terminal(*size)
            await pilot.press("2", "d", "down", "1", "down")
            assert app.screen.query_one(StepList).size.height > 0


@pytest.mark.slow
@sync
async def test_never_crashes_on_corpus_sessions():
    s = corpus_session()
    app = build_app(s)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        steps = screen.query_one(StepList)
        console = Console(width=100, file=io.StringIO(), color_system=None, record=True)
        for row in range(steps.row_count):
            steps.row_text(row)
        for c, call in enumerate(s.calls):
            if call.steps:
                steps.select_step(c, len(call.steps) // 2)
            for view in ("stages", "pytree", "failure", "step"):
                screen.action_view(view)
            await pilot.pause()
            for pos in range(0, len(call.steps), 5):
                screen.selection = Selection(c, pos)
                console.print(screen.query_one(StepPane).query_one("#step-body").content)
        await pilot.press("2", "d", "t", "end", "1", "end", "x", "3", "4")
        assert "render-error" not in console.export_text()


def render_errors(screen) -> list[str]:
    """The `<render-error ...>` placeholders the screen's panes would draw: each Static's
    content (a guarded renderer draws inside a try and shows the placeholder) and each
    row of each list (a row that raises is drawn as one)."""
    console = Console(width=100, file=io.StringIO(), color_system=None, record=True)
    for static in screen.query(Static):
        console.print(static.content)
    for rows in screen.query(LineList):
        for row in range(rows.row_count):
            try:
                console.print(rows.row_text(row))
            except Exception as e:
                console.print(f"<render-error row {row}: {type(e).__name__}: {e}>")
    return [line for line in console.export_text().splitlines() if "render-error" in line]


async def _every_view_of_every_step(s, pilot) -> list[str]:
    """Show each step of each call in each view; the render errors the panes would show."""
    screen = pilot.app.screen
    await pilot.press("end", "x", "2", "d", "t", "c", "a", "b", "enter", "4", "enter")
    screen.query_one("#filter").value = "p:s is:error"
    await pilot.press("3", "/", "a", "enter", "n", "N", "home", "left", "right")
    errors = render_errors(screen)
    for c, call in enumerate(s.calls):
        for pos in range(len(call.steps)):
            screen.selection = Selection(c, pos)
            for view in ("step", "stages", "pytree", "failure"):
                screen.action_view(view)
            errors += render_errors(screen)
    await pilot.pause()
    return errors + render_errors(screen)


@pytest.mark.parametrize("seed", [0, *(pytest.param(s, marks=pytest.mark.slow) for s in range(1, 8))])
@sync
async def test_never_crashes_on_random_sessions(seed):
    s = random_session(seed)
    app = build_app(s)
    async with app.run_test(size=SIZE) as pilot:
        assert await _every_view_of_every_step(s, pilot) == []


@sync
async def test_the_random_session_check_sees_a_failing_renderer(monkeypatch):
    """The guard keeps a failing renderer from crashing the TUI: the test above must still
    see its placeholder."""
    from workbench.render.step import StepView

    def broken(self, console, options):
        raise RuntimeError("broken on purpose")
    monkeypatch.setattr(StepView, "__rich_console__", broken)
    s = next(random_session(seed) for seed in range(8)
             if any(call.steps for call in random_session(seed).calls))
    app = build_app(s)
    async with app.run_test(size=SIZE) as pilot:
        errors = await _every_view_of_every_step(s, pilot)
    assert errors and all("broken on purpose" in e for e in errors)


def test_import_workbench_stays_light():
    code = "import sys, workbench; assert callable(workbench.show); " \
           "assert 'textual' not in sys.modules, 'workbench imported textual'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_key_bar_line_lists_each_action_once_with_its_columns():
    from textual.binding import Binding

    from workbench.tui.widgets.common.key_bar import key_line
    app, screen = object(), object()
    bindings = [(screen, Binding("2", "view('stages')", "Stages")),
                (screen, Binding("slash", "search", "Search")),
                (screen, Binding("n", "next_match(True)", "Next match", show=False)),
                (app, Binding("question_mark", "help", "Help")),
                (app, Binding("f1", "help", "Help")),
                (app, Binding("ctrl+q", "quit", "Quit"))]
    line, spans = key_line(bindings, "bold", palette=True)
    assert line.plain == " 2 Stages  / Search  ? Help  ^q Quit   ^p palette"
    assert [(s.start, s.end, s.binding.action) for s in spans] == [
        (0, 10, "view('stages')"), (10, 20, "search"), (20, 28, "help"), (28, 37, "quit")]
    assert spans[0].node is screen and spans[2].node is app


@sync
async def test_key_bar_shows_the_focused_panes_keys_and_runs_a_clicked_key():
    from workbench.tui.widgets.common.key_bar import KeyBar
    app = build_app(seed_logistic(), title="t")
    async with app.run_test(size=(120, 30)) as pilot:
        bar = app.screen.query_one(KeyBar)
        assert " 2 Stages " in _text(bar)
        column = next(s.start for s in bar._spans if s.binding.description == "Stages")
        await pilot.click(KeyBar, offset=(column + 1, 0))
        await pilot.pause()
        assert app.screen.active_view == "stages"
        assert " a Next left stage " in _text(bar)  # the stages pane's own keys, now focused


@sync
async def test_the_header_shows_the_recordings_own_title():
    named = dataclasses.replace(seed_logistic(), title="train.py --epochs 3")
    for given, heading in (("trace.json", "trace.json — train.py --epochs 3"),
                           (None, "train.py --epochs 3")):
        app = build_app(named, title=given)
        async with app.run_test(size=SIZE):
            assert app.screen.title == f"workbench: {heading}"


@sync
async def test_a_pullback_call_names_its_forward_call():
    import jax.numpy as jnp
    with transforms.record() as session:
        out, pullback = transforms.vjp(jnp.sin, jnp.ones(3))
        pullback(jnp.ones(3))
    assert [c.transform for c in session.calls] == ["vjp", "vjp_backward"]
    app = build_app(session, title="t")
    async with app.run_test(size=(120, 30)) as pilot:
        steps = app.screen.query_one(StepList)
        backward_row = next(i for i in range(steps.row_count)
                            if steps.outline.row(i)[:2] == (0, 1))  # the second call's own row
        steps.set_cursor(backward_row)
        await pilot.pause()
        assert "runs the pullback of call #0" in _step_body(app)


@sync
async def test_growth_of_the_loop_against_vmap_in_the_stages_view():
    from workbench import gallery
    from workbench.gallery._registry import run_example
    session = run_example(gallery.find("loop_vs_vmap")).session
    grown = next(i for i, c in enumerate(session.calls) if c.growth)
    app = build_app(session, title="t")
    async with app.run_test(size=(120, 40)) as pilot:
        steps = app.screen.query_one(StepList)
        steps.set_cursor(next(i for i in range(steps.row_count)
                              if steps.outline.row(i)[:2] == (0, grown)))
        await pilot.press("2", "w")
        await pilot.pause()
        shown = _text(app.screen.query_one("#stage-extra-body"))
        assert "dot_general" in shown and "12" in shown  # the loop's 12 at batch 4
        await pilot.press("w")
        assert not app.screen.query_one(StagesPane).extra


@sync
async def test_growth_toggle_says_when_a_call_has_none():
    app = build_app(seed_logistic())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2", "w")
        await pilot.pause()
        assert "no growth data for this call" in _text(app.screen.query_one("#stage-extra-body"))
        assert "no growth data" in _status(app)


@sync
async def test_tab_never_focuses_a_hidden_view():
    from workbench.tui.widgets.common.pane_stack import PaneStack
    app = build_app(seed_logistic())
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        stack = app.screen.query_one(PaneStack)
        for key in ["tab"] * 8 + ["2"] + ["tab"] * 8:
            await pilot.press(key)
            focused = app.focused
            shown = stack.query_one(f"#{stack.current}")
            hidden_panes = [c for c in stack.children if c is not shown]
            assert not any(p in focused.ancestors_with_self for p in hidden_panes), (key, focused)


@sync
async def test_a_big_session_freezes_the_apps_objects_out_of_the_gc_after_its_first_frame():
    import gc

    from transforms.model import Call, Level, Session, Step
    from workbench.tui import FREEZE_STEPS
    steps = tuple(Step(index=i, level=0, primitive="sin") for i in range(FREEZE_STEPS))
    level = Level(index=0, kind="outer", label="eval#0", depth=0, parent=None, trace_type="EvalTrace")
    session = Session(calls=[Call(0, "jit", "f", None, levels=(level,), steps=steps)])
    app = build_app(session)
    frozen_at_build = gc.get_freeze_count()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert gc.get_freeze_count() > frozen_at_build  # the app's widgets and styles too


@jax.custom_vjp
def soft(x):
    return jnp.tanh(x)


def soft_fwd(x):
    y = jnp.tanh(x)
    return y, y


def soft_bwd(y, t):
    return ((1 - y ** 2) * t,)


soft.defvjp(soft_fwd, soft_bwd)


def piecewise(x):
    if x < 3.0:
        return soft(x) * 2.0
    return jnp.sin(x)


def _soft_piecewise_session():
    """grad of a function that branches in Python on x and calls a custom_vjp function
    whose body grad never runs: its f stage has two notes, the others one."""
    with transforms.record() as session:
        transforms.grad(piecewise)(2.0)
    return session


@sync
async def test_the_stages_view_shows_each_note_wrapped_in_full():
    session = _soft_piecewise_session()
    stages = session.calls[0].stages
    branch = stages[-1].note  # grad(f): the branch taken
    own = stages[0].note[len(branch):].lstrip(". ")  # f: also its custom body's note
    assert branch.startswith("piecewise branches in Python") and own.startswith("soft's body")
    app = build_app(session)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        await app.workers.wait_for_complete()
        await pilot.pause()
        head = app.screen.query_one(StagesPane).query_one("#stage-head")
        drawn = [head.render_line(y).text.strip() for y in range(head.size.height)]
        shown = " ".join(drawn)
        assert drawn[0].startswith("a: f 3 eqns") and "b: grad(f)" in drawn[0]
        assert len(drawn) > 6  # wrapped over lines, not cut to one
        # every word, said once for both sides (a long path may wrap inside itself)
        joined = "".join(shown.split())
        assert "".join(branch.split()) in joined, drawn
        assert "a:" + "".join(own.split()) in joined  # what only the left stage says
        assert shown.count("branches in Python") == 1



@sync
async def test_an_alignment_finishing_while_the_app_closes_is_dropped():
    # CI once failed here: the stages pane aligned the first pair in a worker, the test left
    # run_test, and the answer reached the pane after its widgets were taken down.
    app = build_app(seed_logistic(), title="t")
    async with app.run_test(size=SIZE) as pilot:
        pane = app.screen.query_one(StagesPane)
        await pilot.pause()
        pair = pane.pair
        assert pair is not None
        await pane.remove_children()  # what closing the app does first
        pane._diff_ready(pair, "aligned after all")  # must not raise
