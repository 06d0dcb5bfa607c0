"""Issue 37: a run that died shows how it ended in the TUI, above every view (the banner of
the session's first view), in the story view and in the failure view; a recording saved
normally shows none of it. Driven with Pilot; what is asserted is what the widgets draw."""
from __future__ import annotations

import io

import jax.numpy as jnp
from rich.console import Console
from textual.widgets import Static
from tui_sessions import sync

import transforms as T
from transforms.model import Journal, SourceLocation, read_journal
from workbench.tui import build_app as _build_app
from workbench.tui.widgets.common.text_lines import TextLines

SIZE = (150, 40)
ENDED = ("The process died by SIGSEGV, during call 2 (jit(f) at t.py:12 (<module>)), after "
         "`sin` (step 0) at t.py:4 (f) under jit#1.")


def died(tmp_path):
    path = str(tmp_path / "t.json.journal")
    journal = Journal.open(path, {"title": "t.py"})
    with T.record(journal=journal):
        for i in range(2):
            T.grad(jnp.tanh)(float(i))
    journal.begin(2, "jit(f) at t.py:12 (<module>)", "MainThread")
    journal.step(2, {"step": 0, "primitive": "sin", "level": "jit#1", "source": "t.py:4 (f)"})
    journal.close()
    Journal.append_end(path, "the process died by SIGSEGV")
    return read_journal(path).as_session()


def text_of(renderable) -> str:
    console = Console(width=300, color_system=None, file=io.StringIO(), record=True)
    console.print(renderable)
    return console.export_text()


def build_app(session):
    app = _build_app(session, title="t.json")
    app.animation_level = "none"
    return app


@sync
async def test_a_run_that_died_says_how_above_the_views_and_in_story_and_failure(tmp_path):
    app = build_app(died(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        banner = app.screen.query_one("#story", Static)
        assert text_of(banner.content) == ENDED + "\n"
        await pilot.press("4")
        await pilot.pause()
        failure = text_of(app.screen.query_one("#failure-body", Static).content)
        assert failure.startswith(ENDED + "\n\ngrad(tanh) (call 0) ran without error.\n"
                                  "No call that finished failed: how the run ended is said "
                                  "above.\n")
        await pilot.press("6")
        await pilot.pause()
        story = app.screen.query_one("#output-pane", TextLines)
        drawn = [story.render_line(y).text.rstrip() for y in range(5)]
        wrapped = ENDED.index(" (step 0)")  # at the view's width
        assert drawn == ["How it ended", ENDED[:wrapped], ENDED[wrapped + 1:], "",
                         "What it printed"]


@sync
async def test_a_recording_saved_normally_has_no_ending_note(tmp_path):
    with T.record() as session:
        T.grad(jnp.tanh)(1.0)
    app = build_app(session)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert not app.screen.query("#story")
        await pilot.press("4")
        await pilot.pause()
        failure = text_of(app.screen.query_one("#failure-body", Static).content)
        assert failure.startswith("grad(tanh) ran without error.\nNo call of this session "
                                  "failed: nothing to show here.\n")


@sync
async def test_the_call_the_process_died_in_is_listed_and_x_goes_to_it(tmp_path):
    path = str(tmp_path / "t.json.journal")
    journal = Journal.open(path, {"title": "t.py"})
    with T.record(journal=journal):
        T.grad(jnp.tanh)(1.0)
    journal.begin(1, "jit(f) at t.py:12 (<module>)", "MainThread", "jit", "f",
                  SourceLocation("t.py", 12, "<module>"))
    journal.step(1, {"step": 0, "primitive": "sin", "level": "jit#1", "source": "t.py:4 (f)"})
    journal.close()
    Journal.append_end(path, "the process died by SIGSEGV")
    app = build_app(read_journal(path).as_session())
    ended = ("the process died by SIGSEGV, during call 1 (jit(f) at t.py:12 (<module>)), after "
             "`sin` (step 0) at t.py:4 (f) under jit#1")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        await pilot.pause()
        failure = text_of(app.screen.query_one("#failure-body", Static).content)
        assert "Failed: call 1 jit(f) (x goes to the next failing step)." in failure
        await pilot.press("x")
        await pilot.pause()
        failure = text_of(app.screen.query_one("#failure-body", Static).content)
        lines = [line.strip(" │╭╮╰╯─") for line in failure.splitlines()]
        assert "process ended" in lines[2]  # the panel's title: no exception was raised
        assert f"error {ended[:60]}" in lines[3]
        assert "line  t.py:12 (<module>)" in lines
