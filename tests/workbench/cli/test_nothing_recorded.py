"""A block or a run that recorded no call says why (issue 36, item 17): record() warns once,
at the user's `with`; `workbench show` and the terminal UI say what was and was not seen."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import jax
import pytest
from tui_sessions import SIZE, build_app, sync, widget_text

import transforms as T
from transforms._recording import _record
from transforms.model import NOTHING_RECORDED, NOTHING_RECORDED_IN_RUN
from workbench.analysis import nothing_recorded
from workbench.tui.widgets.step.step_pane import StepPane


@pytest.fixture
def fresh_warning(monkeypatch):
    monkeypatch.setattr(_record, "_warned_nothing", [False])


def test_a_block_with_only_jax_grad_warns_once_at_the_with(fresh_warning):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with T.record() as session:  # the line the warning names
            jax.grad(lambda x: x * x)(1.0)
        line = sys._getframe().f_lineno - 2
        with T.record():
            pass
    assert session.calls == []
    assert [(w.category, str(w.message), w.lineno) for w in caught] == [
        (T.NothingRecordedWarning, NOTHING_RECORDED, line)]
    assert nothing_recorded(session) == NOTHING_RECORDED


def test_a_block_that_records_does_not_warn(fresh_warning):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with T.record() as session:
            T.grad(lambda x: x * x)(1.0)
    assert not caught and nothing_recorded(session) is None


def test_show_says_why_a_run_recorded_nothing(tmp_path):
    script = tmp_path / "empty.py"
    script.write_text(textwrap.dedent("""
        import jax.numpy as jnp
        print(jnp.ones(2).sum())
    """))
    dump = tmp_path / "t.json"
    done = subprocess.run([sys.executable, "-m", "workbench", "run", "-o", str(dump), str(script)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "NothingRecordedWarning" not in done.stderr
    shown = subprocess.run([sys.executable, "-m", "workbench", "show", str(dump)],
                           capture_output=True, text=True, timeout=120)
    assert shown.stdout.splitlines()[-1] == NOTHING_RECORDED_IN_RUN


@sync
async def test_the_terminal_ui_says_why_a_session_is_empty():
    with T.record() as session:
        pass
    app = build_app(session, title="t")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        body = widget_text(app.screen.query_one(StepPane).query_one("#step-body"))
    assert " ".join(body.split()) == NOTHING_RECORDED
