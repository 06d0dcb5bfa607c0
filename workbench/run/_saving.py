"""Saving a recording at the end of `workbench run`, whatever happens to the disk or the user.

    outcome = save_recording(session, "trace.json", note)
    outcome.path     # where it was written (the target, or a fallback), None if nowhere
    outcome.problem  # what went wrong with the target ("" when nothing did)

The script has already run: losing its recording to a full disk, a folder deleted
meanwhile, a read-only file system or an impatient Ctrl-C would waste the run. So:
- the dump is encoded once, then written to the target; when that fails with an
  OSError it is written to a fallback path (the temp folder, the home folder, the
  current folder) named after the target, and the path is said;
- while saving, a first Ctrl-C (or SIGTERM, SIGHUP) only says that the save goes
  on; a second one abandons it (the old file, if any, is kept);
- `-o` names what is written: a symlink's target, a FIFO or a device (streamed into,
  never replaced); a folder is refused up front (`usable_output`);
- `-o -` (or /dev/stdout) streams the dump to stdout, a pipe included; while the script
  runs its own stdout goes to stderr (`stdout_to_stderr`), so only the dump is on stdout.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
import threading
from dataclasses import dataclass
from types import FrameType
from typing import Callable, Iterator

from transforms.model import Session, special_file_kind, write_atomically

# The signals `workbench run` treats as Ctrl-C (each ends the script, keeping the recording).
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                     if hasattr(signal, name))


@dataclass
class SaveOutcome:
    path: str | None          # where the dump was written; None: nowhere
    problem: str = ""         # why the target was not written
    abandoned: bool = False   # the user stopped the save (a second Ctrl-C)


def usable_output(path: str) -> str:
    """Why `path` cannot be the dump's target ("" if it can): a folder, or no such folder."""
    real = os.path.realpath(path)
    kind = special_file_kind(real)
    if kind == "directory":
        return f"{path}: is a folder; give a file name for the dump"
    if kind == "socket":
        return f"{path}: is a socket; give a file name for the dump"
    if kind:  # a FIFO or a device: streamed into
        return ""
    folder = os.path.dirname(real)
    if not os.path.isdir(folder):
        return f"{path}: the folder {folder} does not exist"
    if not os.access(folder, os.W_OK):
        return f"{path}: the folder {folder} is not writable"
    return ""


# The -o names of this process's stdout. NB: /dev/stdout is a link to the descriptor: into a
# pipe it names no file (`pipe:[123]`), so it is written through descriptor 1, not opened.
STDOUT_NAMES = frozenset({"-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"})
STDOUT_FALLBACK = "trace.json"  # the name fallback paths take when stdout cannot be written


def is_stdout(output: str) -> bool:
    """`-o -` or `-o /dev/stdout`: the dump streams to stdout."""
    return output in STDOUT_NAMES


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Inside, descriptor 1 (and so sys.stdout, and what native code prints) is stderr; the
    real stdout comes back after, for the dump alone."""
    _flush_standard_streams()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        _flush_standard_streams()
        os.dup2(saved, 1)
        os.close(saved)


def _flush_standard_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a stream the script closed or replaced
            stream.flush()


def fallback_paths(target: str) -> list[str]:
    """Where a dump goes when its target cannot be written: other folders, the same name."""
    stem = os.path.splitext(os.path.basename(target))[0] or "trace"
    name = f"{stem}.workbench-{os.getpid()}.json"
    target_folder = os.path.dirname(os.path.realpath(target))
    folders: list[str] = []
    for folder in (tempfile.gettempdir(), os.path.expanduser("~"), os.getcwd()):
        real = os.path.realpath(folder)
        if real != target_folder and real not in folders and os.path.isdir(real):
            folders.append(real)
    return [os.path.join(folder, name) for folder in folders]


def save_recording(session: Session, target: str, note: Callable[[str], None]) -> SaveOutcome:
    """Encode and write the dump (see the module's docstring); never raises for the disk.

    A target of STDOUT_NAMES is written to descriptor 1 (a reader that left: the fallback)."""
    try:
        with _stops_deferred(note):
            text = session.to_json_text()
            try:
                if is_stdout(target):
                    _write_stdout(text.encode("utf-8"))
                else:
                    write_atomically(target, text)
                return SaveOutcome(target)
            except OSError as e:
                problem = _reason(e)
            for path in fallback_paths(STDOUT_FALLBACK if is_stdout(target) else target):
                try:
                    write_atomically(path, text)
                    return SaveOutcome(path, problem)
                except OSError:
                    continue
            return SaveOutcome(None, problem)
    except KeyboardInterrupt:
        return SaveOutcome(None, "the save was stopped (Ctrl-C twice)", abandoned=True)


def _write_stdout(data: bytes) -> None:
    view = memoryview(data)
    while view:  # NB: a write into a pipe may take less than asked
        view = view[os.write(1, view):]


def _reason(e: OSError) -> str:
    return e.strerror or type(e).__name__


@contextlib.contextmanager
def _stops_deferred(note: Callable[[str], None]) -> Iterator[None]:
    """A first Ctrl-C/SIGTERM/SIGHUP is noted and ignored; a second raises KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    seen = []

    def handler(signum: int, frame: FrameType | None) -> None:
        seen.append(signum)
        if len(seen) > 1:
            raise KeyboardInterrupt
        note("saving the recording; Ctrl-C again to abandon the save")

    previous = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)


@contextlib.contextmanager
def stops_as_ctrl_c() -> Iterator[list[int]]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt, as Ctrl-C does; the list gets the signal.

    So a script stopped by `kill`, a closed terminal or a CI timeout ends as Ctrl-C
    does: its recording is saved. A handler the script installs replaces ours.
    """
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        raise KeyboardInterrupt

    previous = {}
    for s in STOP_SIGNALS:
        if s != signal.SIGINT and signal.getsignal(s) is not signal.SIG_IGN:
            previous[s] = signal.signal(s, handler)
    try:
        yield received
    finally:
        for s, old in previous.items():
            signal.signal(s, old)


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


__all__ = ["STDOUT_NAMES", "STOP_SIGNALS", "SaveOutcome", "fallback_paths", "is_stdout",
           "save_recording", "signal_name", "stdout_to_stderr", "stops_as_ctrl_c",
           "usable_output"]

