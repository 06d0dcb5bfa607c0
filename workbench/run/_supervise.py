"""`workbench run`/`dump` survive the script's hard death: a journal, and a parent that watches.

    journal = open_journal(journal_path(output), script, args)   # in the child, after the fork
    death = watch_in_parent(path)   # None in the child; in the parent, how the child ended

Why a parent: a process that is killed (SIGKILL, the OOM killer), segfaults in native code,
aborts or calls os._exit runs none of its own code again, so nothing inside it can say how
it ended; only its parent can (waitpid). The command forks once before the script runs (no
JAX is imported yet, so nothing of JAX's is forked): the child runs the script as before
and saves the dump; the parent waits, passing on SIGINT, SIGTERM and SIGHUP sent to it
alone (Ctrl-C at the terminal reaches the child by itself: not passed on twice). When the
child ended without saving (its journal is still there), the parent appends how it ended
to the journal and reads the recording back from it. Only the command itself forks
(`workbench.cli.main()` with no argv): called in-process (tests, a notebook) the journal is
written and `load` reads it, but nobody sees how the process ended: a reader says "still
running (pid N)" while the writer lives, "ended without a word" after.
"""
from __future__ import annotations

import contextlib
import os
import signal
import tempfile
from dataclasses import dataclass
from typing import Sequence

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
                                   "script": os.path.abspath(script)},
                            jax_version=_installed_jax()), ""
    except OSError as e:
        return None, f"no journal at {path} ({e.strerror}): a crash would lose the recording"


def _installed_jax() -> str:
    """The installed jax's version, read from its package metadata: JAX is not imported yet
    (the journal opens before the script runs), and a recovered dump still says it."""
    from importlib import metadata
    try:
        return metadata.version("jax")
    except metadata.PackageNotFoundError:
        return ""


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
    code = os.waitstatus_to_exitcode(_wait_passing_signals_on(pid))
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


# A signal the kernel sent (si_code SI_KERNEL): Ctrl-C or a hangup of the terminal, sent to
# the whole foreground process group, so the child has it already; one that a process sent
# to us alone (`kill -TERM`, a CI's timeout) is passed on.
_SI_KERNEL = 0x80
_PASSED_ON = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _wait_passing_signals_on(pid: int) -> int:
    """The child's wait status; meanwhile each stop signal sent to this process alone is
    passed on to it (the child stops, and saves, as if it had been sent there).

    NB: signals are blocked and taken with sigwaitinfo, which says who sent each; SIGCHLD
    too, so one loop waits for both."""
    waited = {*_PASSED_ON, signal.SIGCHLD}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, waited)
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status
            info = signal.sigwaitinfo(waited)
            if info.si_signo != signal.SIGCHLD and info.si_code != _SI_KERNEL:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, info.si_signo)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
