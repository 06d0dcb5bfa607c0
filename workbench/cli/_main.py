"""The `workbench` command: browse, run, dump, compare and document recorded JAX traces.

    workbench demo [--export DIR]          the gallery of seed examples (TUI, or files in DIR)
    workbench run SCRIPT.py [ARGS...]      run a script unchanged, recording jax.grad/vmap/jit/...
    workbench dump SCRIPT.py -o OUT.json   the same, writing the dump, no terminal UI
    workbench open TRACE.json              browse a dump in the terminal UI
    workbench show TRACE.json              a plain-text summary of a dump
    workbench diff A.json B.json           calls, stages and equation counts that changed
    workbench schema                       the JSON Schema of a dump

Exit codes: 0 ok; 1 the user's script failed (run/dump: the script's own exit
code is passed through, 1 for an uncaught exception, 130 for Ctrl-C; diff: a
--fail-on-* check failed; demo: a gallery example broke); 2 bad usage or bad
input (a missing file, a script with a syntax error, a corrupt, truncated or
newer-version dump, unrelated traces given to diff, no terminal UI available).

The handlers: demo `_demo.py`, run and dump `_record_commands.py`, the commands that only
read dumps `_read_commands.py`; what they share `_shared.py`.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Sequence

from ._args import build_parser
from ._demo import demo_command
from ._read_commands import diff_command, merge_command, open_command, schema_command, show_command
from ._record_commands import run_command
from ._shared import EXIT_BAD_INPUT, EXIT_OK

# NB: transforms.model and .saving are imported where they are used (in the handlers'
# modules too): `workbench open` draws its first frame before the dump's model is imported
# (the gate in bench/bench_tui.py).

def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["graph"]:
        return _graph(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {
        "demo": demo_command, "run": run_command, "dump": run_command, "open": open_command,
        "show": show_command, "diff": diff_command, "schema": schema_command,
        "merge": merge_command}
    try:
        return handlers[args.command](args)
    except BrokenPipeError:
        # `workbench show big.json | head`: the reader left; say nothing more.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


def _graph(argv: list[str]) -> int:
    """`workbench graph ...` is `workbench.export.main`."""
    from ..export import main as graph_main
    return graph_main(argv)


if __name__ == "__main__":
    sys.exit(main())
