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
  never replaced); a folder is refused up front (`usable_output`).
"""
from __future__ import annotations

import contextlib
import os
import signal
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
    """Encode and write the dump (see the module's docstring); never raises for the disk."""
    try:
        with _stops_deferred(note):
            text = session.to_json_text()
            try:
                write_atomically(target, text)
                return SaveOutcome(target)
            except OSError as e:
                problem = _reason(e)
            for path in fallback_paths(target):
                try:
                    write_atomically(path, text)
                    return SaveOutcome(path, problem)
                except OSError:
                    continue
            return SaveOutcome(None, problem)
    except KeyboardInterrupt:
        return SaveOutcome(None, "the save was stopped (Ctrl-C twice)", abandoned=True)


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


__all__ = ["STOP_SIGNALS", "SaveOutcome", "fallback_paths", "save_recording", "signal_name",
           "stops_as_ctrl_c", "usable_output"]

