"""The dump's text layout, both ways, with no record class imported (the model hands its
table of classes in): the schema tag and version, the JSON data of a Session, version 3's
`lazy_at` index of where each call's big parts are, written and split, and the codec's
layouts of each version (4: steps as numbers into step shapes, transforms/model/_step_shapes.py).

`transforms.model.Session` writes through here (save, to_json_text); `transforms.model._load` reads.
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
from array import array
from itertools import chain
from typing import Any, Iterator

from . import _check, _codec
from ._step_shapes import STEP_SHAPES

__all__ = ["INDEX_KEY", "LAZY_FIELDS", "SCHEMA_NAME", "SCHEMA_VERSION", "Indexed", "gc_paused",
           "inline_tables", "json_data", "json_text", "layouts", "split_indexed"]

SCHEMA_VERSION = 4
# The layouts other than rows, from the version that brought them in: 4, a call's steps as
# numbers into tables["Step"] (transforms/model/_step_shapes.py).
LAYOUTS_SINCE: tuple[tuple[int, _codec.Layout], ...] = ((4, STEP_SHAPES),)
# Shared tables (transforms/model/_codec.py's SHARED) from the version that brought them in; the
# others are in every version's dumps (or, in SHARED_LATER, may be missing from old ones).
TABLES_SINCE = {"tuple[Level, ...]": 4}
SCHEMA_NAME = "jax-transform-workbench/session"


def json_data(session: Any, types: dict[str, type],
              version: int = SCHEMA_VERSION) -> dict[str, Any]:
    """The dump as JSON data (without the lazy_at index): see transforms/model/_codec.py for the
    layout; `types`: the record classes by name. `version`: an older layout can be written
    (2 or 3: steps as rows), for tests of the readers of older dumps. The calls' parts that
    repeat an earlier call's are one object in it (one array, one text)."""
    if not 2 <= version <= SCHEMA_VERSION:
        raise ValueError(f"transforms.model._layout: cannot write schema version {version}")
    writer = _codec.Writer(types, layouts(version), inline_tables(version),
                           repeated_parts(types, version))
    try:
        body = {f.name: writer.encode(str(f.type), [getattr(session, f.name)])[0]
                for f in dataclasses.fields(session) if f.name != "schema_version"}
    finally:
        writer.close()
    return {"schema": SCHEMA_NAME, "schema_version": version,
            **{k: v for k, v in body.items() if k != "calls"},
            "fields": writer.fields_json(), "tables": writer.tables,
            "calls": body["calls"]}


def repeated_parts(types: dict[str, type], version: int) -> frozenset[str]:
    """The annotations of a call's lazy parts (steps, trees, pairs): a loop's calls repeat
    them, as other objects with the same values (the codec converts a repeat once). But
    a layout's (version 4's steps: compared step by step, transforms/model/_step_shapes.py)."""
    own = {layout.annotation for layout in layouts(version)}
    return frozenset(str(f.type) for f in dataclasses.fields(types["Call"])
                     if f.name in LAZY_FIELDS and str(f.type) not in own)


def layouts(version: int) -> tuple[_codec.Layout, ...]:
    """The codec's layouts (other than rows) of a dump of this schema version."""
    return tuple(layout for since, layout in LAYOUTS_SINCE if version >= since)


def inline_tables(version: int) -> frozenset[str]:
    """The shared tables a dump of this version does not have yet (their values inline)."""
    return frozenset(name for name, since in TABLES_SINCE.items() if version < since)


def json_text(session: Any, types: dict[str, type], version: int = SCHEMA_VERSION) -> str:
    """The dump's text, as Session.save() writes it: JSON, with the lazy_at index last
    (from version 3; `version` as for json_data)."""
    with gc_paused():
        data = json_data(session, types, version)
        return _indexed_text(data) if version >= 3 else _dumps(data)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block.

    NB: encoding or decoding a big session makes millions of small objects, which
    sets off the collector again and again, and each full pass walks the whole
    session: about three quarters of the time of a 100,000-step load. Nothing
    made here is cyclic garbage.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            _skip_young_pass()
            gc.enable()


def _skip_young_pass() -> None:
    """What was made while the collector was off goes straight to its oldest generation.

    NB: the objects made with the collector off (a million records) are all in its youngest
    generation, and the first collection after it is on would walk every one of them (a
    second or so): none can be cyclic garbage. `gc.freeze()` then `gc.unfreeze()` moves every
    tracked object to the oldest generation and resets the youngest's count, without a pass.
    Not done when the process froze objects itself (unfreezing would release its own).
    """
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()


# --- version 3: version 2 plus an index of where each call's big parts are -----------
# `{..., "calls": [...], "lazy_at": {"fields": ["steps", "trees", "pairs"], "spans":
# [[[start, end, count], ...per field], ...per call]}}`: the character span of those arrays
# in each Call row, and their lengths. A reader parses the text with them cut out (small)
# and decodes a call's part when it is needed. Written last, so it is found from the end;
# a text whose index does not hold (edited, re-indented) is read whole, as version 2.
INDEX_KEY = ',"lazy_at":'
LAZY_FIELDS = _check.CALL_PARTS


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), check_circular=False)


def _indexed_text(data: dict[str, Any]) -> str:
    calls = data.pop("calls")
    names = data["fields"]["Call"]
    cuts = sorted(names.index(f) for f in LAZY_FIELDS)  # > 0: `index` comes first
    head = _dumps({**data, "calls": []})
    pieces = [head[:-len("]}")]]  # ... "calls":[
    position = len(pieces[0])
    spans = []
    texts: dict[int, str] = {}  # a part's text by the part's id (repeats are one object)
    for i, row in enumerate(calls):
        if i:
            pieces.append(",")
            position += 1
        row_spans, previous = [], 0
        for k in cuts:
            # the fields before this one (and its comma), then the field itself
            between = _dumps(row[previous:k])[1:-1]
            between = ("[" if previous == 0 else ",") + between + ("," if between else "")
            part = texts.get(id(row[k]))
            if part is None:
                part = texts[id(row[k])] = _dumps(row[k])
            start = position + len(between)
            row_spans.append((start, start + len(part), len(row[k])))
            pieces += (between, part)
            position = start + len(part)
            previous = k + 1
        rest = _dumps(row[previous:])[1:]
        rest = rest if rest == "]" else "," + rest
        pieces.append(rest)
        position += len(rest)
        spans.append([row_spans[cuts.index(names.index(f))] for f in LAZY_FIELDS])
    pieces.append("]" + INDEX_KEY + _dumps({"fields": LAZY_FIELDS, "spans": spans}) + "}")
    return "".join(pieces)


class Indexed:
    """A text's index: the skeleton (the text with each lazy array as `[]`, let go once
    parsed) and each call's spans, 3 numbers (start, end, count) per LAZY_FIELDS, in one
    flat array (a million-step dump has thousands of calls: no tuple or int object each)."""
    __slots__ = ("skeleton", "_spans")

    def __init__(self, skeleton: str | bytes, spans: array):
        self.skeleton = skeleton
        self._spans = spans

    def __len__(self) -> int:
        """The number of calls."""
        return len(self._spans) // _WIDTH

    def span(self, call: int, field: int) -> tuple[int, int, int]:
        at = call * _WIDTH + 3 * field
        start, stop, count = self._spans[at:at + 3]
        return start, stop, count


_WIDTH = 3 * len(LAZY_FIELDS)


def split_indexed(text: str | bytes) -> Indexed | None:
    """The text's index, if it has one that holds; None: read the text whole."""
    if isinstance(text, bytes):
        return _split_indexed_as(text, b"")
    return _split_indexed_as(text, "")


def _split_indexed_as(text: Any, empty: str | bytes) -> Indexed | None:
    def lit(s: str) -> Any:
        return s if isinstance(empty, str) else s.encode("ascii")

    end = len(text.rstrip())
    at = text.rfind(lit(INDEX_KEY))
    if at < 0 or text[end - 1:end] != lit("}"):
        return None
    try:
        index = json.loads(text[at + len(INDEX_KEY):end - 1])
    except ValueError:
        return None
    if not (isinstance(index, dict) and index.get("fields") == list(LAZY_FIELDS)
            and isinstance(index.get("spans"), list)):
        return None
    pieces: list[Any] = []
    spans = array("q")
    previous = 0
    opening, closing, cut = lit("["), lit("]"), lit("[]")
    for row in index["spans"]:
        if not (isinstance(row, list) and len(row) == len(LAZY_FIELDS)):
            return None
        # NB: every span checked before they are sorted (a mutated index may hold anything)
        if not all(isinstance(span, list) and len(span) == 3
                   and all(type(n) is int for n in span) for span in row):
            return None
        for span in sorted(row):
            start, stop, count = span
            if not (previous <= start < stop <= at and 0 <= count < 2**62
                    and text[start:start + 1] == opening and text[stop - 1:stop] == closing):
                return None
            pieces += (text[previous:start], cut)
            previous = stop
        spans.extend(chain.from_iterable(row))
    pieces += (text[previous:at], lit("}"))
    return Indexed(empty.join(pieces), spans)

