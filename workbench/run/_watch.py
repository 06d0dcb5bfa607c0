"""`workbench run --watch SCRIPT.py`: re-record the script whenever it changes.

Each recording runs in a fresh process (`python -m workbench dump`), so a script
edited between runs starts from a clean interpreter, as `python SCRIPT.py` would,
and what it prints is kept (the TUI's Story view) instead of reaching the
terminal the TUI draws on. The TUI polls `changed()` and shows each new session
in place, keeping the user's selection. No JAX import here.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Sequence

from transforms.model import Session, load

from .._words import plural

# Printed output kept per recording (the Story view), in characters.
MAX_OUTPUT = 200_000


@dataclass
class Recording:
    """One run of the script: the session (None if nothing could be recorded) and what
    happened, in one line for the status bar."""
    session: Session | None
    note: str
    exit_code: int = 0


@dataclass
class Watch:
    """The script to watch, how to record it, and the file state last seen."""
    script: str
    args: Sequence[str] = ()
    options: Sequence[str] = ()       # workbench dump options: --stages, --inline-jnp
    interval: float = 0.5             # seconds between checks of the file
    last: Recording | None = None     # the latest recording: what to say when the TUI closes
    _seen: tuple[float, int] | None = field(default=None, repr=False)

    def _state(self) -> tuple[float, int] | None:
        try:
            st = os.stat(self.script)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def changed(self) -> bool:
        """Whether the script changed since the last recording (or the last check)."""
        state = self._state()
        if state is None or state == self._seen:
            return False
        self._seen = state
        return True

    def record(self) -> Recording:
        """Run the script once, recording, in a new process; never raises."""
        self.last = self._record()
        return self.last

    def _record(self) -> Recording:
        self._seen = self._state()
        with tempfile.TemporaryDirectory(prefix="workbench-watch-") as folder:
            dump = os.path.join(folder, "trace.json")
            command = [sys.executable, "-m", "workbench", "dump", "-q", "-o", dump,
                       *self.options, self.script, "--", *self.args]
            try:
                done = subprocess.run(command, capture_output=True, text=True,
                                      errors="replace", stdin=subprocess.DEVNULL)
            except OSError as e:
                return Recording(None, f"could not run the script: {e}", 2)
            if not os.path.exists(dump):
                detail = error_line(done.stderr) or f"exit code {done.returncode}"
                return Recording(None, f"nothing recorded: {detail}", done.returncode)
            try:
                session = load(dump)
            except Exception as e:  # a dump the child could not finish
                return Recording(None, f"the recording could not be read: {e}",
                                 done.returncode)
        output = done.stdout + (f"\n[stderr]\n{done.stderr}" if done.stderr.strip() else "")
        session.metadata = {**session.metadata, "output": output[-MAX_OUTPUT:]}
        what = f"{plural(len(session.calls), 'call')}, {plural(session.step_count, 'step')}"
        if done.returncode:
            what += f"; the script exited with {done.returncode}: {error_line(done.stderr)}"
        return Recording(session, what, done.returncode)


def error_line(stderr: str) -> str:
    """The error a script's stderr ends with: the exception line of its last traceback
    (`jax.errors.TracerBoolConversionError: ...`), not what JAX prints after it ("For
    simplicity, JAX has removed its internal frames ..."); else its last line."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    start = max((i for i, line in enumerate(lines)
                 if line.startswith("Traceback (most recent call last):")), default=None)
    if start is not None:
        exception = next((line for line in lines[start + 1:] if not line[:1].isspace()), "")
        if exception:
            return exception.strip()[:200]
    return lines[-1].strip()[:200] if lines else ""
