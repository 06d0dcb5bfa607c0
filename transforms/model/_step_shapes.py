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

from itertools import chain, compress, count, islice, repeat
from operator import add, eq, itemgetter
from typing import Any, Callable, Sequence

from .._common import safe_repr
from ._annotations import parse, record_fields
from ._codec import (
    Column,
    Converter,
    DumpFormatError,
    Numbering,
    Reader,
    Writer,
    _check_types,
    _kind,
)
from ._lazy import Lazy

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
        raise TypeError("transforms.model._step_shapes: Step must start with `index` and have "
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
        # The fields of a shape's row but the cause (its offset), by where they come from:
        # written as they are (scalars), or converted (shared values: an index into their
        # table; sub-jaxprs: a list of indices).
        self.row_fields = [k for k in range(1, len(fields)) if k != self.cause_at]
        self.converted = {k for k in self.row_fields if self.converters[k] is not list}
        # Shapes by their row (by value, so the numbers depend on the values only), each
        # numbered as first seen: the rows in the order added are tables["Step"]'s.
        self._numbers = Numbering()

    def __call__(self, cells: Column) -> list:
        # a Lazy: decoded for this, not kept decoded (NB: a recorded call's steps stay rows)
        cells = [c if isinstance(c, tuple) else c.peek() if isinstance(c, Lazy) else tuple(c)
                 for c in cells]
        # A call equal to an earlier one takes its array; a step equal to the one at its
        # place in an earlier call takes its number; only the other steps are keyed.
        roots, origin = _repeats(cells)
        own = [i for i, root in enumerate(roots) if root == i]  # the calls with own arrays
        steps = list(chain.from_iterable(map(cells.__getitem__, own)))
        keyed = list(compress(range(len(steps)), map(eq, origin, count())))
        number_at = dict(zip(keyed, self._numbered([steps[p] for p in keyed])))
        arrays = dict(zip(own, self._arrays([cells[i] for i in own],
                                            list(map(number_at.__getitem__, origin)))))
        return list(map(arrays.__getitem__, roots))

    def _numbered(self, steps: list) -> list[int]:
        """The steps' shape numbers, new shapes added to the table."""
        indices = map(itemgetter(0), steps)
        causes = map(itemgetter(self.cause_at), steps)
        offsets = [None if c is None else i - c for i, c in zip(indices, causes)]
        # First by identity (cheap: a call's steps share their tuples and records), then
        # one step of each key by value: its fields converted a column at a time.
        first, at = self._first_by_identity(steps, offsets)
        numbers = list(map(self._numbers.__getitem__, self._rows([steps[p] for p in at],
                                                                 [offsets[p] for p in at])))
        self.table.extend(islice(self._numbers, len(self.table), None))
        number_at = dict(zip(at, numbers))
        return list(map(number_at.__getitem__, first))

    @staticmethod
    def _arrays(cells: list[tuple], numbers: list[int]) -> list:
        """Each cell's array: its steps' shape numbers, `[index, number]` for a step whose
        index is not the previous one's plus one. Equal arrays are one list: its text is
        made once."""
        out: list[list] = []
        arrays: dict[tuple[int, ...], list] = {}
        start = 0
        for cell in cells:
            n = len(cell)
            array = numbers[start:start + n]
            indices = list(map(itemgetter(0), cell))
            if indices != list(range(n)):
                out.append(_with_indices(array, indices))
            else:
                out.append(arrays.setdefault(tuple(array), array))
            start += n
        return out

    def _first_by_identity(self, steps: list, offsets: list) -> tuple[list[int], list[int]]:
        """Per step, the position of the first step with its key (its scalars, the identity
        of its other fields, its cause's offset); and those positions, each once, in order."""
        getters = (map(itemgetter(k), steps) for k in self.row_fields)
        keys = zip(*(map(id, values) if k in self.converted else values
                     for k, values in zip(self.row_fields, getters)), offsets)
        first: dict[tuple, int] = {}
        return list(map(first.setdefault, keys, count())), list(first.values())

    def _rows(self, picked: list, offsets: list) -> Any:
        """The steps' shapes as rows (JSON-ready, hashable: arrays as tuples)."""
        columns: list[Any] = []
        for k in self.row_fields:
            values = list(map(itemgetter(k), picked))
            columns.append(_frozen_column(self.converters[k](values)) if k in self.converted
                           else values)
        columns.insert(self.cause_at - 1, offsets)
        return zip(*columns)


def _repeats(cells: list[tuple]) -> tuple[list[int], list[int]]:
    """Steps that repeat earlier ones. Each cell is compared (`==`, step by step) with the
    latest earlier cell of its length, else the latest cell. Returns, per cell, the cell
    whose array it takes: itself, or the one an equal cell takes; and, for the steps of the
    cells that take their own (in order), each step's position among them, or the position
    of the step it equals (at its place in the cell compared with), that step's in turn.

    NB: a loop's calls record the same steps again, as other objects (each call's value
    records are its own): comparing them, in C, costs less than keying them by identity
    and by value (a million steps: half a second against one and a half)."""
    roots: list[int] = []
    origin: list[int] = []
    starts: list[int] = []  # per cell, where its root's steps start in `origin`
    latest: dict[int, int] = {}  # per length, the latest cell of it
    for i, cell in enumerate(cells):
        n = len(cell)
        j = latest.get(n, i - 1 if i else None)
        latest[n] = i
        same = [] if j is None else list(map(eq, cell, cells[j]))  # to the shorter's end
        if j is not None and len(cells[j]) == n and all(same):
            roots.append(roots[j])
            starts.append(starts[j])
            continue
        start = len(origin)
        at = 0 if j is None else starts[j]
        origin.extend([o if equal else p for equal, o, p in
                       zip(same, origin[at:at + len(same)], count(start))])
        origin.extend(range(start + len(same), start + n))
        roots.append(i)
        starts.append(start)
    return roots, origin


def _frozen_column(column: list) -> list:
    """A converted column as keys: arrays (lists) as tuples (a step's sub-jaxprs: a list of
    indices each, mostly empty)."""
    types = set(map(type, column))  # NB: in C: a column may hold a million steps' values
    if list not in types:
        return column
    if types == {list} and not {list, tuple} & set(map(type, chain.from_iterable(column))):
        return list(map(tuple, column))
    return [_frozen(v) for v in column]


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
