"""The step view's header (issue 39, item 7)."""
from __future__ import annotations

from tui_sessions import SIZE, build_app, seed_convolve, sync, widget_text


@sync
async def test_a_vmap_only_call_shows_no_phase_on_its_steps():
    """[forward] means something only where a call has a backward pass."""
    app = build_app(seed_convolve())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("down")
        await pilot.pause()
        body = widget_text(app.screen.query_one("#step-body"))
    assert body.startswith("#") and "[forward]" not in body
