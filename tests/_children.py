"""Starting a child process as a user would: signals at their defaults, or `workbench dump`
of a script."""
from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def signals_at_default(*signums: int) -> Iterator[None]:
    """While a child is started: a test run begun by a non-interactive shell (`pytest &`,
    `nohup`) has SIGINT or SIGHUP ignored, an ignored signal stays ignored across exec,
    and the child would never see it. A handler installed here is reset to the default in
    the child at exec, as a user's foreground shell gives it."""
    previous = {s: signal.signal(s, signal.default_int_handler if s == signal.SIGINT
                                 else lambda *_: None) for s in signums}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def dump_script(folder: Path, name: str, text: str,
                *args: str) -> tuple[subprocess.CompletedProcess, Path, Path]:
    """`workbench dump -o t.json SCRIPT ARGS` of a script written to `folder`, as a user runs
    it: (the finished process, the dump's path, the script's path)."""
    script, out = folder / name, folder / "t.json"
    script.write_text(text)
    done = subprocess.run([sys.executable, "-m", "workbench", "dump", "-o", str(out), str(script),
                           *args], capture_output=True, text=True, cwd=folder, timeout=240)
    return done, out, script
