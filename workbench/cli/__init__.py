"""The `workbench` command: demo (the gallery), run and dump (a script, recorded), open, show,
graph, diff, merge and schema. `main(argv)` runs it and returns its exit code;
`ask_for_demo_devices()` asks XLA for the demo's CPU devices (before JAX starts its backend)."""
from __future__ import annotations

from ._args import DEFAULT_MAX_STEPS as DEFAULT_MAX_STEPS, build_parser as build_parser
from ._main import ask_for_demo_devices as ask_for_demo_devices, main as main
