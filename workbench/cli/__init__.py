"""The `workbench` command: demo (the gallery), run and dump (a script, recorded), open, show,
graph, diff, merge and schema. `main(argv)` runs it and returns its exit code."""
from __future__ import annotations

from ._args import DEFAULT_MAX_STEPS as DEFAULT_MAX_STEPS, build_parser as build_parser
from ._main import main as main
