"""`workbench html TRACE.json -o report.html`: the standalone page, its help and exit codes."""
from __future__ import annotations

import pytest
from test_html import ATTACK, Page, hostile_session

from workbench.cli import main


def test_help_names_the_command_and_its_options(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["html", "--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert "usage: workbench html" in out and "-o OUT.html" in out and "Exit codes" in out
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "html" in capsys.readouterr().out


def test_writes_one_standalone_page(tmp_path, capsys):
    trace = tmp_path / "trace.json"
    hostile_session(ATTACK).save(trace)
    out = tmp_path / "report.html"
    assert main(["html", str(trace), "-o", str(out), "--title", "CI <report>"]) == 0
    text = out.read_text(encoding="utf-8")
    page = Page(text)
    assert text.startswith("<!DOCTYPE html>") and "script" not in page.tags
    assert "CI &lt;report&gt;" in text and ATTACK in "".join(page.text)
    assert "wrote" in capsys.readouterr().err


@pytest.mark.parametrize("problem", ["missing", "corrupt", "no folder"])
def test_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, problem):
    trace = tmp_path / "trace.json"
    if problem == "corrupt":
        trace.write_text("{ not json")
    elif problem == "no folder":
        hostile_session("f").save(trace)
    out = tmp_path / ("gone/r.html" if problem == "no folder" else "r.html")
    assert main(["html", str(trace), "-o", str(out)]) == 2
    assert not out.exists()
    assert capsys.readouterr().err.startswith("workbench html: ")
