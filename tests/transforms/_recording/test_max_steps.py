"""record(max_steps=N) / `workbench run --max-steps N`: a long run keeps its first and latest
calls and counts what it dropped (issue 18, item 5)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import pytest
from tui_sessions import sync

import transforms as T
from workbench.cli import DEFAULT_MAX_STEPS, build_parser, main as workbench_main


def loss(w, x):
    return jnp.sum(jnp.tanh(x * w) ** 2)


W, X = jnp.ones(3), jnp.arange(3.0)


def _steps_per_call() -> int:
    with T.record() as s:
        T.grad(loss)(W, X)
    return s.step_count


def test_a_long_recording_keeps_the_first_and_latest_calls_and_counts_the_rest():
    per_call = _steps_per_call()
    bound = 20 * per_call
    with T.record(max_steps=bound) as session:
        results = [T.grad(loss)(W, X + i) for i in range(200)]
    indices = [c.index for c in session.calls]
    assert session.step_count <= bound
    assert len(session.calls) + session.dropped_calls == 200
    assert session.step_count + session.dropped_steps == 200 * per_call
    head = [i for i in indices if i < 100]
    tail = [i for i in indices if i >= 100]
    assert head == list(range(len(head))) and len(head) == 10  # up to half the bound
    assert tail == list(range(200 - len(tail), 200)) and tail[-1] == 199
    assert session.max_steps == bound
    note = session.dropped_note()
    assert note == (f"max_steps={bound:,}: {session.dropped_calls:,} calls (calls 10-189) with "
                    f"{session.dropped_steps:,} steps were dropped; the first and the latest "
                    f"calls are kept")
    # recording changes nothing JAX does
    assert all(jnp.allclose(r, jax.grad(loss)(W, X + i)) for i, r in enumerate(results))


def test_the_latest_call_is_kept_even_when_it_alone_is_over_the_bound():
    with T.record(max_steps=1) as session:
        for i in range(5):
            T.grad(loss)(W, X + i)
    assert [c.index for c in session.calls] == [0, 4]
    assert session.dropped_calls == 3


def test_without_max_steps_nothing_is_dropped_and_the_note_is_empty():
    with T.record() as session:
        for i in range(30):
            T.grad(loss)(W, X + i)
    assert len(session.calls) == 30 and session.dropped_calls == 0
    assert session.max_steps is None and session.dropped_note() == ""


@pytest.mark.parametrize("bad", [0, -5, 2.5, True, "100"])
def test_max_steps_must_be_a_positive_int(bad):
    with pytest.raises(ValueError, match="max_steps"):
        with T.record(max_steps=bad):
            pass


def test_a_pullback_whose_forward_call_was_dropped_still_runs_and_records():
    per_call = _steps_per_call()
    with T.record(max_steps=4 * per_call) as session:
        for _ in range(3):  # the first calls, kept for good
            T.grad(loss)(W, X)
        out, pullback = T.vjp(jnp.sin, X)  # call 3
        for i in range(20):
            T.grad(loss)(W, X + i)
        (ct,) = pullback(jnp.ones(3))
    assert jnp.allclose(ct, jnp.cos(X))
    backward = session.calls[-1]
    assert backward.transform == "vjp_backward" and backward.parent == 3
    assert 3 not in [c.index for c in session.calls]


def test_the_counts_survive_save_and_load(tmp_path):
    with T.record(max_steps=_steps_per_call() * 4) as session:
        for i in range(12):
            T.grad(loss)(W, X + i)
    path = tmp_path / "t.json"
    session.save(path)
    loaded = T.load(path)
    assert (loaded.max_steps, loaded.dropped_calls, loaded.dropped_steps) == \
        (session.max_steps, session.dropped_calls, session.dropped_steps)
    assert loaded.dropped_note() == session.dropped_note() != ""
    assert [c.index for c in loaded.calls] == [c.index for c in session.calls]


LONG = """
    import jax, jax.numpy as jnp
    def loss(w, x):
        return jnp.sum(jnp.tanh(x * w) ** 2)
    g = jax.grad(loss)
    w = jnp.ones(3)
    for i in range(60):
        w = w - 0.01 * g(w, jnp.arange(3.0) + i)
    print("done")
"""


@pytest.fixture(scope="module")
def long_dump(tmp_path_factory):
    folder = tmp_path_factory.mktemp("long")
    script = folder / "long.py"
    script.write_text(textwrap.dedent(LONG))
    out = folder / "long.json"
    done = subprocess.run([sys.executable, "-m", "workbench", "dump", str(script),
                           "--max-steps", "200", "-o", str(out)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "done\n"
    return out, done.stderr


def test_run_max_steps_bounds_the_dump_and_says_what_it_dropped(long_dump):
    out, stderr = long_dump
    session = T.load(out)
    assert session.max_steps == 200 and session.dropped_calls > 0
    assert session.step_count <= 200
    assert session.calls[0].index == 0 and session.calls[-1].index == 59
    assert f"{session.dropped_note()} (--max-steps); wrote {out}" in stderr


def test_show_prints_what_was_dropped_and_finds_calls_by_index(long_dump, capsys):
    out, _ = long_dump
    session = T.load(out)
    assert workbench_main(["show", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == f"dropped: {session.dropped_note()}"
    assert workbench_main(["show", str(out), "--call", "59"]) == 0
    assert "call 59: grad(loss)" in capsys.readouterr().out
    dropped = session.calls[0].index + 1
    while dropped in {c.index for c in session.calls}:
        dropped += 1
    assert workbench_main(["show", str(out), "--call", str(dropped)]) == 2
    err = capsys.readouterr().err
    assert f"has no call {dropped}" in err and "were dropped" in err


def test_max_steps_default_and_parsing():
    parser = build_parser()
    args = parser.parse_args(["run", "s.py"])
    assert args.max_steps == DEFAULT_MAX_STEPS
    assert parser.parse_args(["dump", "-o", "t.json", "--max-steps", "1_000", "s.py"]
                             ).max_steps == 1000
    assert parser.parse_args(["run", "--max-steps", "0", "s.py"]).max_steps == 0  # keep all
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "--max-steps", "-1", "s.py"])


def test_max_steps_after_the_script_is_ours_and_bad_values_are_refused(tmp_path, capsys):
    script = tmp_path / "s.py"
    script.write_text("import sys\nprint(sys.argv[1:])\n")
    out = tmp_path / "t.json"
    code = workbench_main(["dump", str(script), "--max-steps=50", "-o", str(out), "x"])
    assert code == 0 and capsys.readouterr().out == "['x']\n"
    assert T.load(out).max_steps == 50
    assert workbench_main(["dump", str(script), "--max-steps", "lots", "-o", str(out)]) == 2
    assert "--max-steps: not a number of steps: 'lots'" in capsys.readouterr().err


@sync
async def test_the_tui_says_how_many_calls_were_dropped(long_dump):
    from workbench.tui import build_app
    out, _ = long_dump
    session = T.load(out)
    app = build_app(session, title="long.json")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert (f"{len(session.calls)} calls, {session.step_count:,} steps, "
                f"{session.dropped_calls:,} calls dropped (max_steps=200)") in app.screen.sub_title
