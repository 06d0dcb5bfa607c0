"""An app left alone does no work. A pane of no height (hidden behind another view, or not
laid out yet) scrolls its cursor's row into view when it gets a height, not by asking again
after every refresh: that kept a core busy for as long as the app sat idle."""
from __future__ import annotations

import asyncio

import jax.numpy as jnp
from tui_sessions import SIZE, build_app, seed_logistic, sync

import transforms as T
from workbench.tui.widgets.common.line_list import LineList
from workbench.tui.widgets.stages.stages_pane import StagesPane


@sync
async def test_an_idle_app_asks_no_pane_to_scroll_again_and_again(monkeypatch):
    asked: list[int] = []
    scroll = LineList._scroll_to_row

    def counted(self, row, center=False):
        asked.append(row)
        scroll(self, row, center)
    monkeypatch.setattr(LineList, "_scroll_to_row", counted)
    app = build_app(seed_logistic())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("down", "2", "down", "3", "down", "1")  # views shown and hidden
        await pilot.pause()
        asked.clear()
        await asyncio.sleep(0.5)
        assert asked == []


def long_chain(x):
    for i in range(40):
        x = jnp.sin(x) * (i + 1.0)
    return x


@sync
async def test_a_pane_hidden_when_its_cursor_moved_shows_that_row_once_shown():
    """The stages' panes are hidden behind the step view while the navigator moves; shown,
    they hold the equation of the step the cursor is on in view."""
    with T.record() as session:
        T.grad(long_chain)(0.5)
    app = build_app(session)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("end")  # the last step, its equation far down the jaxprs
        await pilot.pause()
        await pilot.press("2")
        await pilot.pause()
        pane = app.screen.query_one(StagesPane)
        for side in (pane.left, pane.right):
            top, height = int(side.scroll_y), side.scrollable_content_region.height
            assert side.cursor > height, (side.cursor, height)  # it had to scroll
            assert top <= side.cursor < top + height, (top, side.cursor, height)
