"""A call's steps while it is recorded: rows of numbers, made into Steps when read.

NB: the cyclic GC walks every tracked object alive at each of its full passes, and a
recorded call keeps its steps alive until the session goes. So a step is recorded as
numbers in one `array` (a row of STRIDE cells: no Python object per step, nothing for the
collector to walk), its texts and tuples numbered in small tables shared by the call's
steps. `Step` records (frozen, `model.py`) are made from the rows when someone reads them
(`CallBuilder.finish` hands out a `model.Lazy`), so recording makes none.
"""
from __future__ import annotations

from array import array

from .model import Step

__all__ = ["STRIDE", "StepRows", "steps_from"]

# The cells of a row, in order.
LEVEL, PRIMITIVE, KIND, PHASE, PARAMS, INPUTS, OUTPUTS, SOURCE, NAMES, SUBJAXPRS, ERROR, CAUSE, \
    INLINE = range(13)
STRIDE = 13
RUNNING = -1  # OUTPUTS of a step still running
NONE = -1     # ERROR and CAUSE when None

_new_step = tuple.__new__
# Texts every call's table starts with: the kinds and phases of steps.
_SEEDED = ("", "primitive", "call", "custom_jvp_call", "custom_vjp_call", "error", "forward",
           "backward", "rule")  # a NamedTuple without its Python-level __new__


class StepRows:
    """The steps of one call as rows of numbers in `cells`.

    Texts (primitive names, kinds, phases, name stacks, error messages) are numbers into
    `texts`; params and sub-jaxprs into `params` and `subjaxprs` (the tuples as recorded,
    shared by every step with the same ones); inputs and outputs into the describer's
    `values` (tuples of ValueRecords), sources into the call's `sources`.
    """
    __slots__ = ("cells", "texts", "_text_numbers", "params", "_param_numbers", "subjaxprs",
                 "_subjaxpr_numbers", "values", "sources", "count")

    def __init__(self, values: list, sources: list):
        self.cells = array("i")
        self.texts: list[str] = list(_SEEDED)
        self._text_numbers: dict[str, int] = {text: i for i, text in enumerate(_SEEDED)}
        # The tuples are kept in the lists, so their ids in the dicts stay theirs.
        self.params: list[tuple] = [()]
        self._param_numbers: dict[int, int] = {id(()): 0}
        self.subjaxprs: list[tuple] = [()]
        self._subjaxpr_numbers: dict[int, int] = {id(()): 0}
        self.values = values
        self.sources = sources
        self.count = 0

    def text(self, text: str) -> int:
        number = self._text_numbers.get(text)
        if number is None:
            number = self._text_numbers[text] = len(self.texts)
            self.texts.append(text)
        return number

    def begin(self, level: int, primitive: str, kind: str, phase: str, inputs: int,
              cause: int | None, source: int, names: str) -> int:
        """A step starts: its row, its outputs still to come. Returns its index."""
        numbers = self._text_numbers
        p, k, f, n = numbers.get(primitive), numbers.get(kind), numbers.get(phase), numbers.get(names)
        if p is None or k is None or f is None or n is None:
            p, k, f, n = self.text(primitive), self.text(kind), self.text(phase), self.text(names)
        self.cells.extend((level, p, k, f, 0, inputs, RUNNING, source, n, 0, NONE,
                           NONE if cause is None else cause, 0))
        index = self.count
        self.count = index + 1
        return index

    def end(self, index: int, outputs: int, params: tuple, subjaxprs: tuple, inline: bool,
            error: str | None = None) -> None:
        """A step ends: its outputs, params and sub-jaxprs (and error, when it raised)."""
        cells = self.cells
        base = index * STRIDE
        number = self._param_numbers.get(id(params))
        if number is None:
            number = self._param_numbers[id(params)] = len(self.params)
            self.params.append(params)
        cells[base + PARAMS] = number
        if subjaxprs:
            number = self._subjaxpr_numbers.get(id(subjaxprs))
            if number is None:
                number = self._subjaxpr_numbers[id(subjaxprs)] = len(self.subjaxprs)
                self.subjaxprs.append(subjaxprs)
            cells[base + SUBJAXPRS] = number
        if inline:
            cells[base + INLINE] = 1
        if error is not None:
            cells[base + ERROR] = self.text(error)
        cells[base + OUTPUTS] = outputs

    def event(self, level: int, name: str, kind: str, phase: str, values: int, source: int,
              error: str | None, cause: int | None) -> int:
        """A step that is an event (an error), not a primitive: complete at once."""
        index = self.begin(level, name, kind, phase, values, cause, source, "")
        if error is not None:
            self.cells[index * STRIDE + ERROR] = self.text(error)
        self.cells[index * STRIDE + OUTPUTS] = values
        return index

    def __len__(self) -> int:
        return self.count

    def finished(self, index: int) -> bool:
        return self.cells[index * STRIDE + OUTPUTS] != RUNNING

    def kind(self, index: int) -> str:
        return self.texts[self.cells[index * STRIDE + KIND]]

    def level(self, index: int) -> int:
        return self.cells[index * STRIDE + LEVEL]

    def failed(self, index: int) -> bool:
        """The step (finished, not an event) raised."""
        return self.cells[index * STRIDE + ERROR] != NONE

    def step(self, index: int) -> Step:
        """Step `index` as a record (the step must be finished)."""
        (level, primitive, kind, phase, params, inputs, outputs, source, names, subjaxprs, error,
         cause, inline) = self.cells[index * STRIDE:(index + 1) * STRIDE]
        texts = self.texts
        values = self.values
        return _new_step(Step, (index, level, texts[primitive], texts[kind], texts[phase],
                                self.params[params], values[inputs], values[outputs],
                                self.sources[source], texts[names], self.subjaxprs[subjaxprs],
                                None if error == NONE else texts[error],
                                None if cause == NONE else cause, inline == 1))

    def steps(self) -> tuple[Step, ...]:
        """The finished steps as records, in order."""
        return steps_from(*self.parts())

    def parts(self) -> tuple:
        """What `steps_from` makes the steps from: plain data only (numbers, texts, records)."""
        return (self.cells, self.count, self.texts, self.params, self.subjaxprs, self.values,
                self.sources)

    def finished_count(self) -> int:
        cells = self.cells
        return sum(1 for index in range(self.count) if cells[index * STRIDE + OUTPUTS] != RUNNING)

    def built(self) -> list[Step | None]:
        """Every step as a record, None for those still running."""
        return [self.step(i) if self.finished(i) else None for i in range(self.count)]



def steps_from(cells: array, count: int, texts: list, params: list, subjaxprs: list,
               values: list, sources: list) -> tuple[Step, ...]:
    """The finished steps of rows (StepRows.parts) as records, in order."""
    out: list[Step] = []
    append = out.append
    for index in range(count):
        base = index * STRIDE
        if cells[base + OUTPUTS] == RUNNING:
            continue
        (level, primitive, kind, phase, param, inputs, outputs, source, names, subjaxpr, error,
         cause, inline) = cells[base:base + STRIDE]
        append(_new_step(Step, (index, level, texts[primitive], texts[kind], texts[phase],
                                params[param], values[inputs], values[outputs],
                                sources[source], texts[names], subjaxprs[subjaxpr],
                                None if error == NONE else texts[error],
                                None if cause == NONE else cause, inline == 1)))
    return tuple(out)
