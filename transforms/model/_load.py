"""Reading session dumps: `load(path)`, `loads(text)`, and SessionLoadError naming what is
wrong. Versions 2 to 4 are decoded here (transforms/model/_codec.py's rows and tables, version 4's
steps by transforms/model/_step_shapes.py, then transforms/model/_check.py's consistency checks), version
1 by transforms/model/_v1.py.

Writing is Session.save() (transforms/model/_session.py, through transforms/model/_layout.py); `save` here
is the same, as a function. Loading never executes anything: it only builds records.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import json
import os
import stat
from typing import Any

from . import _check, _codec, _jaxpr_text, _v1 as _dump_v1
from ._journal import Recovered, journal_of, read_frames
from ._layout import (
    LAZY_FIELDS as LAZY_FIELDS,
    SCHEMA_NAME,
    SCHEMA_VERSION,
    Indexed,
    _dumps as _layout_dumps,
    gc_paused,
    layouts,
    split_indexed,
)
from ._lazy import Lazy
from ._records import Call, EqnRecord, NonFiniteRecord, Stage, Step
from ._session import RECORD_TYPES, Session
from ._source_location import SourceLocation

__all__ = ["LAZY_FIELDS", "SessionLoadError", "load", "loads", "read_journal",
           "recovered_session", "save"]


def save(session: Session, path: str | os.PathLike) -> None:
    """Write `session` atomically (Session.save): the file appears complete or not at all."""
    session.save(path)


class SessionLoadError(ValueError):
    """A session file that cannot be read: missing, truncated, corrupt or too new."""


def load(path: str | os.PathLike, lazy: bool = False) -> Session:
    """Read a session file; raises SessionLoadError with a message that names the problem.

    Only a regular file is read (not a FIFO, a device such as /dev/zero, or a folder),
    and no more of it than its size when opened. With `lazy=True` each call's steps,
    trees and pairs are decoded (and checked) when first read (`Lazy`): a million-step
    dump opens in a fraction of the time, holding about its text's size; a malformed
    part then raises SessionLoadError when it is read.

    When a journal stands beside the file (`PATH.journal`, newer than it, or without it):
    the process recording it died before saving, and the session is the journal's, with
    how the run ended in its metadata (`ended`, `journal_notes`)."""
    path = os.fspath(path)
    shown = _echo(path, 200)
    journal = journal_of(path)
    if _journal_is_newer(journal, path):
        return recovered_session(journal)
    try:
        # NB: O_NONBLOCK, so that opening a FIFO does not wait for a writer.
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise SessionLoadError(f"{shown}: not a regular file (a session file is one)")
            data = f.read(info.st_size + 1)
        if len(data) > info.st_size:
            raise SessionLoadError(f"{shown}: the file grew while it was read")
        # NB: our dumps are ASCII (json escapes the rest): kept as bytes, a lazy load holds
        # the file's size once, not twice (bytes and str), and offsets are the same.
        text: str | bytes = data if data.isascii() else data.decode("utf-8")
    except FileNotFoundError:
        raise SessionLoadError(f"{shown}: no such file") from None
    except IsADirectoryError:
        raise SessionLoadError(f"{shown}: is a directory, not a session file") from None
    except UnicodeDecodeError:
        raise SessionLoadError(f"{shown}: not a text file (invalid UTF-8)") from None
    except OSError as e:
        raise SessionLoadError(f"{shown}: cannot read ({e.strerror})") from None
    return loads(text, source=path, lazy=lazy)


def _journal_is_newer(journal: str, path: str) -> bool:
    try:
        written = os.stat(journal).st_mtime_ns
    except OSError:
        return False
    try:
        return written >= os.stat(path).st_mtime_ns
    except OSError:
        return True


def read_journal(path: str) -> Recovered:
    """What a journal holds (its Session, the call in progress, how the process ended);
    OSError when it cannot be read, SessionLoadError when it holds no session."""
    head, recovered = read_frames(path)
    if head is None:
        raise SessionLoadError(f"{_echo(path, 200)}: not a workbench journal (no header frame)")
    session = loads(_layout_dumps(head), source=path)
    session.calls.sort(key=lambda c: c.index)
    recovered.session = session
    return recovered


def recovered_session(journal: str) -> Session:
    """The session a journal holds, said to be recovered (metadata `ended`, `journal_notes`)."""
    try:
        recovered = read_journal(journal)
    except OSError as e:
        raise SessionLoadError(f"{_echo(journal, 200)}: cannot read ({e.strerror})") from None
    return recovered.as_session()


def loads(text: str | bytes, source: str = "<string>", lazy: bool = False) -> Session:
    """A session from a dump's text (bytes: ASCII, as save() writes); SessionLoadError
    (under 500 characters) if it is bad."""
    source = _echo(source, 200)
    if not text.strip():
        raise SessionLoadError(f"{source}: the file is empty")
    try:
        with gc_paused():
            return _session_from_text(text, source, lazy)
    except RecursionError:
        raise SessionLoadError(f"{source}: malformed session data (nested too deeply)") from None


_LITERALS = ("null", "true", "false", "NaN", "Infinity", "-Infinity")


def _echo(text: str, limit: int) -> str:
    """Text from a file or the user, cut before it goes into an error message."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """JSON objects with a key written twice are refused (json would keep the last silently).

    NB: records are arrays, so a version 2 dump has only a handful of objects."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise _DuplicateKey(f"the key {_echo(repr(twice), 60)} appears twice in one object")
    return out


def _session_from_text(text: str | bytes, source: str, lazy: bool = False) -> Session:
    indexed = split_indexed(text)
    if indexed is not None:
        try:
            return _session_from(text, indexed, source, lazy)
        except _PartError:
            raise  # the index held; a call's part is bad
        except SessionLoadError:
            pass  # an index that does not hold (edited by hand?): read the text whole
    return _session_from(text, None, source, lazy)


def _session_from(text: str | bytes, indexed: Indexed | None, source: str,
                  lazy: bool) -> Session:
    try:
        if indexed is not None:
            skeleton, indexed.skeleton = indexed.skeleton, ""  # let go once parsed
            data = json.loads(skeleton, object_pairs_hook=_unique_keys)
            del skeleton
        else:
            data = json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as e:
        if isinstance(text, bytes):
            text = text.decode("ascii")
        # NB: a file cut inside a literal (`nu` of null) fails at the literal's start.
        rest = text[e.pos:].rstrip()
        ended_early = (e.pos >= len(text.rstrip()) - 1 or e.msg.startswith("Unterminated string")
                       or any(word.startswith(rest) for word in _LITERALS) and bool(rest))
        what = "truncated" if ended_early else "corrupt"
        if not ended_early and not text[:e.pos].strip():  # not JSON from its first character
            raise SessionLoadError(
                f"{source}: not a workbench session dump: it is not JSON (a dump is the .json "
                f"file `workbench run -o` or Session.save() writes; `workbench run` records a "
                f"script)") from None
        raise SessionLoadError(
            f"{source}: {what} JSON at line {e.lineno}, column {e.colno}: {e.msg}") from None
    except ValueError as e:  # a key written twice; an integer too long to read (4,300 digits)
        raise SessionLoadError(f"{source}: corrupt JSON ({_echo(str(e), 200)})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA_NAME:
        raise SessionLoadError(f"{source}: not a workbench session (no '{SCHEMA_NAME}' schema tag)")
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise SessionLoadError(f"{source}: the schema_version is missing or not an integer")
    if version > SCHEMA_VERSION:
        raise SessionLoadError(
            f"{source}: written with schema version {_echo(str(version), 20)}, but this "
            f"workbench reads up to version {SCHEMA_VERSION}; upgrade the workbench to open it")
    if version < 1:
        raise SessionLoadError(f"{source}: schema version {_echo(str(version), 20)} does not exist")
    try:
        if version == 1:
            return _with_text_facts(_dump_v1.session_v1(data, Session, RECORD_TYPES), {})
        if indexed is not None and version >= 3:
            return _session_v3(data, indexed, text, source, lazy)
        return _session_v2(data)
    except SessionLoadError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        # NB: the checks of _codec and _check raise DumpFormatError (a ValueError); the
        # others are the version 1 decoder's. The data is echoed only in part.
        raise SessionLoadError(f"{source}: malformed session data "
                               f"({type(e).__name__}: {_echo(str(e), 240)})") from None


# The top-level keys of a version 2 dump besides the Session's own fields.
_V2_HEADER = ("schema", "schema_version", "fields", "tables")


def _session_v3(data: dict[str, Any], indexed: Indexed, text: str | bytes, source: str,
                lazy: bool) -> Session:
    data.pop("lazy_at", None)
    session, reader = _session_v2(data, keep_reader=True)
    if len(session.calls) != len(indexed):
        raise ValueError(f"lazy_at has {len(indexed)} entries for "
                         f"{len(session.calls)} calls")
    parts = _Parts(reader, text, indexed, session.calls, source, lazy,
                   _lacks(data["fields"], "Step", "scope"))
    calls = []
    for position, call in enumerate(session.calls):
        found: dict[str, Any] = {}
        for k, name in enumerate(LAZY_FIELDS):
            count = indexed.span(position, k)[2]
            if getattr(call, name):
                raise ValueError(f"lazy_at: calls[{position}].{name} is not where it says")
            found[name] = (Lazy(count, _Part(parts, position, k), name) if lazy
                           else parts.decode(position, k))
        calls.append(dataclasses.replace(call, **found))
    session.calls = calls
    # NB: lazily, each part is checked as it is decoded (check_session skips it).
    _check.check_session(session, reader.tables)
    return session


class _PartError(SessionLoadError):
    """A call's steps, trees or pairs that do not decode (the index found them)."""


class _Parts:
    """Decodes the calls' steps (trees, pairs) from their spans of the text, checked as a
    whole load checks them: the codec's types, then, lazily, _check's checks of the part.

    `decoded` keeps the parts decoded so far by their text. The calls of a loop write the
    same steps (trees, pairs) again and again; decoding the same text with the same tables
    makes equal records, so a part whose text was decoded before is those records again (one
    tuple, shared by those calls, as the table's values are shared). Its checks still run."""
    __slots__ = ("reader", "text", "spans", "calls", "source", "lazy", "annotations", "decoded",
                 "scopes")

    def __init__(self, reader: _codec.Reader, text: str | bytes, spans: Indexed,
                 calls: list[Call], source: str, lazy: bool, scopes: bool):
        self.reader, self.text, self.spans, self.source = reader, text, spans, source
        self.calls = calls  # as the skeleton made them (each part empty)
        self.lazy = lazy
        self.scopes = scopes  # steps written before Step.scope: derived as they are decoded
        fields = {f.name: str(f.type) for f in dataclasses.fields(Call)}
        self.annotations = [fields[name] for name in LAZY_FIELDS]
        self.decoded: dict[tuple[int, int, int], tuple[int, int, tuple]] = {}

    def decode(self, position: int, k: int) -> tuple:
        """The part LAZY_FIELDS[k] of the call at `position`."""
        start, stop, count = self.spans.span(position, k)
        where = f"calls[{position}].{LAZY_FIELDS[k]}"
        try:
            part = self.text[start:stop]
            # NB: by the text's hash, checked against the first span with it: no copy of
            # every part's text held while loading
            key = (k, len(part), hash(part))
            hit = self.decoded.get(key)
            if hit is not None and self.text[hit[0]:hit[1]] == part:
                items = hit[2]
            else:
                with gc_paused() if gc.isenabled() else contextlib.nullcontext():
                    rows = json.loads(part, object_pairs_hook=_unique_keys)
                    items = tuple(self.reader.decode(self.annotations[k], [rows], where)[0])
                if self.scopes and LAZY_FIELDS[k] == "steps":
                    items = _steps_with_scopes(items)
                self.decoded.setdefault(key, (start, stop, items))
            if len(items) != count:
                raise ValueError(f"{len(items)} records, lazy_at says {count}")
            if self.lazy:
                _check.check_call_part(self.calls[position], LAZY_FIELDS[k], items,
                                       f"calls[{position}]")
        except (KeyError, TypeError, ValueError, IndexError, AttributeError,
                RecursionError) as e:
            raise _PartError(f"{self.source}: malformed session data ({where}: "
                             f"{type(e).__name__}: {_echo(str(e), 240)})") from None
        return items


class _Part:
    """One call's part, to decode when first read (what a model.Lazy is handed): small, as
    a million-step dump has one per call and part."""
    __slots__ = ("parts", "position", "k")

    def __init__(self, parts: _Parts, position: int, k: int):
        self.parts, self.position, self.k = parts, position, k

    def __call__(self) -> tuple:
        return self.parts.decode(self.position, self.k)


def _session_v2(data: dict[str, Any], keep_reader: bool = False) -> Any:
    for key in (*_V2_HEADER, "calls"):
        if key not in data:
            raise KeyError(f"no {key!r} in the dump")
    fields = {f.name: f for f in dataclasses.fields(Session) if f.name != "schema_version"}
    unknown = [k for k in data if k not in fields and k not in _V2_HEADER
               and not (k == "lazy_at" and data.get("schema_version", 2) >= 3)]
    if unknown:
        raise ValueError(f"unexpected top-level key {unknown[0]!r}")
    reader = _codec.Reader(RECORD_TYPES, data["fields"], data["tables"],
                           layouts(data["schema_version"]))
    values = {name: reader.decode(str(fields[name].type), [data[name]], name)[0]
              for name in fields if name in data}
    session = _with_text_facts(Session(**values, schema_version=data["schema_version"]),
                               data["fields"])
    if keep_reader:  # version 3: _session_v3 checks once the calls' parts are in place
        return session, reader
    _check.check_session(session, reader.tables)
    return session



# --- dumps from before equations' locations, line spans and scopes were recorded ---------

def _lacks(fields: dict[str, Any], record: str, name: str) -> bool:
    """Whether a dump's `fields` header has no `record.name` (written before it was)."""
    return not isinstance(fields.get(record), list) or name not in fields[record]


def _with_text_facts(session: Session, fields: dict[str, Any]) -> Session:
    """A dump whose `fields` header has no Stage.eqn_spans, EqnRecord.location or the
    records' `scope` (written before they were recorded): each derived once, here, from the
    text the recorder kept (transforms/model/_jaxpr_text.py), so that readers only ever read
    records. (A version 3 dump's steps are derived as they are decoded: _Parts.)"""
    upgrade = _TextFacts(_lacks(fields, "Stage", "eqn_spans"),
                         _lacks(fields, "EqnRecord", "location"),
                         _lacks(fields, "EqnRecord", "scope"), _lacks(fields, "Step", "scope"),
                         _lacks(fields, "NonFiniteRecord", "scope"))
    if not upgrade.needed:
        return session
    session.calls = [upgrade.call(c) for c in session.calls]
    session.processes = tuple(dataclasses.replace(p, calls=tuple(map(upgrade.call, p.calls)))
                              for p in session.processes)
    return session


class _TextFacts:
    def __init__(self, spans: bool, locations: bool, eqn_scopes: bool, step_scopes: bool,
                 finding_scopes: bool):
        self.spans, self.locations, self.eqn_scopes = spans, locations, eqn_scopes
        self.step_scopes, self.finding_scopes = step_scopes, finding_scopes
        self.needed = spans or locations or eqn_scopes or step_scopes or finding_scopes
        self._stages: dict[int, tuple[tuple[Stage, ...], tuple[Stage, ...]]] = {}
        self._where: dict[str, SourceLocation | None] = {}

    def call(self, call: Call) -> Call:
        changes: dict[str, Any] = {}
        if self.step_scopes and isinstance(call.steps, tuple) and call.steps:
            changes["steps"] = _steps_with_scopes(call.steps)
        if self.finding_scopes and call.nonfinite:
            changes["nonfinite"] = tuple(map(_finding_with_scope, call.nonfinite))
        if call.stages:
            # NB: a signature's stages are one tuple shared by its calls: upgraded once.
            hit = self._stages.get(id(call.stages))
            if hit is None or hit[0] is not call.stages:
                hit = self._stages[id(call.stages)] = (call.stages,
                                                       tuple(map(self.stage, call.stages)))
            changes["stages"] = hit[1]
        return dataclasses.replace(call, **changes) if changes else call

    def stage(self, stage: Stage) -> Stage:
        changes: dict[str, Any] = {}
        if (self.locations or self.eqn_scopes) and stage.eqns:
            changes["eqns"] = tuple(map(self.eqn, stage.eqns))
        if self.spans and stage.jaxpr is not None and not stage.eqn_spans:
            changes["eqn_spans"] = _jaxpr_text.eqn_line_spans(stage.jaxpr.text,
                                                              stage.jaxpr.eqn_count)
        return dataclasses.replace(stage, **changes) if changes else stage

    def eqn(self, eqn: EqnRecord) -> EqnRecord:
        changes: dict[str, Any] = {}
        if self.locations:
            where = self._where.get(eqn.source, _UNSEEN)
            if where is _UNSEEN:
                frame = _jaxpr_text.summary_frame(eqn.source)
                where = self._where[eqn.source] = SourceLocation(*frame) if frame else None
            changes["location"] = where
        if self.eqn_scopes and eqn.name_stack:
            changes["scope"] = _scope_of(eqn.name_stack)
        subjaxprs = tuple(dataclasses.replace(s, eqns=tuple(map(self.eqn, s.eqns)))
                          if s.eqns else s for s in eqn.subjaxprs)
        return eqn._replace(subjaxprs=subjaxprs, **changes)


_UNSEEN: Any = object()
_scope_of = functools.lru_cache(maxsize=4096)(_jaxpr_text.name_stack_scope)


def _steps_with_scopes(steps: tuple[Step, ...]) -> tuple[Step, ...]:
    """Steps of a dump written before Step.scope, each with its name stack's scopes."""
    return tuple(s._replace(scope=_scope_of(s.name_stack)) if s.name_stack else s
                 for s in steps)


def _finding_with_scope(finding: NonFiniteRecord) -> NonFiniteRecord:
    # NB: a finding inside an inner jit kept only the inner name stack (or the outer one
    # when it had none): its scope is read from that text alone.
    return dataclasses.replace(finding, scope=_scope_of(finding.name_stack))
