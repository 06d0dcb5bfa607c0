"""Schema version 4's steps: a call's steps as numbers into one table of step shapes.

A step shape is a Step's row without its `index`, its `cause` written as an offset back
from the step (`index - cause`, null for no cause): the fields that repeat from step to
step and from call to call (level, primitive, params, inputs, outputs, source, ...). The
file keeps them once, in `tables["Step"]`, each a row in the order of `fields["Step"]`
without "index" (its shared values are indices into the tables before it, as in a Step
row). A call's `steps` is then an array with one item per step: a shape's number, the
step's index being the previous step's plus one (the first step's 0), or, for a step
whose index is not that, `[index, shape number]`.

JSON's cost is per value, and a step row had 14 values (15 with its array): a million
steps now write a million small integers. Decoding makes exactly the Step records a row
would have made, sharing the table's values. `_codec.Writer` and `_codec.Reader` take
STEP_SHAPES as a layout of the annotation `tuple[Step, ...]`; versions 2 and 3 (rows)
are read without it.
"""
from __future__ import annotations

from itertools import chain, count, repeat
from operator import add, itemgetter
from typing import Any, Callable, Sequence

from ._codec import (
    Column,
    Converter,
    DumpFormatError,
    Reader,
    Writer,
    _check_types,
    _kind,
    parse,
    record_fields,
)
from ._text import safe_repr

__all__ = ["ANNOTATION", "STEP_SHAPES", "TABLE", "StepShapes"]

ANNOTATION = "tuple[Step, ...]"
TABLE = "Step"
_new = tuple.__new__


class StepShapes:
    """The layout of `tuple[Step, ...]` in version 4 (see the module's docstring)."""
    annotation = ANNOTATION
    table = TABLE

    def writer(self, writer: Writer) -> Converter:
        return _ShapesWriter(writer)

    def reader(self, reader: Reader, entries: Any) -> Callable[[str], Converter]:
        shapes = _ShapesReader(reader, entries)
        return shapes.converter


STEP_SHAPES = StepShapes()


def _cause_at(cls: type) -> int:
    """Where `cause` is among the Step's fields (the first being `index`)."""
    names = [f.name for f in record_fields(cls)]
    if names[0] != "index" or "cause" not in names:
        raise TypeError("transforms._step_shapes: Step must start with `index` and have "
                        "a `cause`")
    return names.index("cause")


class _ShapesWriter:
    """Cells of steps (one per call) -> arrays of shape numbers, filling tables["Step"]."""

    def __init__(self, writer: Writer):
        self.writer = writer
        self.cls = writer.registry["Step"]
        self.table: list = writer.tables[TABLE]
        fields = record_fields(self.cls)
        self.cause_at = _cause_at(self.cls)
        self.converters = [writer.converter(parse(f.annotation), None) for f in fields]
        # A step's shape as a key: the fields written as they are (scalars) themselves, the
        # others converted (shared values: their index in their table), the cause as an
        # offset. By value, so the numbering depends on the values only.
        self.plain = [k for k in range(1, len(fields))
                      if k != self.cause_at and self.converters[k] is list]
        self.others = [k for k in range(1, len(fields))
                       if k != self.cause_at and self.converters[k] is not list]
        # where each field of a shape's row is in a key (plain..., others..., offset)
        at: dict[int, tuple[int, int | None]] = {k: (0, i) for i, k in enumerate(self.plain)}
        at.update({k: (1 + i, None) for i, k in enumerate(self.others)})
        at[self.cause_at] = (1 + len(self.others), None)
        self._row_from_key: list[tuple[int, int | None]] = [at[k] for k in range(1, len(fields))]
        if len(self.plain) < 2:  # itemgetter of one field gives the value, not a tuple
            raise TypeError("transforms._step_shapes: Step has fewer than two scalar fields")
        self._numbers: dict[tuple, int] = {}  # shapes by value
        self._by_id: dict[tuple, int] = {}  # by the scalars, identity of the rest, offset

    def __call__(self, cells: Column) -> list:
        cells = [c if isinstance(c, tuple) else tuple(c) for c in cells]  # a Lazy: decoded
        steps = list(chain.from_iterable(cells))
        if not steps:
            return [[] for _ in cells]
        indices = list(map(itemgetter(0), steps))
        causes = map(itemgetter(self.cause_at), steps)
        offsets = [None if c is None else i - c for i, c in zip(indices, causes)]
        # First by identity (cheap: a loop's steps share their tuples and records), then,
        # for the keys not seen yet, by value: their fields converted a column at a time.
        id_keys = zip(map(itemgetter(*self.plain), steps),
                      *[map(id, map(itemgetter(k), steps)) for k in self.others], offsets)
        positions: dict[tuple, int] = {}  # each distinct key once, in the order first seen
        first = list(map(positions.setdefault, id_keys, count()))  # per step: where first
        by_id = self._by_id
        new = [(k, p) for k, p in positions.items() if k not in by_id]
        if new:
            self.writer._keep.append(steps)  # the ids in the keys stay theirs
            picked = [steps[p] for _, p in new]
            converted = [_frozen_column(self.converters[k](list(map(itemgetter(k), picked))))
                         for k in self.others]
            keys = zip(map(itemgetter(*self.plain), picked), *converted,
                       [offsets[p] for _, p in new])
            numbers = self._numbers
            for key, (id_key, _) in zip(keys, new):
                number = numbers.get(key)
                if number is None:
                    number = numbers[key] = len(self.table)
                    self.table.append(tuple(key[part] if i is None else key[part][i]
                                            for part, i in self._row_from_key))
                by_id[id_key] = number
        number_at = {p: by_id[k] for k, p in positions.items()}
        found = list(map(number_at.__getitem__, first))
        out, at = [], 0
        for cell in cells:
            n = len(cell)
            numbers_ = found[at:at + n]
            if indices[at:at + n] != list(range(n)):
                numbers_ = _with_indices(numbers_, indices[at:at + n])
            out.append(numbers_)
            at += n
        return out


def _frozen_column(column: list) -> list:
    """A converted column as keys: arrays (lists) as tuples (a step's sub-jaxprs: a list of
    indices each, mostly empty)."""
    if not any(type(v) is list for v in column):
        return column
    frozen = list(map(tuple, column))
    if any(type(x) in (list, tuple) for v in frozen for x in v):
        return [_frozen(v) for v in column]
    return frozen


def _frozen(value: Any) -> Any:
    """A row as a key: its arrays (lists) as tuples, all the way down."""
    if isinstance(value, (list, tuple)):
        return tuple(map(_frozen, value))
    return value


def _with_indices(numbers: list, indices: list) -> list:
    """A call whose step indices are not 0, 1, 2...: `[index, number]` where one is not the
    previous index plus one."""
    out: list = []
    previous = -1
    for number, index in zip(numbers, indices):
        out.append(number if index == previous + 1 and type(index) is int
                   else [index, number])
        previous = index
    return out


class _ShapesReader:
    """tables["Step"] decoded once; each call's array of shape numbers -> Step records."""

    def __init__(self, reader: Reader, entries: Any):
        self.cls = reader.registry["Step"]
        cause_at = _cause_at(self.cls)
        where = f"tables[{TABLE!r}]"
        header = reader.file_fields.get("Step", [])
        fields = record_fields(self.cls)
        for f in fields:  # NB: `index` too: the header names the fields of a Step
            if not f.has_default and f.name not in header:
                raise DumpFormatError(f"fields['Step'] lacks {f.name!r}, which Step requires")
        order = [n for n in header if n != "index"]
        if not isinstance(entries, list):
            raise DumpFormatError(f"{where}: expected an array, got {_kind(entries)}")
        for i, entry in enumerate(entries):
            if type(entry) is not list:
                raise DumpFormatError(f"{where}[{i}]: expected a step shape (an array), got "
                                      f"{_kind(entry)}")
            if len(entry) != len(order):
                raise DumpFormatError(f"{where}[{i}]: a step shape has {len(entry)} values, "
                                      f"fields['Step'] without 'index' names {len(order)}")
        by_name = {f.name: f for f in fields}
        columns = dict(zip(order, zip(*entries)))
        decoded = {}
        for name in order:
            convert = reader.converter(parse(by_name[name].annotation), None,
                                       f"{where}.{name}")
            try:
                decoded[name] = convert(columns[name]) if entries else []
            except DumpFormatError:
                _locate(reader, by_name[name].annotation, columns[name], f"{where}[{{}}].{name}")
                raise
        ordered: list[list] = []
        for f in fields[1:]:
            if f.name in decoded:
                ordered.append(decoded[f.name])
            else:
                make = f.default
                assert make is not None  # a field missing from the file has a default
                ordered.append([make() for _ in entries])
        shapes = list(zip(*ordered))  # the Step fields but `index`, in the class's order
        self.count = len(shapes)
        # A step is (index,) + head + (cause,) + tail: head and tail per shape, made once.
        self.heads = [s[:cause_at - 1] for s in shapes]
        self.offsets = [s[cause_at - 1] for s in shapes]
        self.tails = [s[cause_at:] for s in shapes]
        self.any_cause = any(o is not None for o in self.offsets)

    def converter(self, where: str) -> Converter:
        def decode(cells: Column) -> list:
            _check_types(cells, {list}, where, "an array of steps")
            if len(cells) == 1:  # a call's part, named by `where` (calls[3].steps)
                return [self.steps(cells[0], where, "")]
            # every Call row's steps at once (a dump read whole): which call is said
            return [self.steps(cell, where, f" (call {i})") for i, cell in enumerate(cells)]
        return decode

    def steps(self, cell: list, where: str, call: str) -> tuple:
        if not cell:
            return ()
        indices: Sequence[int]
        if set(map(type, cell)) == {int}:
            numbers, indices = cell, range(len(cell))
        else:
            numbers, indices = _numbers_and_indices(cell, where, call)
        if min(numbers) < 0 or max(numbers) >= self.count:
            bad = next(n for n in numbers if not 0 <= n < self.count)
            raise DumpFormatError(f"{where}{call}: step shape {bad} is outside "
                                  f"tables[{TABLE!r}] ({self.count} entries)")
        if self.any_cause:
            offsets = map(self.offsets.__getitem__, numbers)
            causes: Any = [None if o is None else i - o for i, o in zip(indices, offsets)]
        else:
            causes = repeat(None)
        rows = map(add, map(add, zip(indices), map(self.heads.__getitem__, numbers)),
                   map(add, zip(causes), map(self.tails.__getitem__, numbers)))
        return tuple(map(_new, repeat(self.cls), rows))


def _locate(reader: Reader, annotation: str, column: Column, where: str) -> None:
    """The first entry of a column that does not decode, named: its message raised."""
    for i, value in enumerate(column):
        reader.converter(parse(annotation), None, where.format(i))([value])


def _numbers_and_indices(cell: list, where: str, call: str) -> tuple[list[int], list[int]]:
    """The items of a call's steps written with an index: `[index, shape number]`."""
    numbers, indices = [], []
    previous = -1
    for position, item in enumerate(cell):
        if type(item) is int:
            number, index = item, previous + 1
        elif (type(item) is list and len(item) == 2 and type(item[0]) is int
              and type(item[1]) is int):
            index, number = item
        else:
            raise DumpFormatError(f"{where}[{position}]{call}: expected a step shape's number or "
                                  f"[index, shape number], got {safe_repr(item, 40)}")
        numbers.append(number)
        indices.append(index)
        previous = index
    return numbers, indices
