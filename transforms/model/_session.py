"""The Session (every call of one `transforms.record()` block, or the processes of a
merged run) and RECORD_TYPES, the codec's registry of the record classes a dump holds."""
from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field
from typing import Any

from . import _layout
from ._compile_records import CompileKey, CompileRecord, KeyLeaf, MissReason, StaticKey
from ._device_records import (
    CollectiveRecord,
    DeviceGroup,
    DeviceRecord,
    ProcessInfo,
    ShardBlock,
    ShardingRecord,
)
from ._display import Displayed
from ._files import write_atomically
from ._layout import SCHEMA_VERSION
from ._records import (
    Call,
    EqnRecord,
    ErrorRecord,
    Growth,
    GrowthPoint,
    GrowthSeries,
    JaxprRecord,
    Level,
    Metric,
    NonFiniteRecord,
    PrimitiveCount,
    Stage,
    StageValues,
    Step,
    SubJaxprRecord,
    ValueRecord,
)
from ._source_location import SourceLocation
from ._tree_records import Diagnostic, PairRow, TreeNode, TreePair, TreeRecord, ValueSummary

# What a session with no call says (record()'s warning, `workbench show`, the terminal UI).
NOTHING_RECORDED = (
    "no call was recorded: inside record() only transforms.grad, value_and_grad, vmap, jit, jvp, "
    "vjp, linearize, jacfwd, jacrev and hessian record; jax.grad and the other jax.* called "
    "directly are JAX's own and pass unseen (call transforms.*, or run the script with "
    "`workbench run`, which records jax.* too)")

# ... and a `workbench run` of a script that made no call (jax.* were recorded there).
NOTHING_RECORDED_IN_RUN = (
    "no call was recorded: the script called no jax.grad, vmap, jit, ... transformation "
    "(calls inside the script's own `with transforms.record()` blocks go to those blocks' "
    "sessions, not to this one)")


class NothingRecordedWarning(UserWarning):
    """A record() block recorded no call (warned once a process, at the block's `with`)."""


@dataclass(frozen=True, slots=True)
class ProcessRecord:
    """One process's recording inside a merged session (see Session.processes)."""
    info: ProcessInfo
    calls: tuple[Call, ...] = ()
    title: str = ""
    metadata: tuple[tuple[str, str], ...] = ()
    jax_version: str = ""
    python_version: str = ""
    compiles: tuple[CompileRecord, ...] = ()  # its jits' traces and compiles (Session.compiles)

    @property
    def step_count(self) -> int:
        return sum(len(c.steps) for c in self.calls)


@dataclass(slots=True)
class Session(Displayed):
    """Every call recorded inside one `transforms.record()` block.

    Mutable only while recording: calls are appended as they finish.
    """
    calls: list[Call] = field(default_factory=list)
    jax_version: str = ""
    python_version: str = field(default_factory=platform.python_version)
    schema_version: int = SCHEMA_VERSION  # of the file it was loaded from; saving writes the newest
    title: str = ""           # what was recorded: a gallery example's title, a script's command line
    metadata: dict[str, str] = field(default_factory=dict)  # e.g. script, argv, description
    max_steps: int | None = None  # record(max_steps=N): the bound it was recorded with
    dropped_calls: int = 0    # calls let go between the first and the latest (max_steps)
    dropped_steps: int = 0    # their steps
    # Calls made in a thread after the block it was started in had ended: not recorded.
    unrecorded_calls: int = 0
    # A process of a jax.distributed job: which one, its devices, how it ended.
    process: ProcessInfo | None = None
    # A merged multi-process run: one record per process (the top-level calls are then
    # empty); workbench/analysis/_process_merge.py gives each as a Session of its own.
    processes: tuple[ProcessRecord, ...] = ()
    # Every trace, lowering and compilation of a jit while the block was open, in order,
    # with its cost and (for a trace after the first) why it happened.
    compiles: list[CompileRecord] = field(default_factory=list)

    @property
    def step_count(self) -> int:
        return sum(len(c.steps) for c in self.calls) + sum(p.step_count for p in self.processes)

    def dropped_note(self) -> str:
        """What a bounded recording (record(max_steps=N)) let go, in words; "" for nothing."""
        if not self.dropped_calls:
            return ""
        gap = next(((a.index, b.index) for a, b in zip(self.calls, self.calls[1:])
                    if b.index > a.index + 1), None)
        where = f" (calls {gap[0] + 1}-{gap[1] - 1})" if gap else ""
        bound = f"max_steps={self.max_steps:,}: " if self.max_steps else ""
        return (f"{bound}{self.dropped_calls:,} calls{where} with {self.dropped_steps:,} steps "
                f"were dropped; the first and the latest calls are kept")

    def unrecorded_note(self) -> str:
        """The calls that could not be recorded, in words; "" for none."""
        if not self.unrecorded_calls:
            return ""
        return (f"{self.unrecorded_calls:,} calls were not recorded: they were made in threads "
                f"after the record() block they were started in had ended")

    def to_json_dict(self) -> dict[str, Any]:
        """The dump as JSON data (without the lazy_at index save() adds): see
        transforms/model/_codec.py for the layout."""
        return _layout.json_data(self, RECORD_TYPES)

    def to_json_text(self) -> str:
        """The dump's text, as save() writes it: JSON, with the lazy_at index last."""
        return _layout.json_text(self, RECORD_TYPES)

    def save(self, path: str | os.PathLike) -> None:
        """Write atomically: the file appears complete or not at all."""
        write_atomically(path, self.to_json_text())


# Every record class a dump can hold, by name: the codec's registry (Session excluded).
RECORD_TYPES: dict[str, type] = {
    cls.__name__: cls
    for cls in (SourceLocation, ValueRecord, JaxprRecord, EqnRecord, SubJaxprRecord,
                PrimitiveCount, Metric, Stage, GrowthPoint, GrowthSeries, Growth, Step, Level,
                ErrorRecord, NonFiniteRecord, StageValues, Call)
}
RECORD_TYPES.update({cls.__name__: cls for cls in (TreeNode, TreeRecord, PairRow, TreePair,
                                                     Diagnostic, ValueSummary)})
RECORD_TYPES.update({cls.__name__: cls for cls in (ShardBlock, ShardingRecord, DeviceGroup,
                                                     CollectiveRecord)})
RECORD_TYPES.update({cls.__name__: cls for cls in (DeviceRecord, ProcessInfo, ProcessRecord)})
RECORD_TYPES.update({cls.__name__: cls for cls in (KeyLeaf, StaticKey, CompileKey, MissReason,
                                                     CompileRecord)})
