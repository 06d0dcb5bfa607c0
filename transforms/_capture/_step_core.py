"""The step core: what a RecordingTrace calls for each step it records, and the steps of one
call while it is recorded, as rows of numbers made into Steps when read.

NB: the cyclic GC walks every tracked object alive at each of its full passes, and a
recorded call keeps its steps alive until the session goes. So a step is recorded as
numbers in one row of STRIDE cells (no Python object per step, nothing for the collector
to walk), its texts and tuples numbered in small tables shared by the call's steps.
`Step` records (frozen, `model.py`) are made from the rows when someone reads them
(`CallBuilder.finish` hands out a `model.Lazy`), so recording makes none.

Two implementations with one behaviour: `PyStepCore` here (the reference), and
`transforms._capture._core.StepCore` in C (`_core.h`, `_core_*.c`, built by `setup.py`), which does the common
case of each step (a tracer met before, a user line seen before, params seen before) without
running Python code and asks the same Python functions as `PyStepCore` for everything else.
`step_core_class()` chooses: the C core when it is built from the current sources (listed in
`_core_sources.py`);
`WORKBENCH_CORE=python` asks for the reference; `WORKBENCH_REQUIRE_CORE=1` makes a missing
or stale C core an error (the tests set it: they must test the core users get).
"""
from __future__ import annotations

import functools
import hashlib
import os
import warnings
from array import array
from typing import Any, Callable

from .. import _jax as _i
from ..model import SourceLocation, Step
from ._core_sources import source_stamp
from ._locations import CODE_KINDS, LOCATIONS, code_kind_numbers, user_location
from ._modules import (
    METHOD_CODES,
    MODULE_LIBRARIES,
    current_module_path,
    is_method_code,
    module_bases,
    module_path,
)
from ._param_rules import KEYED_OBJECTS, param_summaries, params_key

__all__ = ["INLINE_FLAG", "LIBRARY_FLAG", "STRIDE", "PyStepCore", "built_steps", "step_core_class",
           "steps_from"]

# The cells of a row, in order.
# NAMES and SCOPE: the name stack's text and its scope path (_jax.current_name_stack);
# MODULE: the module path of the stack (_modules.current_module_path).
LEVEL, PRIMITIVE, KIND, PHASE, PARAMS, INPUTS, OUTPUTS, SOURCE, NAMES, SUBJAXPRS, ERROR, CAUSE, \
    INLINE, SCOPE, MODULE = range(15)
STRIDE = 15
RUNNING = -1  # OUTPUTS of a step still running
NONE = -1     # ERROR and CAUSE when None
# A jit step's INLINE cell: bits of what its jit is (Step.inline, Step.library).
INLINE_FLAG, LIBRARY_FLAG = 1, 2

# Texts every call's table starts with, at these numbers: the kinds and phases of steps.
SEEDED = ("", "primitive", "call", "custom_jvp_call", "custom_vjp_call", "error", "forward",
          "backward", "rule")
FORWARD, BACKWARD = SEEDED.index("forward"), SEEDED.index("backward")

_new_step = tuple.__new__  # a NamedTuple without its Python-level __new__

# The callbacks a core asks when its common case does not apply:
#   step_params(name, params) -> (pairs, subjaxprs)   a step's params as text pairs
#   jit_step(params) -> (pairs, subjaxprs, flags)      the same for a jit step; flags:
#                                                      INLINE_FLAG | LIBRARY_FLAG
StepParams = Callable[[str, dict], tuple]
JitStep = Callable[[dict], tuple]


class PyStepCore:
    """The steps of one call as rows of numbers in `cells`, and what each step does to them.

    Texts (primitive names, kinds, phases, name stacks and their scope paths, error messages)
    are numbers into `texts`; params and sub-jaxprs into `params` and `subjaxprs` (the tuples
    as recorded, shared by every step with the same ones); inputs and outputs into the
    describer's `tuples` (tuples of ValueRecords), sources into `sources`.
    """

    def __init__(self, describer: Any, step_params: StepParams, jit_step: JitStep,
                 jit_entries: dict):
        # jit_entries: the table jit_step keeps its answers in, by jaxpr object (read by
        # the C core only)
        self.describer = describer
        self.values: list = describer.tuples
        self.sources: list[SourceLocation | None] = []
        self._source_numbers: dict[int, int] = {}
        self._step_params = step_params
        self._jit_step = jit_step
        self.cells = array("i")
        self.texts: list[str] = list(SEEDED)
        self._text_numbers: dict[str, int] = {text: i for i, text in enumerate(SEEDED)}
        # The tuples are kept in the lists, so their ids in the dicts stay theirs.
        self.params: list[tuple] = [()]
        self._param_numbers: dict[int, int] = {id(()): 0}
        self.subjaxprs: list[tuple] = [()]
        self._subjaxpr_numbers: dict[int, int] = {id(()): 0}
        self.count = 0
        # (step index, phase number, source, its number, module path's number) of each
        # step being processed, innermost last; a barrier (user code running inside a
        # step) has no source.
        self.active: list[tuple[int, int, SourceLocation | None, int, int]] = []
        self._phases: list[int] = []              # by level: its phase's text number
        self._backward: list[SourceLocation | None] = []  # by level: its backward pass's line
        self._backward_module: list[int] = []     # by level: its backward pass's module, or -1

    # -- levels ---------------------------------------------------------------------
    def add_level(self) -> None:
        self._phases.append(FORWARD)
        self._backward.append(None)
        self._backward_module.append(-1)

    def set_phase(self, level: int, phase: str) -> None:
        self._phases[level] = self.text(phase)
        self._backward[level] = None
        self._backward_module[level] = -1

    def phase(self, level: int) -> str:
        return self.texts[self._phases[level]]

    # -- steps ----------------------------------------------------------------------
    def begin(self, level: int, primitive: Any, tracers: Any, kind: str) -> int:
        """A step starts: its row, its outputs still to come. Returns its index."""
        inputs = self.describer.describe_all(tracers)
        active = self.active
        if active:
            # A step bound while processing another comes from the same user
            # line and module, unless user code (a custom rule body) runs in between.
            cause, phase, source, number, module = active[-1]
            if phase != BACKWARD:  # what a backward step emits is backward too
                phase = self._phases[level]
            if source is None:
                source = user_location(1)
                number = self.source_number(source)
                module = self.text(current_module_path())
        else:
            cause, phase = NONE, self._phases[level]
            if phase == BACKWARD:
                # The backward pass runs deep inside JAX, called from one user line:
                # find it once per pass (a stack walk there costs tens of us).
                source = self._backward[level]
                if source is None:
                    source = self._backward[level] = user_location(1)
                module = self._backward_module[level]
                if module < 0:
                    module = self._backward_module[level] = self.text(current_module_path())
            else:
                source = user_location(1)
                module = self.text(current_module_path())
            number = self.source_number(source)
        index = self.count
        names, scope = _i.current_name_stack()
        self.cells.extend((level, self.text(primitive.name), self.text(kind), phase, 0, inputs,
                           RUNNING, number, self.text(names), 0, NONE, cause, 0,
                           self.text(scope), module))
        self.count = index + 1
        active.append((index, phase, source, number, module))
        return index

    def end(self, index: int, primitive: Any, params: dict, out: Any, multiple: bool) -> None:
        """A step ends: its outputs, params and sub-jaxprs."""
        self.active.pop()
        describer = self.describer
        outputs = describer.describe_all(out) if multiple else describer.describe_one(out)
        self._finish(index, primitive, params, outputs, None)

    def fail(self, index: int, primitive: Any, params: dict, error: str) -> None:
        """A step raised `error` (its message)."""
        active = self.active
        if active and active[-1][0] == index:
            active.pop()
        self._finish(index, primitive, params, self.describer.describe_all(()), error)

    def _finish(self, index: int, primitive: Any, params: dict, outputs: int,
                error: str | None) -> None:
        name = primitive.name
        flags = 0
        if name in _i.JIT_PRIMITIVE_NAMES:
            pairs, subjaxprs, flags = self._jit_step(params)
        else:
            pairs = param_summaries.get(params_key(name, params)) if params else ()
            subjaxprs = ()
            if pairs is None:
                pairs, subjaxprs = self._step_params(name, params)
        cells = self.cells
        base = index * STRIDE
        cells[base + PARAMS] = _number(pairs, self.params, self._param_numbers)
        if subjaxprs:
            cells[base + SUBJAXPRS] = _number(subjaxprs, self.subjaxprs, self._subjaxpr_numbers)
        if flags:
            cells[base + INLINE] = flags
        if error is not None:
            cells[base + ERROR] = self.text(error)
        cells[base + OUTPUTS] = outputs

    def event(self, level: int, name: str, values: int, source: int, error: str | None,
              cause: int | None) -> int:
        """A step that is an event (an error), not a primitive: complete at once."""
        index = self.count
        self.cells.extend((level, self.text(name), self.text("error"), self._phases[level], 0,
                           values, values, source, 0, 0,
                           NONE if error is None else self.text(error),
                           NONE if cause is None else cause, 0, 0, 0))
        self.count = index + 1
        return index

    def push_barrier(self) -> bool:
        """User code runs inside the current step: its steps find their own source line."""
        active = self.active
        if not active:
            return False
        active.append((active[-1][0], active[-1][1], None, -1, -1))
        return True

    def pop_barrier(self) -> None:
        self.active.pop()

    # -- tables ---------------------------------------------------------------------
    def text(self, text: str) -> int:
        number = self._text_numbers.get(text)
        if number is None:
            number = self._text_numbers[text] = len(self.texts)
            self.texts.append(text)
        return number

    def source_number(self, source: SourceLocation | None) -> int:
        return _number(source, self.sources, self._source_numbers)

    def source_at(self, index: int) -> SourceLocation | None:
        return self.sources[self.cells[index * STRIDE + SOURCE]]

    # -- reading --------------------------------------------------------------------
    def __len__(self) -> int:
        return self.count

    def cell(self, index: int, column: int) -> int:
        return self.cells[index * STRIDE + column]

    def parts(self) -> tuple:
        """What `steps_from` makes the steps from: plain data only (numbers, texts, records)."""
        return (self.cells, self.count, self.texts, self.params, self.subjaxprs, self.values,
                self.sources)


def _number(obj: Any, objects: list, numbers: dict[int, int]) -> int:
    """obj's number in `objects` (added when new), found by its id: interned objects kept
    alive by the list, so their ids stay theirs."""
    number = numbers.get(id(obj))
    if number is None:
        number = numbers[id(obj)] = len(objects)
        objects.append(obj)
    return number


def steps_from(cells: array, count: int, texts: list, params: list, subjaxprs: list,
               values: list, sources: list) -> tuple[Step, ...]:
    """The finished steps of rows (a core's `parts()`) as records, in order."""
    out: list[Step] = []
    append = out.append
    for index in range(count):
        base = index * STRIDE
        if cells[base + OUTPUTS] == RUNNING:
            continue
        append(_step(index, cells[base:base + STRIDE], texts, params, subjaxprs, values, sources))
    return tuple(out)


def built_steps(core: Any) -> list[Step | None]:
    """Every step of a core as a record, None for those still running."""
    cells, count, texts, params, subjaxprs, values, sources = core.parts()
    return [None if cells[i * STRIDE + OUTPUTS] == RUNNING else
            _step(i, cells[i * STRIDE:(i + 1) * STRIDE], texts, params, subjaxprs, values, sources)
            for i in range(count)]


def _step(index: int, row: Any, texts: list, params: list, subjaxprs: list, values: list,
          sources: list) -> Step:
    (level, primitive, kind, phase, param, inputs, outputs, source, names, subjaxpr, error,
     cause, inline, scope, module) = row
    return _new_step(Step, (index, level, texts[primitive], texts[kind], texts[phase],
                            params[param], values[inputs], values[outputs],
                            sources[source], texts[names], subjaxprs[subjaxpr],
                            None if error == NONE else texts[error],
                            None if cause == NONE else cause, bool(inline & INLINE_FLAG),
                            bool(inline & LIBRARY_FLAG), texts[scope], texts[module]))


# -- choosing a core ---------------------------------------------------------------------

# The checkout's root: _core_sources names the C sources relative to it.
SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def core_source_sha() -> str | None:
    """The stamp of the C core's sources as they are now, as setup.py stamps a build (None
    when they are not there: an install without sources, which has only the extension)."""
    return source_stamp(SOURCE_ROOT, hashlib.sha256)


def _c_core() -> tuple[Any, str]:
    """The C core's class, configured, or None and why not."""
    try:
        from . import _core
    except ImportError as e:
        return None, f"the C step core is not built ({e}): run `pip install -e .` or " \
                     "`bash scripts/setup.sh`"
    sha = core_source_sha()
    if sha is not None and sha != _core.SOURCE_SHA:
        return None, "the C step core was built from other sources than these: run " \
                     "`pip install -e .` or `bash scripts/setup.sh` again"
    _core.configure(**_core_setting())
    return _core.StepCore, ""


def _core_setting() -> dict[str, Any]:
    """What the C core needs from Python: the door's names and the shared tables."""
    from ._describe import SMALL_RECORD
    kinds = code_kind_numbers()
    return dict(
        tracer_type=_i.Tracer,
        tracer_parts=_i.TRACER_PART_NAMES,
        name_stack_place=_i.NAME_STACK_PLACE,
        name_stack=_i.current_name_stack,
        code_kinds=CODE_KINDS,
        locations=LOCATIONS,
        user_kind=kinds["user"],
        internal_kind=kinds["internal"],
        user_location=user_location,
        param_summaries=param_summaries,
        keyed_objects=KEYED_OBJECTS,
        small_record=SMALL_RECORD,
        seeded=SEEDED,
        jit_names=_i.JIT_PRIMITIVE_NAMES,
        primitive_name=_i.PRIMITIVE_NAME_ATTRIBUTE,
        jit_summary_params=_i.JIT_SUMMARY_PARAMS,
        module_libraries=tuple(name for name, _ in MODULE_LIBRARIES),
        module_bases=module_bases,
        method_codes=METHOD_CODES,
        is_method_code=is_method_code,
        module_path=module_path,
    )


@functools.cache
def step_core_class() -> type:
    """The class of the step core this process records with (see the module's docstring)."""
    required = os.environ.get("WORKBENCH_REQUIRE_CORE") == "1"
    if os.environ.get("WORKBENCH_CORE") == "python":
        return PyStepCore
    cls, why = _c_core()
    if cls is not None:
        return cls
    if required:
        raise ImportError(f"WORKBENCH_REQUIRE_CORE=1: {why}")
    warnings.warn(f"{why}; recording with the Python step core (slower)", RuntimeWarning,
                  stacklevel=2)
    return PyStepCore
