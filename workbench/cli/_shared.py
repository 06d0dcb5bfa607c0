"""What the `workbench` command's handlers share: exit codes, messages on stderr, loading a
dump (or saying why not), opening the terminal UI, checking output paths, printing lines."""
from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any, Sequence

from .._safe_text import terminal as _t

if TYPE_CHECKING:
    from transforms.model import Session

EXIT_OK, EXIT_SCRIPT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
# `run --find-nans`: a NaN or Inf was found (the script stopped there unless --keep-going)
EXIT_NONFINITE = 3
# `run --max-compiles N`: the script's jitted functions compiled more than N times
EXIT_TOO_MANY_COMPILES = 4


def error(message: str) -> None:
    print(f"workbench: {_t(message, lines=True)}", file=sys.stderr)


def note(args: argparse.Namespace, message: str) -> None:
    if not getattr(args, "quiet", False):
        print(f"workbench: {_t(message, lines=True)}", file=sys.stderr, flush=True)


def load_or_report(path: str, lazy: bool = False) -> Session | None:
    from transforms.model import SessionLoadError

    from ..analysis import load_run
    try:
        return load_run(path, lazy=lazy)
    except SessionLoadError as e:
        error(str(e))
        return None


def no_terminal() -> str:
    """Why the terminal UI cannot open here, or "": it needs a terminal on stdin and stdout."""
    if sys.stdin.isatty() and sys.stdout.isatty():
        return ""
    return "the terminal UI needs a terminal (stdin and stdout are not one)"


def open_tui(sessions: Session | list[tuple[str, Session]], title: str, alternative: str,
             process: int | None = None, **options: Any) -> int:
    """options: export_dir, watch (as workbench.tui.run takes them)."""
    reason = no_terminal()
    if reason:
        error(f"{reason}; {alternative}")
        return EXIT_BAD_INPUT
    from ..tui import run
    # A multi-process run opens at process 0, or the one asked for.
    run(sessions, title=title, **options, process=0 if process is None else process)
    return EXIT_OK


def usable_folder(path: str) -> str:
    if os.path.exists(path) and not os.path.isdir(path):
        return f"{path}: exists and is not a folder"
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        return f"{path}: cannot create the folder ({e.strerror})"
    if not os.access(path, os.W_OK):
        return f"{path}: the folder is not writable"
    return ""


def usable_output(path: str) -> str:
    """What is wrong with writing a dump to `path` ("" for nothing): workbench.run's check."""
    from .. import run
    return run.usable_output(path)


# Each printed line is made terminal-safe once more as it is printed: nothing from a
# recording reaches the terminal raw, whatever a formatter forgot.
LINE_LIMIT = 20_000


def print_lines(lines: Sequence[str]) -> None:
    print("\n".join(_t(line, LINE_LIMIT) for line in lines))
