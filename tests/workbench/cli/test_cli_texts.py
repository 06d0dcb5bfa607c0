"""What a newcomer reads (issue 36, item 15): help that names the views as the TUI does,
counts that agree with their number, a gallery header without a broken name, the seed's
lines without lint comments, one meaning per colour in a graph."""
from __future__ import annotations

from pathlib import Path

import pytest

from workbench._words import plural
from workbench.cli._args import build_parser
from workbench.export._graph import _LEGEND_TEXT
from workbench.gallery import find


def _help(command: str) -> str:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    return " ".join(sub.format_help().split())


def test_run_help_names_the_story_view():
    text = _help("run")
    assert "Output view" not in text
    assert "what it prints is in the Story view, key 6" in text


def test_diff_help_says_stages_are_recorded_by_default():
    text = _help("diff")
    assert "`workbench run --stages`" not in text
    assert ("stages are recorded unless turned off with record(stages=False) or "
            "`workbench run --no-stages`") in text


@pytest.mark.parametrize("n, word, many, said", [
    (1, "call", "", "1 call"), (2, "call", "", "2 calls"), (0, "step", "", "0 steps"),
    (1024, "step", "", "1,024 steps"), (1, "process", "processes", "1 process"),
    (3, "process", "processes", "3 processes")])
def test_counts_agree_with_their_number(n, word, many, said):
    assert plural(n, word, many) == said


def test_the_gallery_header_names_vmap_of_convolve_whole():
    text = find("loop_vs_vmap").explanation
    assert "vmap( convolve)" not in text
    assert "one concatenate. vmap(convolve) is the same program" in text


def test_the_seeds_code_is_shown_without_lint_comments():
    import workbench.gallery._pytree_containers as seed
    lines = Path(seed.__file__).read_text().splitlines()
    repack = next(i for i, line in enumerate(lines) if "def repack_NTC" in line)
    assert lines[repack + 1:repack + 3] == [
        "        (name, flag), (array,) = passive, active",
        "        return NTContainer(name, flag, value)"]


def test_green_means_added_only():
    greens = [key for key, text in _LEGEND_TEXT.items() if "green" in text]
    assert greens == ["added"]
    assert _LEGEND_TEXT["batched"] == "magenta border: batched (vmap)"


def test_the_demo_keeps_a_background_examples_output_out_of_the_shell():
    """Issue 36, item 10: quitting `workbench demo` while an example records."""
    import io
    import threading

    from workbench.cli._main import _MainThreadOnly
    shell = io.StringIO()
    stream = _MainThreadOnly(shell)
    worker = threading.Thread(target=lambda: stream.write("check_grads(...): passed\n"))
    worker.start()
    worker.join()
    stream.write("from the main thread\n")
    assert shell.getvalue() == "from the main thread\n"


def test_run_says_at_once_what_happens_until_the_script_ends(tmp_path, capsys, monkeypatch):
    """Issue 36, item 9: a person at a terminal is told the script runs and is recorded."""
    import sys

    from workbench.cli import main
    script = tmp_path / "s.py"
    script.write_text("print('hello')\n")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    out = tmp_path / "t.json"
    assert main(["run", "-o", str(out), str(script)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (f"workbench: running {script}, recording its jax.grad, vmap, jit, ... "
                      f"calls; {out} is written when it ends")


def test_a_call_missing_stages_is_not_plainly_ok():
    """Issue 39, item 1: `show`'s call line says how many stages were not captured."""
    import dataclasses

    import transforms as T
    from workbench.cli._summary import summarize_call
    with T.record() as session:
        T.grad(lambda x: x * x)(1.0)
    (call,) = session.calls
    assert summarize_call(call)[0].endswith("  [ok]")
    lost = dataclasses.replace(call.stages[1], available=False, reason="not captured")
    missing = dataclasses.replace(call, stages=(call.stages[0], lost, *call.stages[2:]))
    assert summarize_call(missing)[0].endswith(
        f"  [ok; 1 of {len(call.stages)} stages unavailable]")
