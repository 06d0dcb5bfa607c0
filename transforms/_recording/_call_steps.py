"""A call's levels and steps while it runs (CallSteps): the step core that makes a row of
each step, the describer of its values, its Level records and live LevelStates, its errors.
"""
from __future__ import annotations

from typing import Any

from .. import _jax as _i
from .._capture import (
    ERROR,
    KIND,
    LEVEL,
    NONE,
    OUTPUTS,
    RUNNING,
    SCOPE,
    STRIDE,
    Describer,
    Options,
    built_steps,
    returned_location,
    step_core_class,
    traceback_location,
)
from .._common import BoundedCache, message as error_message
from .._trees import CallTrees
from ..model import TRACES_BY_CLASS, ErrorRecord, Level, SourceLocation, Step
from ._levels import LevelCall, LevelState
from ._summaries import StepSummaries

__all__ = ["CallSteps", "level_kind"]


def level_kind(trace: Any) -> str:
    """A level on JAX's `trace`, named as the transformation a user would call."""
    trace_type = type(trace).__name__
    found = TRACES_BY_CLASS.get(trace_type)
    return found.level if found is not None else trace_type


# Level records by their fields: a loop's calls have the same levels, one record each.
_shared_levels: BoundedCache = BoundedCache(10_000)


def _level_fields(level: Level) -> tuple:
    return (level.index, level.kind, level.label, level.depth, level.parent, level.trace_type,
            level.function, level.options)


def shared_level(*fields: Any) -> Level:
    """The Level with these fields, made once (records are frozen: sharing one is safe)."""
    level = _shared_levels.get(fields)
    if level is None:
        level = _shared_levels.put(fields, Level(*fields))
    return level


class CallSteps:
    """A call's levels and steps while it runs.

    The steps are rows of numbers, made by the step core that each level's RecordingTrace
    calls (_step_core). The summaries are the session's: a training loop's steps print
    each jaxpr once.
    """

    def __init__(self, summaries: StepSummaries, inline_jnp: bool):
        self.inline_jnp = inline_jnp
        self.levels: list[Level] = []
        self.level_states: list[LevelState] = []
        self.errors: list[ErrorRecord] = []
        self.level_of_trace: dict[int, int] = {}
        self.describer = Describer(self.level_of_trace)
        self.describer.enclosing = _i.enclosing_traces(_i.current_trace())
        self.core = step_core_class()(self.describer, summaries.step_params, summaries.jit_step,
                                      summaries.jit_summaries.entries)
        self._errors_seen: set[int] = set()
        self.opened_at: list[int] = []  # per level: how many steps the call had when it opened
        # A rule's level -> the level opened inside it for the same run (see `ran_as`).
        self._ran_as: dict[int, int] = {}
        # A level whose name stack JAX started afresh -> the scope it ran in (`scope_base`).
        self._scope_bases: dict[int, str] = {}

    # -- levels ---------------------------------------------------------------
    def new_level(self, call: LevelCall, kind: str, jax_trace: Any, parent: LevelState | None,
                  function: str = "", options: Options | None = None,
                  segment: str = "") -> LevelState:
        """A new level; `segment` names it in its label in place of its kind (a jaxpr trace
        JAX made for a while_loop's body: `while_body#3`, not `jaxpr#3`)."""
        if isinstance(jax_trace, _i.RecordingTrace):
            # NB: a level entered while a recorder is current replaces it, so
            # each step is recorded once, at the innermost level that sees it.
            jax_trace = jax_trace.parent
        trace_type = type(jax_trace).__name__
        if kind == "outer":
            kind = level_kind(jax_trace)
            depth, label = 0, f"{kind}#0"
        else:
            depth = parent.depth + 1 if parent is not None else 1
            prefix = parent.label + "/" if parent is not None and parent.depth > 0 else ""
            label = f"{prefix}{segment or kind}#{depth}"
        index = len(self.levels)
        self.levels.append(shared_level(index, kind, label, depth,
                                        parent.index if parent is not None else None,
                                        trace_type, function, options.pairs if options else ()))
        self.level_of_trace[id(jax_trace)] = index
        self.describer.level_added(jax_trace)
        if parent is not None:
            base = self.scope_base(parent.index)
            if base:
                self._scope_bases[index] = base
        self.core.add_level()
        self.opened_at.append(self.core.count)
        state = LevelState(call, self.core, index, label, depth, jax_trace, self.inline_jnp)
        # Kept until the call finishes: a custom_vjp bwd runs after its level ends.
        self.level_states.append(state)
        return state

    def scope_base(self, parent: int) -> str:
        """The scope a level opened now runs in, when JAX traces it with a fresh name stack:
        the scope of the step at `parent` being processed (a custom_jvp's body, a jit's, which
        JAX traces to a jaxpr of their own under `reset_name_stack`, JAX's final program
        naming their equations under the step's scope). "" when the stack was not reset."""
        if _i.current_name_stack()[1]:
            return ""  # the stack goes on: the level's steps carry their whole scope
        core = self.core
        for i in range(core.count - 1, -1, -1):
            if core.cell(i, OUTPUTS) == RUNNING and core.cell(i, LEVEL) == parent:
                relative = core.texts[core.cell(i, SCOPE)]
                return _i.joined_scope(self._scope_bases.get(parent, ""), relative)
        return ""

    def whole_scopes(self, cells: Any, count: int) -> None:
        """Each step at a level with a scope base (`scope_base`) made to carry its whole
        scope, in `cells` (a copy of the core's rows, read into Steps after)."""
        bases = self._scope_bases
        if not bases:
            return
        core = self.core
        for i in range(count):
            base = bases.get(cells[i * STRIDE + LEVEL])
            if base is not None:
                at = i * STRIDE + SCOPE
                cells[at] = core.text(_i.joined_scope(base, core.texts[cells[at]]))

    def empty_since_opened(self, level: LevelState) -> bool:
        """No step was recorded anywhere in the call since `level` opened."""
        return self.core.count == self.opened_at[level.index]

    def ran_as(self, outer: LevelState, inner: LevelState) -> None:
        """`outer`'s body runs as `inner`, opened inside it before any step: recorded on
        `outer` (Level.ran_as) if `outer` ends with no step of its own (`settled_levels`);
        one with steps (what a vmap inside emitted at its trace) holds its own part."""
        self._ran_as[outer.index] = inner.index

    def settled_levels(self, cells: Any, count: int) -> tuple[Level, ...]:
        """The call's levels, each empty one whose run another level recorded saying which."""
        if not self._ran_as:
            return tuple(self.levels)
        with_steps = {cells[i * STRIDE + LEVEL] for i in range(count)}
        levels = list(self.levels)
        for outer, inner in self._ran_as.items():
            if outer not in with_steps:
                levels[outer] = shared_level(*_level_fields(levels[outer]), inner)
        return tuple(levels)

    # -- steps and errors -----------------------------------------------------
    def record_error(self, error: BaseException, level: LevelState | None,
                     call_source: SourceLocation | None, trees: CallTrees,
                     rule: Any = None) -> None:
        if id(error) in self._errors_seen:
            return
        self._errors_seen.add(id(error))
        step = self.failed_step(error)
        level_index = level.index if level is not None else None
        if step is None and level is not None:
            step = self.last_step_at(level.index)
        # An error JAX raises before any user code runs (a bad argument) is at the call site.
        # One raised about what a custom rule returned (`rule`) is where the rule returned.
        source = returned_location(rule, error.__traceback__) if rule is not None else None
        source = source or traceback_location(error.__traceback__) or call_source
        if level is not None:
            self.core.event(level.index, type(error).__name__, self.describer.describe_all(()),
                            self.core.source_number(source), error_message(error), step)
        facts = trees.error_fields(error, self.levels, self.built_steps(), level_index,
                                   step, source, self.describer.leaked)
        self.errors.append(ErrorRecord(_qualified_name(type(error)), error_message(error),
                                       level_index, step, source, **facts))

    def failed_step(self, error: BaseException) -> int | None:
        """The latest finished step that raised (not an error event)."""
        return self._latest_step(lambda row: row[ERROR] != NONE)

    def last_step_at(self, level: int) -> int | None:
        return self._latest_step(lambda row: row[LEVEL] == level)

    def _latest_step(self, wanted: Any) -> int | None:
        cells, count, texts = self.core.parts()[:3]
        for i in range(count - 1, -1, -1):
            row = cells[i * STRIDE:(i + 1) * STRIDE]
            if row[OUTPUTS] != RUNNING and texts[row[KIND]] != "error" and wanted(row):
                return i
        return None

    def built_steps(self) -> list[Step | None]:
        """The steps as records (rows made into Steps), None for those still running."""
        return built_steps(self.core)


def _qualified_name(cls: type) -> str:
    public = _i.public_error_name(cls)
    if public is not None:
        return public
    module = cls.__module__
    if module == "builtins":
        return cls.__name__
    return f"{module}.{cls.__qualname__}"
