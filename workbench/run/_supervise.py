"""`workbench run`/`dump` survive the script's hard death: a journal, and a parent that watches.

    journal = open_journal(journal_path(output), script, args)   # in the child, after the fork
    death = watch_in_parent(path)   # None in the child; in the parent, how the child ended

Why a parent: a process that is killed (SIGKILL, the OOM killer), segfaults in native code,
aborts or calls os._exit runs none of its own code again, so nothing inside it can say how
it ended; only its parent can (waitpid). The command forks once before the script runs (no
JAX is imported yet, so nothing of JAX's is forked): the child runs the script as before
and saves the dump; the parent waits, ignoring Ctrl-C (the terminal sends it to the child
too) and passing SIGTERM and SIGHUP on. When the child ended without saving (its journal
is still there), the parent appends how it ended to the journal and reads the recording
back from it. Only the command itself forks (`workbench.cli.main()` with no argv): called
in-process (tests, a notebook) the journal is written and `load` reads it, but the ending
reads "unknown".
"""
from __future__ import annotations

import os
import signal
import tempfile
from dataclasses import dataclass
from typing import Callable, Sequence

from transforms.model import (
    Journal,
    Recovered,
    SessionLoadError,
    journal_of,
    read_journal,
    special_file_kind,
)

from ._saving import is_stdout, signal_name

__all__ = ["Death", "journal_path", "open_journal", "watch_in_parent"]


def journal_path(output: str | None) -> str:
    """Beside a dump written to a file; in the temp folder for the terminal UI, stdout, a FIFO."""
    if output is not None and not is_stdout(output) and \
            not special_file_kind(os.path.realpath(output)):
        return journal_of(output)
    fd, path = tempfile.mkstemp(prefix="workbench-", suffix=".json.journal")
    os.close(fd)
    return path


def open_journal(path: str, script: str, args: Sequence[str]) -> tuple[Journal | None, str]:
    """(the journal, "") or (None, why it could not be made: the run goes on without)."""
    import shlex
    try:
        return Journal.open(path, {"title": shlex.join([os.path.basename(script), *args]),
                                   "script": os.path.abspath(script), "pid": str(os.getpid())}
                            ), ""
    except OSError as e:
        return None, f"no journal at {path} ({e.strerror}): a crash would lose the recording"


@dataclass
class Death:
    """How the child ended without saving, and what its journal held."""
    exit_code: int           # as a shell reports it (128 + N for signal N)
    how: str                 # "the process died by SIGSEGV"
    recovered: Recovered | None
    problem: str = ""        # why the journal could not be read


def watch_in_parent(path: str) -> Death | int | None:
    """Fork. The child gets None and runs on. The parent waits for it and gets its exit code
    when it saved normally (the journal is gone), else its Death."""
    pid = os.fork()
    if pid == 0:
        return None
    previous = {s: signal.signal(s, _passing_on(pid)) for s in (signal.SIGTERM, signal.SIGHUP)}
    interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        _, status = os.waitpid(pid, 0)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        signal.signal(signal.SIGINT, interrupt)
    code = os.waitstatus_to_exitcode(status)
    shell = 128 - code if code < 0 else code
    if not os.path.exists(path):
        return shell
    how = (f"the process died by {signal_name(-code)}" if code < 0 else
           f"the process exited with code {code} without saving its recording (os._exit?)")
    try:
        Journal.append_end(path, how)
        return Death(shell, how, read_journal(path))
    except (OSError, SessionLoadError) as e:  # said, the exit code kept
        return Death(shell, how, None, str(e))


def _passing_on(pid: int) -> Callable[[int, object], None]:
    def handler(signum: int, _frame: object) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass
    return handler
