"""`workbench html TRACE.json -o report.html`: a dump as one standalone page, for sharing and
for CI artifacts. Exit codes: 0 written; 2 bad usage or input (a missing, corrupt or newer
dump, a folder that does not exist)."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from transforms.model import SessionLoadError

from .._safe_text import terminal
from ..analysis import load_run
from ._blocks import Budget
from ._page import write_page

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="workbench html",
        description="Write a session dump as one standalone HTML page: its calls with their "
                    "levels, steps and failures, each call's stages side by side with their "
                    "diff, its jaxpr graph (inline SVG, where Graphviz is installed) and its "
                    "pytrees. The page loads nothing from the network and runs no script; "
                    "every recorded string is escaped; large sessions are folded and bounded.",
        epilog="Exit codes: 0 written; 2 the dump is missing, corrupt, truncated or from a "
               "newer schema, or OUT cannot be written.")
    parser.add_argument("trace", metavar="TRACE.json",
                        help="a session dump (or a folder of a multi-process run's dumps)")
    parser.add_argument("-o", "--output", metavar="OUT.html", required=True,
                        help="the page to write (atomically)")
    parser.add_argument("--title", help="the page's title (default: the session's)")
    parser.add_argument("--calls", type=int, default=Budget.calls_detailed, metavar="N",
                        help=f"calls shown in full (default {Budget.calls_detailed}; every call "
                             f"is listed in the table, up to {Budget.calls_listed})")
    parser.add_argument("--graphs", type=int, default=Budget.graphs, metavar="N",
                        help=f"jaxpr graphs drawn (default {Budget.graphs}; 0 for none)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = args.output
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        return _fail(f"{out}: the folder {folder} does not exist")
    try:
        session = load_run(args.trace)
    except SessionLoadError as e:
        return _fail(str(e))
    budget = Budget(calls_detailed=max(args.calls, 0), graphs=max(args.graphs, 0))
    try:
        write_page(session, out, args.title, budget)
    except OSError as e:
        return _fail(f"cannot write {out}: {e.strerror or e}")
    print(f"workbench html: wrote {out}", file=sys.stderr)
    return 0


def _fail(message: str) -> int:
    print(f"workbench html: {terminal(message, lines=True)}", file=sys.stderr)
    return 2
