"""The journal: what a recording has so far, on disk while the program runs, readable after
the process vanished at any instant (killed, a segfault, os._exit).

    journal = Journal.open("t.json.journal", {"script": "train.py"})
    journal.begin(7, "grad(loss) at train.py:41")   # a call starts
    journal.call(call)                               # it finished: its record
    journal.close(); journal.remove()                # the dump was saved: not needed
    recovered = read_journal("t.json.journal")       # after a crash (_load.py): the Session

A file of frames, each `length (4 bytes) + crc32 (4 bytes) + payload`, appended with one
write as each happens (the way a database's write-ahead log or TensorBoard's event files
survive crashes): a process that dies mid-write leaves a last frame that is cut short or
fails its checksum, and the reader drops it with a note. Written with os.write (no buffer of
ours to lose) and not fsync'd: the kernel keeps what a dead process wrote; a machine that
loses power is another matter. The payload is a kind letter and JSON: S the dump's head
(an empty session with the run's metadata), B a call began (what it is: after a death the
reader lists it as a failed call, its error how the process ended), C a call finished (its row and
the shared table entries it added: the reader puts them together as the dump a save would
have written; a call written again, a top-level jit's stages read at last, replaces its
earlier row), P the latest step of a call in progress (its number, primitive, level and
line: a thread looks every few ms and writes one when it moved, `_recording/_progress.py`),
E how the process ended (written by the process that watched it die: workbench's
supervisor).
"""
from __future__ import annotations

import json
import os
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

from . import _codec, _layout
from ._layout import SCHEMA_VERSION
from ._records import Call, ErrorRecord
from ._session import RECORD_TYPES, Session
from ._source_location import SourceLocation

__all__ = ["JOURNAL_SUFFIX", "Journal", "Recovered", "journal_of", "read_frames", "step_text"]

JOURNAL_SUFFIX = ".journal"
_HEADER = struct.Struct("<II")  # payload length, crc32 of the payload
_MAX_FRAME = 1 << 31


def journal_of(dump: str) -> str:
    """The journal written beside `dump` while it is recorded."""
    return dump + JOURNAL_SUFFIX


def frame(kind: str, payload: bytes) -> bytes:
    body = kind.encode("ascii") + payload
    return _HEADER.pack(len(body), zlib.crc32(body)) + body


class Journal:
    """The writing side: one frame per event, appended with one write.

    A call frame holds the call's row and what it added to the dump's shared tables: one
    encoder for the whole run (as one save has), so what calls share (their stages, texts,
    step shapes) is written once, and the reader rebuilds the dump a save would write."""

    def __init__(self, fd: int, path: str):
        self.fd, self.path = fd, path
        self._writer = _codec.Writer(RECORD_TYPES, _layout.layouts(SCHEMA_VERSION),
                                     _layout.inline_tables(SCHEMA_VERSION),
                                     _layout.repeated_parts(RECORD_TYPES, SCHEMA_VERSION))
        self._written = dict.fromkeys(self._writer.tables, 0)  # entries in earlier frames

    @classmethod
    def open(cls, path: str, metadata: dict[str, str], jax_version: str = "") -> Journal:
        """A new journal at path (an old one there is replaced); OSError if it cannot be."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        journal = cls(fd, path)
        # pid: a reader tells a process still writing from one that ended without a word
        head = _layout.json_data(Session(jax_version=jax_version,
                                         metadata={**metadata, "pid": str(os.getpid())}),
                                 RECORD_TYPES)
        journal._write("S", _layout._dumps(head).encode())
        return journal

    def _write(self, kind: str, payload: bytes) -> None:
        data = frame(kind, payload)
        view = memoryview(data)
        while view:  # NB: one write almost always; a short one is continued
            view = view[os.write(self.fd, view):]

    def begin(self, index: int, label: str, thread: str, transform: str = "",
              function: str = "", source: SourceLocation | None = None) -> None:
        """Call `index` began (`label`: `grad(loss) at train.py:41 (<module>)`), in `thread`;
        what it is, for the reader to list it as the call in progress after a death."""
        where = None if source is None else {"file": source.file, "line": source.line,
                                              "function": source.function}
        self._write("B", json.dumps({"index": index, "label": label, "thread": thread,
                                     "transform": transform, "function": function,
                                     "source": where}).encode())

    def step(self, index: int, step: dict[str, Any]) -> None:
        """The latest step call `index` began: {"step": its number, "primitive", "level"
        (its label), "source" (the user's line), and for a jit of JAX's own function
        "operation" (`sin`)} (written by _recording's progress thread)."""
        self._write("P", json.dumps({"index": index, **step}).encode())

    def call(self, call: Call) -> None:
        """A finished call: its row, and the shared table entries it added."""
        with _layout.gc_paused():
            row = self._writer.encode("list[Call]", [[call]])[0][0]
            added = {}
            for name, entries in self._writer.tables.items():
                if len(entries) > self._written[name]:
                    added[name] = entries[self._written[name]:]
                    self._written[name] = len(entries)
            self._write("C", _layout._dumps({"call": row, "tables": added}).encode())

    @staticmethod
    def append_end(path: str, how: str) -> None:
        """Say how the process ended in the journal it left (its supervisor's frame)."""
        with open(path, "ab") as f:
            f.write(frame("E", json.dumps({"how": how}).encode()))

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            self._writer.close()

    def remove(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


# The error of the call a process died in (ErrorRecord.type_name): no exception was raised.
PROCESS_ENDED = "process ended"


@dataclass
class Recovered:
    """What a journal holds: the session of the calls that finished, and what happened."""
    session: Session
    in_progress: str = ""       # the call that had begun and not finished ("" for none)
    # that call as its begin frame said: {"index", "transform", "function", "source",
    # "thread"} (older journals: no transform)
    begun: dict[str, Any] = field(default_factory=dict)
    last_step: dict[str, Any] = field(default_factory=dict)  # its latest step recorded:
    # {"step", "primitive", "level", "source"} and for a library jit "operation", as the
    # progress frame said
    how: str = ""               # how the process ended ("" when nobody saw it end)
    pid: int | None = None      # the process that wrote it (None: an older journal)
    running: bool = False       # that process was alive when the journal was read
    notes: list[str] = field(default_factory=list)  # frames dropped, and why

    def as_session(self) -> Session:
        """The session, its metadata saying how the run ended and what was dropped."""
        session = self.session
        session.metadata["ended"] = self.ending()
        died_in = self.died_in()
        if died_in is not None:
            session.calls.append(died_in)
        if self.notes:
            session.metadata["journal_notes"] = "; ".join(self.notes)
        title = session.title or session.metadata.get("title", "")
        what = "so far" if self.running else "recovered"
        session.title = f"{title} ({what}: {self.ending()})" if title else \
            f"{what}: {self.ending()}"
        return session

    def died_in(self) -> Call | None:
        """The call in progress when the process ended, as a failed call: what it was, and
        the ending as its error (None: no call was, or the process still runs)."""
        begun = self.begun
        if not self.in_progress or self.running or not begun.get("transform"):
            return None
        where = begun.get("source")
        source = None if not isinstance(where, dict) else SourceLocation(
            str(where.get("file", "")), int(where.get("line", 0)), str(where.get("function", "")))
        error = ErrorRecord(PROCESS_ENDED, self.ending(), None, None, source)
        return Call(int(begun["index"]), str(begun["transform"]), str(begun.get("function", "")),
                    source, errors=(error,), thread=str(begun.get("thread", "")))

    def ending(self) -> str:
        """`the process died by SIGSEGV, during call 7 (...), after `dot_general` ...`."""
        text = self.how or self._unseen_end()
        if self.in_progress:
            text += f", during call {self.in_progress}"
            if self.last_step:
                text += f", after {step_text(self.last_step)}"
        elif self.session.calls:
            text += f", after call {self.session.calls[-1].index} finished"
        return text

    def _unseen_end(self) -> str:
        """What is known when nobody saw the process end (no ending frame)."""
        if self.pid is None:
            return "the process ended without saving its recording (how is unknown)"
        if self.running:
            return f"still running (pid {self.pid})"
        return (f"the process (pid {self.pid}) ended without a word: no dump saved, and "
                f"nobody saw how it ended")


def _alive(pid: int) -> bool:
    """Whether process pid is alive (signal 0 checks without sending one)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def read_frames(path: str) -> tuple[dict[str, Any] | None, Recovered]:
    """The dump's data the journal holds (None: no header frame) and what happened; a frame
    cut short or corrupt is dropped (with what follows it, which cannot be framed) with a
    note. Raises OSError when the file cannot be read; never for its content. `_load`'s
    read_journal makes the Session of it."""
    with open(path, "rb") as f:
        data = f.read()
    recovered = Recovered(Session())
    head: dict[str, Any] | None = None
    rows: list[Any] = []
    positions: dict[Any, int] = {}  # call index -> its row's position
    begun: dict[int, dict[str, Any]] = {}
    steps: dict[int, dict[str, Any]] = {}
    position = 0
    while position < len(data):
        kind, payload, end, problem = _next_frame(data, position)
        if problem:
            recovered.notes.append(f"the journal's frame at byte {position} {problem}: it and "
                                   f"the {len(data) - position} bytes from it were dropped")
            break
        try:
            value = json.loads(payload)
        except ValueError as e:
            recovered.notes.append(f"the frame at byte {position} is not JSON ({e}): dropped")
            value = None
        position = end
        if not isinstance(value, dict):
            continue
        if kind == "S" and head is None:
            head = value
        elif kind == "C" and head is not None and isinstance(value.get("tables"), dict):
            for name, entries in value["tables"].items():
                head["tables"].setdefault(name, []).extend(entries)
            row = value.get("call")
            index = row[0] if isinstance(row, list) and row else None
            if index in positions:  # the call again, changed (a jit's stages read at last)
                rows[positions[index]] = row
            else:
                positions[index] = len(rows)
                rows.append(row)
            begun.pop(index, None)  # type: ignore[arg-type]
        else:
            try:
                _apply(kind, value, recovered, begun, steps)
            except (KeyError, TypeError, ValueError) as e:
                recovered.notes.append(f"a frame of kind {kind!r} could not be read ({e}): "
                                       f"dropped")
    if begun:
        index = max(begun)
        recovered.begun = begun[index]
        recovered.in_progress = f"{index} ({recovered.begun['said']})"
        recovered.last_step = steps.get(index, {})
    if head is not None:
        head["calls"] = rows
        _note_writer(head, recovered)
    return head, recovered


def _note_writer(head: dict[str, Any], recovered: Recovered) -> None:
    """The writer's pid (the header's), and whether it runs still, when no ending was said."""
    metadata = head.get("metadata")
    pid = metadata.get("pid") if isinstance(metadata, dict) else None
    if isinstance(pid, str) and pid.isdigit() and int(pid) > 0:
        recovered.pid = int(pid)
        recovered.running = not recovered.how and _alive(recovered.pid)


def _apply(kind: str, value: dict, recovered: Recovered, begun: dict[int, dict[str, Any]],
           steps: dict[int, dict[str, Any]]) -> None:
    if kind == "B":
        thread = value.get("thread", "")
        where = f" in thread {thread}" if thread and thread != "MainThread" else ""
        begun[int(value["index"])] = {**value, "said": str(value.get("label", "")) + where}
    elif kind == "P":
        step = {"step": int(value["step"]), **{k: str(value.get(k, "")) for k in _STEP_TEXTS}}
        if value.get("operation"):  # a jit of JAX's own function (older journals: none)
            step["operation"] = str(value["operation"])
        steps[int(value["index"])] = step
    elif kind == "E":
        recovered.how = str(value.get("how", ""))
    else:
        recovered.notes.append(f"a frame of unknown kind {kind!r}: dropped")


_STEP_TEXTS = ("primitive", "level", "source")


def step_text(step: dict[str, Any]) -> str:
    """The step as an ending says it: `dot_general` (step 12) at t.py:41 (loss) under jit#1."""
    # NB: a jit of JAX's own function reads as the operation it stands for, as readers list it
    text = f"`{step.get('operation') or step.get('primitive', '')}` (step {step.get('step', '?')})"
    if step.get("source"):
        text += f" at {step['source']}"
    if step.get("level"):
        text += f" under {step['level']}"
    return text


def _next_frame(data: bytes, position: int) -> tuple[str, bytes, int, str]:
    """(kind, payload, where the next frame starts, "") or a problem with this one."""
    if len(data) - position < _HEADER.size:
        return "", b"", 0, "is cut short (its header)"
    length, crc = _HEADER.unpack_from(data, position)
    start = position + _HEADER.size
    if length < 1 or length > _MAX_FRAME or start + length > len(data):
        return "", b"", 0, "is cut short"
    body = data[start:start + length]
    if zlib.crc32(body) != crc:
        return "", b"", 0, "fails its checksum"
    return chr(body[0]), body[1:], start + length, ""
