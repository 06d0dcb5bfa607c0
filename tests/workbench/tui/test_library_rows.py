"""A jit of JAX's own function (jnp.take's `_take`) in the navigator: one row at the user's
line, folded, its recorded body's equations listed under it when unfolded, found by search
and filters (which unfold it to show the match)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from tui_sessions import build_app, sync

import transforms as T
from workbench.tui.navigation import BODY, LEVEL, STEP, Outline, StepFilter, body_text


def gather_two(x):
    return jnp.sum(jnp.take(jnp.sin(x), jnp.array([0, 2])))


def _take_body() -> list[str]:
    """jnp.take's jit as JAX stages it: its jaxpr's primitives (`lt add jit broadcast_in_dim
    gather` up to 0.12.0, a select_n for the jit from 0.12.1)."""
    jaxpr = jax.make_jaxpr(gather_two)(jnp.ones(3)).jaxpr
    (take,) = [e for e in jaxpr.eqns if e.params.get("name") == "_take"]
    return [e.primitive.name for e in take.params["jaxpr"].eqns]


TAKE_BODY = _take_body()


TAKE = f"take at test_library_rows.py:{gather_two.__code__.co_firstlineno + 1}"


@pytest.fixture(scope="module")
def session():
    with T.record() as recorded:
        T.grad(gather_two)(jnp.ones(3))
    return recorded


def take_row(outline: Outline) -> int:
    """The first row of a `take` step (the grad level's)."""
    call = outline.session.calls[0]
    return next(i for i in range(len(outline)) if outline.row(i)[0] == STEP
                and call.steps[outline.row(i)[2]].title == "jit[name=_take]")


def listed(outline: Outline, start: int) -> list[str]:
    """The BODY rows' texts right after row `start`."""
    out = []
    for i in range(start + 1, len(outline)):
        kind, c, index = outline.row(i)
        if kind != BODY:
            break
        out.append(body_text(outline.index(c), index))
    return out


def test_a_library_steps_body_is_folded_under_its_row_and_unfolds(session):
    outline = Outline(session)
    row = take_row(outline)
    assert outline.is_folded(row) and listed(outline, row) == []
    before = len(outline)
    assert outline.toggle(row) == row
    assert listed(outline, row) == TAKE_BODY and len(outline) == before + len(TAKE_BODY)
    assert not outline.is_folded(row)
    assert outline.parent_row(row + 5) == row  # an equation's parent: its step
    assert outline.toggle(row) == row and len(outline) == before


def test_a_step_without_a_recorded_body_does_not_fold(session):
    outline = Outline(session)
    sin = next(i for i in range(len(outline)) if outline.row(i)[0] == STEP
               and session.calls[0].steps[outline.row(i)[2]].title == "jit[name=sin]")
    before = len(outline)
    assert outline.toggle(sin) == sin and len(outline) == before and not outline.is_folded(sin)


def test_a_filter_finds_a_library_steps_equation_and_shows_it(session):
    outline = Outline(session)
    outline.filter = StepFilter.parse("p:scatter")
    outline.rebuild()
    kinds = [outline.row(i)[0] for i in range(len(outline))]
    assert kinds == [0, LEVEL, STEP, BODY, BODY]  # the backward take, unfolded
    assert listed(outline, 2) == ["broadcast_in_dim", "scatter-add"]


def test_search_unfolds_the_steps_whose_body_holds_the_match(session):
    outline = Outline(session)
    assert outline.unfold_bodies_holding("gather")
    rows = outline.search("gather")
    texts = [body_text(outline.index(0), outline.row(i)[2]) for i in rows
             if outline.row(i)[0] == BODY]
    assert texts == ["gather", "gather"]  # under the grad level's take and eval's
    assert not outline.unfold_bodies_holding("gather")  # shown already


def test_the_tui_unfolds_a_library_row_with_the_key_that_unfolds_others(session):
    from workbench.tui.widgets.navigator.step_list import StepList

    @sync
    async def drive():
        app = build_app(session)
        async with app.run_test(size=(100, 40)) as pilot:
            steps = app.screen.query_one(StepList)
            row = take_row(steps.outline)
            steps.set_cursor(row)
            await pilot.pause()
            assert steps.row_text(row).plain.strip() == (
                f"▸    5 {TAKE}  → float32[2], int32[2,1]")
            await pilot.press("right")
            assert [steps.row_text(i).plain.strip() for i in range(row, row + 1 + len(TAKE_BODY))] == [
                f"▾    5 {TAKE}  → float32[2], int32[2,1]", *TAKE_BODY]
            await pilot.press("down")  # an equation: its step is shown
            assert steps.current() == (0, steps.outline.row(row)[2])
            await pilot.press("left")  # to its step
            assert steps.cursor == row
            await pilot.press("left")  # folded
            assert steps.row_text(row + 1).plain.strip().split()[1] == "reduce_sum"
            await pilot.press("enter")  # unfolded again
            assert steps.row_text(row + 1).plain.strip() == "lt"
            found = steps.search("scatter")  # the backward take: unfolded to show it
            assert steps.row_count == len(steps.outline) and found == 2
            assert [steps.row_text(i).plain.strip() for i in steps.matches][1] == "scatter-add"

    drive()
