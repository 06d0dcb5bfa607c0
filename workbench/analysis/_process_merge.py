"""The processes of a multi-process (`jax.distributed`) run, as pure data.

A run of N processes is one session file: `Session.processes` holds one
`ProcessRecord` per process (its calls, title, metadata and `ProcessInfo`), and
the top-level calls are empty. Every reader works on one process at a time:

    for view in process_sessions(session): ...    # one plain Session per process
    owners(view)                                  # device id -> process index
    first_divergence(process_sessions(session))   # where their programs differ

A folder of per-process dumps (`workbench dump -o DIR/` under the user's own
launcher writes DIR/process-<i>.json) reads as one run with `load_run(DIR)`.
Nothing here imports JAX.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable, Sequence

from transforms.model import (
    Call,
    CollectiveRecord,
    ProcessInfo,
    ProcessRecord,
    Session,
    SessionLoadError,
    Step,
    load,
)

from ._call_label import call_label

# Per-process dumps in a run folder: process-0.json, process-1.json, ...
PROCESS_FILE = "process-{index}.json"


# --- one session per process --------------------------------------------------------

def is_multiprocess(session: Session) -> bool:
    """A merged run, or one process of a job of several."""
    return bool(session.processes) or (session.process is not None and session.process.count > 1)


def process_session(session: Session, index: int) -> Session:
    """Process `index` of a merged run as a Session of its own (its ProcessInfo attached)."""
    for p in session.processes:
        if p.info.index == index:
            return Session(calls=list(p.calls), jax_version=p.jax_version or session.jax_version,
                           python_version=p.python_version or session.python_version,
                           schema_version=session.schema_version, title=p.title,
                           metadata=dict(p.metadata), process=p.info,
                           compiles=list(p.compiles))
    known = ", ".join(str(p.info.index) for p in session.processes) or "none: not a merged run"
    raise ValueError(f"no process {index} in this run (its processes: {known})")


def process_sessions(session: Session) -> list[Session]:
    """One Session per process, by index; a single-process session is its own list."""
    if not session.processes:
        return [session]
    return [process_session(session, p.info.index)
            for p in sorted(session.processes, key=lambda p: p.info.index)]


def process_label(info: ProcessInfo | None) -> str:
    """`process 1/2`, or "" for a recording of one process."""
    return f"process {info.index}/{info.count}" if info is not None else ""


def merge(sessions: Sequence[Session], title: str = "",
          metadata: dict[str, str] | None = None) -> Session:
    """Per-process sessions (each with its `process`) -> one merged run, ordered by index."""
    records: list[ProcessRecord] = []
    for s in sessions:
        if s.processes:  # already merged: take its processes as they are
            records.extend(s.processes)
            continue
        if s.process is None:
            raise ValueError(f"{s.title or 'a session'} is not tagged with a process index: "
                             f"it was not recorded in a jax.distributed process")
        records.append(ProcessRecord(s.process, tuple(s.calls), s.title,
                                     tuple(sorted(s.metadata.items())), s.jax_version,
                                     s.python_version, tuple(s.compiles)))
    records.sort(key=lambda r: r.info.index)
    indices = [r.info.index for r in records]
    if len(set(indices)) != len(indices):
        raise ValueError(f"two recordings of the same process: indices {indices}")
    first = sessions[0] if sessions else Session()
    return Session(calls=[], jax_version=first.jax_version,
                   python_version=first.python_version,
                   title=title or _common_title(records), metadata=dict(metadata or {}),
                   processes=tuple(records))


def _common_title(records: Iterable[ProcessRecord]) -> str:
    titles = {r.title for r in records if r.title}
    return titles.pop() if len(titles) == 1 else ""


def load_run(path: str | os.PathLike, lazy: bool = False) -> Session:
    """A session file, or a folder of per-process dumps read as one merged run.

    lazy: a file's calls decoded when first read (transforms.load(path, lazy=True))."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        return load(path, lazy=lazy)
    names = sorted(n for n in os.listdir(path) if n.endswith(".json") and not n.startswith("."))
    if not names:
        raise SessionLoadError(f"{path}: a folder with no session files (*.json) in it")
    sessions = [load(os.path.join(path, n)) for n in names]
    untagged = [n for n, s in zip(names, sessions) if s.process is None and not s.processes]
    if untagged:
        raise SessionLoadError(f"{path}: {untagged[0]} is not the dump of a process of a "
                               f"jax.distributed run, so the folder is not one run")
    try:
        return merge(sessions)
    except ValueError as e:
        raise SessionLoadError(f"{path}: {e}") from None


# --- devices and processes -----------------------------------------------------------

def owners(session: Session) -> dict[int, int]:
    """Device id -> the index of the process owning it ({} without process facts)."""
    info = session.process
    if info is None and session.processes:
        info = session.processes[0].info
    return {d.id: d.process for d in info.devices} if info is not None else {}


def group_processes(devices: Iterable[int], owner: dict[int, int]) -> tuple[int, ...]:
    """The processes a group of devices spans, in order."""
    return tuple(sorted({owner[d] for d in devices if d in owner}))


def crossing(c: CollectiveRecord, owner: dict[int, int]) -> tuple[int, ...]:
    """The processes a collective's largest group spans when that is more than one: it
    crosses processes (data goes over the network); () when it stays in each process
    or its ids are not device ids."""
    if c.ids != "device" or not owner:
        return ()
    spans = [group_processes(g.devices, owner) for g in c.groups]
    widest = max(spans, key=len, default=())
    return widest if len(widest) > 1 else ()


# --- where the programs of two processes differ ------------------------------------------

@dataclass(frozen=True, slots=True)
class Divergence:
    """The first place two processes traced different programs (the usual multi-host hang)."""
    process_a: int
    process_b: int
    call: int                 # the position of the call in each process's recording
    what_a: str               # what each process has there: "call 2 jit(step)", "step #7 psum"
    what_b: str
    step: int | None = None   # the step's position in the call, when the calls match

    def describe(self) -> str:
        where = f"call {self.call}" + (f", step {self.step}" if self.step is not None else "")
        return (f"processes {self.process_a} and {self.process_b} traced different programs; "
                f"first divergent step at {where}: process {self.process_a} has "
                f"{self.what_a}, process {self.process_b} has {self.what_b}")


def _call_key(call: Call) -> tuple:
    return (call.transform, call.function, tuple(lv.label for lv in call.levels))


def _step_key(call: Call, step: Step) -> tuple:
    levels = {lv.index: lv.label for lv in call.levels}
    return (levels.get(step.level, step.level), step.primitive, step.kind, step.phase,
            step.params, tuple(v.aval for v in step.inputs), tuple(v.aval for v in step.outputs))


def _call_text(call: Call | None) -> str:
    if call is None:
        return "no such call (it recorded fewer)"
    return f"call {call.index} {call_label(call)}"


def _step_text(step: Step | None) -> str:
    if step is None:
        return "no such step (its call ends there)"
    ins = ", ".join(v.aval for v in step.inputs)
    where = f" at {step.source.file.rsplit('/', 1)[-1]}:{step.source.line}" if step.source else ""
    return f"step #{step.index} {step.title}({ins}){where}"


def divergence(a: Session, b: Session) -> Divergence | None:
    """The first call, then step, where two processes' recordings differ; None if alike.

    Steps are compared by level, primitive, params and avals, never by values:
    each process holds its own data."""
    pa = a.process.index if a.process is not None else 0
    pb = b.process.index if b.process is not None else 1
    for k in range(max(len(a.calls), len(b.calls))):
        ca = a.calls[k] if k < len(a.calls) else None
        cb = b.calls[k] if k < len(b.calls) else None
        if (ca is None and not _complete(a)) or (cb is None and not _complete(b)):
            return None  # a recording cut short by the launcher: nothing more is known
        if ca is None or cb is None or _call_key(ca) != _call_key(cb):
            return Divergence(pa, pb, k, _call_text(ca), _call_text(cb))
        for i in range(max(len(ca.steps), len(cb.steps))):
            sa = ca.steps[i] if i < len(ca.steps) else None
            sb = cb.steps[i] if i < len(cb.steps) else None
            if sa is None or sb is None or _step_key(ca, sa) != _step_key(cb, sb):
                return Divergence(pa, pb, k, f"{_call_text(ca)} {_step_text(sa)}",
                                  f"{_call_text(cb)} {_step_text(sb)}", i)
    return None


def _complete(s: Session) -> bool:
    return s.process is None or s.process.complete


def first_divergence(sessions: Sequence[Session]) -> Divergence | None:
    """Each process against the first: the earliest divergence found (by call, then step)."""
    found = [d for s in sessions[1:] if (d := divergence(sessions[0], s)) is not None]
    return min(found, key=lambda d: (d.call, -1 if d.step is None else d.step), default=None)


def run_divergence(session: Session) -> Divergence | None:
    """The first divergence among a merged run's recorded processes (those with a dump)."""
    recorded = [s for s in process_sessions(session)
                if s.process is None or s.process.recorded]
    return first_divergence(recorded) if len(recorded) > 1 else None
