"""The compact JSON layout of a session dump (schema version 2), driven by the record fields.

A record is a *row*: a JSON array of its field values, in the order the file's
`fields` header lists for its class. Tuples are arrays. Values that repeat a
lot (the SHARED annotations: tracer descriptions, their tuples, parameter
pairs, source lines, avals) are stored once, in `tables[annotation]`, and
referenced by index. Everything is derived from the field annotations of the
record classes, so a new record type or a new field (with a default) needs no
change here.

Encoding and decoding work a column at a time: the rows of a `tuple[Step, ...]`
are transposed with `zip`, each field's column is checked and converted in bulk
(type sets, min/max of indices), and the records are built with `map`. That is
what makes 100,000 steps load in about a second: no per-value dispatch on
annotation text. The annotations themselves, parsed, are `_annotations.py`'s.
"""
from __future__ import annotations

from itertools import chain, compress, islice, repeat
from operator import add, attrgetter, is_, itemgetter
from typing import Any, Callable, Protocol, Sequence

from ._annotations import TypeExpr, is_namedtuple, parse, record_fields, scalar_types
from ._lazy import Lazy

# Stored once per file and referenced by index. NB: order matters: inside a table's
# entries, a shared annotation listed *earlier* is a reference; the others (a type
# nested in itself, such as a ValueRecord's children) are written inline.
SHARED = (
    "tuple[str, ...]",
    "tuple[tuple[str, str], ...]",
    "SourceLocation",
    "ValueRecord",
    "tuple[ValueRecord, ...]",
    "JaxprRecord",
    "tuple[Stage, ...]",  # a signature's stages, shared by every call with it
    "tuple[Level, ...]",  # a call's levels (schema version 4): every call of a function's
)
# Shared since a later writer: a dump without the table has these values inline.
SHARED_LATER = frozenset({"tuple[Stage, ...]", "tuple[Level, ...]"})

Column = Sequence[Any]
Converter = Callable[[Column], list]


class DumpFormatError(ValueError):
    """The dump's data does not match the record classes (a wrong type, a bad index...)."""


class Layout(Protocol):
    """A layout of one annotation other than rows, with a table of its own after SHARED
    (schema version 4's steps: transforms/model/_step_shapes.py)."""
    annotation: str
    table: str

    def writer(self, writer: Writer) -> Converter: ...

    def reader(self, reader: Reader, entries: Any) -> Callable[[str], Converter]:
        """Decodes (and checks) the table's entries; returns a converter per `where`."""
        ...


def is_reference(expr: TypeExpr, within: str | None) -> bool:
    """Is a value of this type written as an index into its table (in this context)?"""
    text = str(expr)
    if text not in SHARED:
        return False
    return within is None or SHARED.index(text) < SHARED.index(within)


# --- writing ------------------------------------------------------------------------

class Writer:
    """Encodes columns of values by annotation, filling the shared tables (one per save)."""

    def __init__(self, registry: dict[str, type], layouts: Sequence[Layout] = (),
                 inline: frozenset[str] = frozenset(), repeated: frozenset[str] = frozenset()):
        """`inline`: SHARED annotations written inline, as writers before their table did
        (SHARED_LATER; for a dump of an older version). `repeated`: annotations whose
        values often repeat an earlier one as other objects (a loop's calls' trees and
        pairs): a value equal to the latest of its length is converted once
        (`_once_per_repeat`)."""
        self.registry = registry
        self._inline = inline
        self._repeated = repeated
        self.tables: dict[str, list] = {name: [] for name in SHARED if name not in inline}
        self.tables.update((layout.table, []) for layout in layouts)
        self._layouts = {layout.annotation: layout for layout in layouts}
        self._special: dict[str, Converter] = {}
        self._by_id: dict[str, dict[int, int]] = {name: {} for name in SHARED}
        self._by_value: dict[str, dict[Any, int]] = {name: {} for name in SHARED}
        self._keep: list[Any] = []  # interned objects stay alive, so their ids stay unique
        self._rows: dict[tuple[str, str | None], _RowsWriter] = {}

    def encode(self, annotation: str, values: Column) -> list:
        """A column of values as JSON-ready data (tables filled as a side effect)."""
        return list(self.converter(parse(annotation), None)(values))

    def fields_json(self) -> dict[str, list[str]]:
        return {name: [f.name for f in record_fields(cls)]
                for name, cls in sorted(self.registry.items())}

    def converter(self, expr: TypeExpr, within: str | None) -> Converter:
        made = self._converter(expr, within)
        if within is None and str(expr) in self._repeated:
            return _once_per_repeat(made)
        return made

    def _converter(self, expr: TypeExpr, within: str | None) -> Converter:
        if scalar_types(expr) is not None:
            return list
        if within is None and str(expr) in self._layouts:
            text = str(expr)
            if text not in self._special:
                self._special[text] = self._layouts[text].writer(self)
            return self._special[text]
        if is_reference(expr, within) and str(expr) not in self._inline:
            return self._reference(str(expr))
        optional = expr.optional_part
        if optional is not None:
            return _skipping_none(self.converter(optional, within))
        if expr.name in self.registry:
            key = (expr.name, within)
            if key not in self._rows:  # registered before its fields: types nest in themselves
                self._rows[key] = _RowsWriter(self, self.registry[expr.name], within)
            return self._rows[key]
        if expr.is_variadic:
            item = expr.args[0]
            if scalar_types(item) is not None:
                return list  # json writes tuples of scalars as arrays
            inner = self.converter(item, within)
            if inner is list:  # tuples of tuples of scalars (a step's params): as they are
                return list
            return _variadic(inner, list)
        if expr.name == "tuple":
            if all(scalar_types(a) is not None for a in expr.args):
                return list
            return _fixed([self.converter(a, within) for a in expr.args])
        if expr.name == "dict" and all(scalar_types(a) for a in expr.args):
            return list
        raise TypeError(f"transforms.model._codec: cannot write the annotation {expr}")

    def _reference(self, table: str) -> Converter:
        by_id = self._by_id[table]

        def encode(values: Column) -> list:
            ids = list(map(id, values))
            found = list(map(by_id.get, ids))
            if None in found:  # first sightings (and None values): each distinct object once
                # NB: only the values not found yet (a column may hold a million steps' values)
                unseen = list(map(is_, found, repeat(None)))
                first = dict(zip(compress(ids, unseen), compress(values, unseen)))
                first.pop(id(None), None)
                if first:
                    self._intern(table, first)
                    found = list(map(by_id.get, ids))
            return found
        return encode

    def _intern(self, table: str, first: dict[int, Any]) -> None:
        """Objects seen for the first time (by id, in the order seen): each given its value's
        index, the values not in the table yet converted and appended, in that order."""
        by_value = self._by_value[table]
        objects = list(first.values())
        # NB: by value in C: a million steps' values are a few hundred thousand objects and
        # a few dozen values; only the distinct values take a Python step each.
        distinct = Numbering()
        numbers = list(map(distinct.__getitem__, objects))
        indices = []
        for value in distinct:
            index = by_value.get(value)
            if index is None:
                entry = self.converter(parse(table), table)([value])[0]
                index = by_value[value] = len(self.tables[table])
                self.tables[table].append(entry)
            indices.append(index)
        self._by_id[table].update(zip(first, map(indices.__getitem__, numbers)))
        self._keep.append(objects)

    def close(self) -> None:
        """Lets go of what encoding kept (its tables stay): by id and by value, the objects
        seen, the converters. NB: they refer back to the writer, a cycle only the cyclic
        GC would free, walking every object they hold (a quarter of a second after a
        million-step save). The writer encodes nothing more."""
        for rows in self._rows.values():
            rows._converters = None  # a type nested in itself refers to its own converter
        self._special.clear()
        self._rows.clear()
        self._by_id.clear()
        self._by_value.clear()
        self._keep.clear()


class _RowsWriter:
    """Records of one class -> rows (tuples, which json writes as arrays)."""

    def __init__(self, writer: Writer, cls: type, within: str | None):
        self.cls, self.writer, self.within = cls, writer, within
        self.fields = record_fields(cls)
        self._converters: list[Converter] | None = None  # built on first use (recursion)

    def __call__(self, records: Column) -> list:
        if not records:
            return []
        if self._converters is None:
            self._converters = [self.writer.converter(parse(f.annotation), self.within)
                                for f in self.fields]
        if is_namedtuple(self.cls):
            return self._tuple_rows(records, self._converters)
        columns = [list(map(attrgetter(f.name), records)) for f in self.fields]
        return list(zip(*(c(col) for c, col in zip(self._converters, columns))))

    @staticmethod
    def _tuple_rows(records: Column, converters: list[Converter]) -> list:
        """NamedTuple records (a million steps): each run of fields written as they are
        (scalars) is sliced out of the records whole, only the other fields are taken a
        column at a time and converted; a row is its runs joined (tuple + tuple, in C)."""
        runs: list[Any] = []
        i, n = 0, len(converters)
        while i < n:
            plain = converters[i] is list
            j = i + 1
            while j < n and (converters[j] is list) == plain:
                j += 1
            if plain:
                runs.append(map(itemgetter(slice(i, j)), records))
            else:
                runs.append(zip(*[converters[k](list(map(itemgetter(k), records)))
                                  for k in range(i, j)]))
            i = j
        rows = runs[0]
        for run in runs[1:]:
            rows = map(add, rows, run)
        return list(rows)


class Numbering(dict):
    """Keys numbered as first seen (0, 1, 2...): `numbering[key]` adds a missing key.

    NB: `map(numbering.__getitem__, keys)` numbers a column in C; only a new key takes a
    Python call (a defaultdict whose factory were its own `__len__` would do it all in C,
    but would refer to itself: a cycle, left for the cyclic GC to free)."""

    def __missing__(self, key: Any) -> int:
        number = self[key] = len(self)
        return number


def _once_per_repeat(inner: Converter) -> Converter:
    """Each cell equal to the latest earlier cell of its length takes that cell's converted
    value (the same object, so a writer of text can make its text once too).

    NB: a loop's calls record the same trees and pairs again, as other objects: compared
    with `==` (in C), a million-step session's calls convert and write their trees (45 of
    its 50 MB) ten times faster. The output is what converting every cell gives: a repeat
    brings no value its cell did not bring first, and equal values of a field's type are
    the same JSON (the types the loader checks: no bool in an int field, so `1 == True`
    cannot join two texts; the tables' interning by value relies on it too)."""
    def convert(cells: Column) -> list:
        # a Lazy: decoded for this, not kept decoded (NB: a recorded call's steps stay rows)
        cells = [c if isinstance(c, tuple) else c.peek() if isinstance(c, Lazy) else tuple(c)
                 for c in cells]
        unique: list = []
        which: list[int] = []  # per cell, its number in `unique`
        latest: dict[int, int] = {}  # per length, the number of the latest unique cell
        for cell in cells:
            number = latest.get(len(cell))
            if number is None or not (cell is unique[number] or cell == unique[number]):
                number = latest[len(cell)] = len(unique)
                unique.append(cell)
            which.append(number)
        if len(unique) == len(cells):
            return inner(cells)
        return list(map(inner(unique).__getitem__, which))
    return convert


def _skipping_none(inner: Converter) -> Converter:
    def convert(values: Column) -> list:
        present = [v for v in values if v is not None]
        if len(present) == len(values):
            return inner(values)
        done = iter(inner(present))
        return [None if v is None else next(done) for v in values]
    return convert


def _variadic(item: Converter, container: type) -> Converter:
    """Each cell a sequence: convert all items as one column, then cut it back into cells."""
    def convert(cells: Column) -> list:
        lengths = list(map(len, cells))
        if not any(lengths):  # e.g. a million steps without sub-jaxprs
            return [container() for _ in lengths]
        done = iter(item(list(chain.from_iterable(cells))))
        return [container(islice(done, n)) for n in lengths]
    return convert


def _fixed(parts: list[Converter]) -> Converter:
    """Each cell a fixed-length tuple: convert position by position."""
    def convert(cells: Column) -> list:
        if not cells:
            return []
        return list(zip(*(p(col) for p, col in zip(parts, zip(*cells)))))
    return convert


# --- reading -------------------------------------------------------------------------

class Reader:
    """Decodes columns by annotation, checking every value; tables decoded up front."""

    def __init__(self, registry: dict[str, type], fields: Any, tables: Any,
                 layouts: Sequence[Layout] = ()):
        self.registry = registry
        self.file_fields = self._checked_fields(fields)
        self.tables: dict[str, list] = {}
        self._special: dict[str, Callable[[str], Converter]] = {}
        # written inline by writers older than their table
        self._inline = {name for name in SHARED_LATER
                        if not (isinstance(tables, dict) and name in tables)}
        self._rows: dict[tuple[str, str | None], _RowsReader] = {}
        if not isinstance(tables, dict):
            raise DumpFormatError(f"'tables' must be an object, got {_kind(tables)}")
        known = (*SHARED, *(layout.table for layout in layouts))
        unknown = sorted(set(tables) - set(known))
        if unknown:
            raise DumpFormatError(f"unknown table {unknown[0]!r} (this workbench reads "
                                  f"{', '.join(known)} in this version)")
        for name in SHARED:  # in order: a table refers only to tables before it
            entries = tables.get(name, [])
            if not isinstance(entries, list):
                raise DumpFormatError(f"tables[{name!r}]: expected an array, got "
                                      f"{_kind(entries)}")
            self.tables[name] = self.converter(parse(name), name,
                                               f"tables[{name!r}]")(entries)
        for layout in layouts:  # after SHARED: their entries refer to those tables
            self._special[layout.annotation] = layout.reader(self, tables.get(layout.table, []))

    def decode(self, annotation: str, values: Any, where: str) -> list:
        if not isinstance(values, list):
            raise DumpFormatError(f"{where}: expected an array, got {_kind(values)}")
        return self.converter(parse(annotation), None, where)(values)

    def _checked_fields(self, fields: Any) -> dict[str, list[str]]:
        if not isinstance(fields, dict):
            raise DumpFormatError(f"'fields' must be an object, got {_kind(fields)}")
        for cls_name, names in fields.items():
            if cls_name not in self.registry:
                raise DumpFormatError(f"fields: unknown record type {cls_name!r}")
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise DumpFormatError(f"fields[{cls_name!r}]: expected an array of names")
            known = {f.name for f in record_fields(self.registry[cls_name])}
            extra = [n for n in names if n not in known]
            if extra:
                raise DumpFormatError(f"fields[{cls_name!r}]: {cls_name} has no field "
                                      f"{extra[0]!r} (a dump from a newer workbench?)")
            if len(set(names)) != len(names):
                raise DumpFormatError(f"fields[{cls_name!r}]: a field is listed twice")
        return fields

    def converter(self, expr: TypeExpr, within: str | None, where: str) -> Converter:
        types = scalar_types(expr)
        if types is not None:
            return _checked_scalars(types, str(expr), where)
        if within is None and str(expr) in self._special:
            return self._special[str(expr)](where)
        if is_reference(expr, within) and str(expr) not in self._inline:
            return self._reference(str(expr), where)
        optional = expr.optional_part
        if optional is not None:
            if is_reference(optional, within) and str(optional) not in self._inline:
                return self._reference(str(optional), where, optional=True)
            return _skipping_none(self.converter(optional, within, where))
        if expr.name in self.registry:
            key = (expr.name, within)
            if key not in self._rows:  # registered before its fields: types nest in themselves
                self._rows[key] = _RowsReader(self, expr.name, within)
            return self._rows[key]
        if expr.is_variadic:
            container = list if expr.name == "list" else tuple
            item = self.converter(expr.args[0], within, where)
            return _checked_cells(_variadic(item, container), None, where)
        if expr.name == "tuple":
            parts = [self.converter(a, within, where) for a in expr.args]
            return _checked_cells(_fixed(parts), len(parts), where)
        value_types = scalar_types(expr.args[1]) if expr.name == "dict" else None
        if value_types is not None and scalar_types(expr.args[0]):
            return _checked_dicts(value_types, str(expr.args[1]), where)
        raise TypeError(f"transforms.model._codec: cannot read the annotation {expr}")

    def _reference(self, table: str, where: str, optional: bool = False) -> Converter:
        allowed: set[type] = {int, type(None)} if optional else {int}
        what = f"an index into tables[{table!r}]" + (" or null" if optional else "")

        def decode(indices: Column) -> list:
            entries = self.tables[table]
            _check_types(indices, allowed, where, what)
            present = [i for i in indices if i is not None] if optional else indices
            if present and (min(present) < 0 or max(present) >= len(entries)):
                bad = next(i for i in present if not 0 <= i < len(entries))
                raise DumpFormatError(f"{where}: index {bad} is outside tables[{table!r}] "
                                      f"({len(entries)} entries)")
            if len(present) < len(indices):
                return [None if i is None else entries[i] for i in indices]
            return list(map(entries.__getitem__, indices))
        return decode


class _RowsReader:
    """Rows -> records of one class, a column at a time, in the file's field order."""

    def __init__(self, reader: Reader, cls_name: str, within: str | None):
        self.reader, self.within = reader, within
        self.cls = reader.registry[cls_name]
        self.fields = record_fields(self.cls)
        self.file_order: list[str] = reader.file_fields.get(cls_name, [])
        for f in self.fields:
            if not f.has_default and f.name not in self.file_order:
                raise DumpFormatError(f"fields[{cls_name!r}] lacks {f.name!r}, which "
                                      f"{cls_name} requires")
        self._converters: dict[str, Converter] | None = None  # on first use (recursion)
        self._build = (_make_namedtuples if is_namedtuple(self.cls) else _make_dataclasses)

    def __call__(self, rows: Column) -> list:
        name = self.cls.__name__
        width = len(self.file_order)
        if not rows:  # NB: also ends the recursion of types nested in themselves
            return []
        _check_types(rows, {list}, name, f"a {name} row (an array)")
        if set(map(len, rows)) != {width}:
            bad = next(r for r in rows if len(r) != width)
            raise DumpFormatError(f"{name}: a row has {len(bad)} values, fields[{name!r}] "
                                  f"names {width}")
        if self._converters is None:
            by_name = {f.name: f for f in self.fields}
            self._converters = {
                n: self.reader.converter(parse(by_name[n].annotation), self.within,
                                         f"{name}.{n}") for n in self.file_order}
        columns = dict(zip(self.file_order, zip(*rows)))
        ordered = []
        for f in self.fields:
            if f.name in columns:
                ordered.append(self._converters[f.name](columns[f.name]))
            else:
                make = f.default
                assert make is not None  # a field missing from the file has a default
                ordered.append([make() for _ in rows])
        return self._build(self.cls, ordered)


def _make_namedtuples(cls: type, columns: list[list]) -> list:
    # NB: tuple.__new__ straight from C, skipping the NamedTuple's Python-level
    # __new__; the row width was checked, so each tuple has every field.
    return list(map(tuple.__new__, repeat(cls), zip(*columns)))


def _make_dataclasses(cls: type, columns: list[list]) -> list:
    return list(map(cls, *columns))


def _checked_scalars(types: set[type], what: str, where: str) -> Converter:
    texts = types <= {str, type(None)}

    def decode(values: Column) -> list:
        _check_types(values, types, where, what)
        if texts and len(values) > 1:
            # NB: json makes a new str for each string it reads: a column's equal texts
            # (every call's function name, every level's label) kept once.
            seen: dict[Any, Any] = {}
            return list(map(seen.setdefault, values, values))
        return list(values)
    return decode


def _checked_cells(inner: Converter, width: int | None, where: str) -> Converter:
    """Cells must be arrays (of `width` items for a fixed-length tuple)."""
    def decode(cells: Column) -> list:
        _check_types(cells, {list}, where, "an array")
        if width is not None and cells and set(map(len, cells)) != {width}:
            bad = next(c for c in cells if len(c) != width)
            raise DumpFormatError(f"{where}: expected {width} items, got {len(bad)}")
        return inner(cells)
    return decode


def _checked_dicts(value_types: set[type], what: str, where: str) -> Converter:
    def decode(cells: Column) -> list:
        _check_types(cells, {dict}, where, "an object")
        for cell in cells:
            _check_types(list(cell.values()), value_types, where, what)
        return [dict(c) for c in cells]
    return decode


def _check_types(values: Column, allowed: set[type], where: str, what: str) -> None:
    if not set(map(type, values)) <= allowed:
        bad = next(v for v in values if type(v) not in allowed)
        raise DumpFormatError(f"{where}: expected {what}, got {_kind(bad)}")


def _kind(value: Any) -> str:
    if isinstance(value, (list, dict)):
        return "an array" if isinstance(value, list) else "an object"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
