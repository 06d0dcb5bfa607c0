"""What the README's commands leave in a checkout (issue 36, item 16): `demo --export out/`
and the TUI's exports (workbench-exports/) are ignored by git, and the README says how to
run the `workbench` it installed."""
from __future__ import annotations

import subprocess

import pytest
from repo_paths import ROOT


@pytest.mark.parametrize("path", ["out/01-grad_tanh.json", "workbench-exports/graph.svg"])
def test_what_the_readme_commands_write_is_ignored(path):
    done = subprocess.run(["git", "check-ignore", "--no-index", "-q", path], cwd=ROOT)
    assert done.returncode == 0, f"{path} is not ignored"


def test_the_readme_says_how_to_run_workbench():
    readme = (ROOT / "README.md").read_text()
    assert "`.venv/bin/workbench`" in readme
    assert "`source .venv/bin/activate`" in readme
