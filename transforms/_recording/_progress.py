"""The journal's progress frames: the latest step of each call in progress, so that a
process that dies mid-call says after which step (primitive, level, user line) it died.

    progress = Progress(journal, running)   # running: call index -> weakref to its builder
    progress.start(); ...; progress.stop()

Why a thread: a step is recorded by the C step core without running Python code, and one
frame per step (JSON and a write) would cost more than recording the step itself. The
thread costs the recording nothing per step: every INTERVAL seconds it reads each running
call's step count (a number the core keeps) and writes a frame only for a call whose count
moved. So what a death leaves may be up to INTERVAL old (plus a GIL switch interval,
`sys.getswitchinterval()`): the reader says "after", never "at".
"""
from __future__ import annotations

import threading
from typing import Any

from .. import _jax as _i
from .._capture import INLINE, LEVEL, LIBRARY_FLAG, OUTPUTS, PARAMS, PRIMITIVE, RUNNING
from ..model import Journal, operation_name

__all__ = ["INTERVAL", "Progress"]

INTERVAL = 0.02  # seconds between two looks at the running calls


class Progress:
    """The thread writing progress frames while calls run (one per recorder with a journal)."""

    def __init__(self, journal: Journal, running: dict[int, Any]):
        self.journal = journal
        self.running = running  # call index -> weakref.ref(CallBuilder), as the recorder holds
        self._written: dict[int, int] = {}  # call index -> step count last written
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="workbench-journal-progress",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """The block ended: the thread ends (its next look does not come)."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stopped.wait(INTERVAL):
            if not self.write_latest():
                return

    def write_latest(self) -> bool:
        """A frame for each running call whose step count moved; False once the journal
        cannot be written (a full disk: the recorder says so when it next writes)."""
        try:
            builders = list(self.running.items())
        except RuntimeError:  # a thread began or finished a call meanwhile: next time
            return True
        for index in [i for i in self._written if i not in self.running]:
            del self._written[index]
        for index, ref in builders:
            builder = ref()
            step = _latest_step(builder) if builder is not None else None
            if step is None or self._written.get(index) == step["step"] + 1:
                continue
            self._written[index] = step["step"] + 1
            operation = _library_operation(builder, builder.steps.core, step["step"])
            if operation:  # looked up once the count moved: it may walk the call's frames
                step["operation"] = operation
            try:
                self.journal.step(index, step)
            except (OSError, ValueError):  # ValueError: the journal was closed meanwhile
                return False
        return True


def _latest_step(builder: Any) -> dict[str, Any] | None:
    """The latest step the call began, as data: its number, primitive, level and line."""
    steps = getattr(builder, "steps", None)  # None while the builder is being made
    if steps is None:
        return None
    core = steps.core
    count = core.count
    if count == 0:
        return None
    index = count - 1
    level = core.cell(index, LEVEL)
    levels = steps.levels
    source = core.source_at(index)
    return {"step": index, "primitive": core.texts[core.cell(index, PRIMITIVE)],
            "level": levels[level].label if level < len(levels) else "",
            "source": str(source) if source is not None else ""}


def _library_operation(builder: Any, core: Any, index: int) -> str:
    """The operation a library jit step stands for (`sin` for jnp.sin's jit), "" for any
    other step: from its recorded params once it ended, from the frame binding it while it
    runs (the params reach the core only at its end)."""
    if core.cell(index, OUTPUTS) != RUNNING:
        if not core.cell(index, INLINE) & LIBRARY_FLAG:
            return ""
        name = dict(core.params[core.cell(index, PARAMS)]).get("name", "")
        return operation_name(name.strip("'")) if name else ""
    thread_id = getattr(builder, "thread_id", None)
    if core.texts[core.cell(index, PRIMITIVE)] not in _i.JIT_PRIMITIVE_NAMES or thread_id is None:
        return ""
    params = _i.binding_params(thread_id, core, index)
    if params is None or not _i.is_library_jit_params(params):
        return ""
    return operation_name(str(params.get("name", "")))
