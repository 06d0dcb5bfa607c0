"""The recorder of a record() block: a session's calls as they finish (SessionRecorder),
and the stages they share by signature (_SharedStages).

A call while it runs is _call.py's (CallBuilder); it adds itself here when it finishes.
"""
from __future__ import annotations

import bisect
import dataclasses
import itertools
import weakref
from typing import Any

import jax

from .._capture import recording_off
from ..model import Call, Growth, Journal, Session
from ._compiles import CompileLog
from ._progress import Progress
from ._step_bound import StepBound
from ._summaries import shared_summaries

__all__ = ["SessionRecorder"]

_EVERY = object()  # resolve every waiting capture
_serials = itertools.count(1)


class SessionRecorder:
    """Collects finished calls into a Session."""

    def __init__(self, inline_jnp: bool = False, stages: bool = True, detail: str = "default",
                 max_steps: int | None = None, find_nans: bool = False,
                 stop_at_nan: bool = False, values: bool = False, journal: Journal | None = None):
        if detail not in ("default", "full"):
            raise ValueError(f"record(detail=...) must be 'default' or 'full', got {detail!r}")
        if max_steps is not None and (isinstance(max_steps, bool) or
                                      not isinstance(max_steps, int) or max_steps < 1):
            raise ValueError(f"record(max_steps=...) must be a positive int or None, "
                             f"got {max_steps!r}")
        self.detail = detail
        self.serial = next(_serials)  # names the block, for what a jit entry traced in it
        self.inline_jnp = inline_jnp
        self.capture_stages = stages
        # record(find_nans=True): the first call with a NaN or Inf in its outputs is replayed
        # (_find_nans); `nan_found` once one was.
        self.find_nans = find_nans and stages
        self.nan_found = False
        self.stop_at_nan = stop_at_nan  # raise NonFiniteFound where that call returns
        self.values = values and stages  # every replayable stage's equations evaluated
        self.session = Session(jax_version=jax.__version__, max_steps=max_steps)
        self.compiles = CompileLog(self.session.compiles)  # every jit's traces and compiles
        # record(journal=...): each call's start and record appended as it happens (a crash
        # keeps them); None once a write failed (said in the session's metadata).
        self.journal = journal
        # The calls in progress (index -> weakref to the builder), for the progress frames
        # a thread writes while they run (_progress); kept only with a journal.
        self.running: dict[int, Any] = {}
        self.progress = Progress(journal, self.running) if journal is not None else None
        if self.progress is not None:
            self.progress.start()
        self._indices = itertools.count()  # NB: next() of a count is atomic: threads share it
        self._next_index = 0  # what next_index says (the compile log's guess, in threads too)
        self._bound = StepBound(self.session, max_steps) if max_steps is not None else None
        self.stages = _SharedStages()
        # What a vjp or linearize call hands the function it returns (_returned), by (call
        # index, what): "stages", its PendingStages; "values", its Forward (values=True)
        self._handed: dict[tuple[int, str], Any] = {}
        # Jaxpr records and jit step summaries by jaxpr object, while it lives (JAX
        # reuses the jaxprs of jnp functions, and the ones its rules make of them, across
        # calls and sessions; their constants are the user's arrays).
        self.summaries = shared_summaries(detail == "full")
        # The jit traces this block has run (weakly: a jaxpr holds the user's constants)
        # and the (entry, input avals, rest of the key: trace_signature) it traced, and so recorded
        # (transforms.jit's see_trace): a trace JAX cached before the block is recorded on
        # its first run.
        self._jit_traces_run: weakref.WeakSet = weakref.WeakSet()
        self._jit_traces_recorded: set[tuple[int, tuple, tuple]] = set()

    def note_jit_traced(self, entry: Any, avals: tuple, signature: tuple) -> None:
        self._jit_traces_recorded.add((id(entry), avals, signature))

    def first_run_of(self, entry: Any, jaxpr: Any, avals: tuple,
                     signature: tuple) -> tuple[bool, bool]:
        """(first run of this jit trace in the block, traced in the block already)."""
        if jaxpr in self._jit_traces_run:
            return False, True
        self._jit_traces_run.add(jaxpr)
        return True, (id(entry), avals, signature) in self._jit_traces_recorded

    def forget_jit_traces(self) -> None:
        self._jit_traces_run.clear()
        self._jit_traces_recorded.clear()

    @property
    def replays(self) -> bool:
        """Whether calls keep their inputs while they run, to replay their stages after."""
        return self.find_nans or self.values

    def next_index(self) -> int:
        """The index the next call will have."""
        return self._next_index

    def new_index(self) -> int:
        """The next call's index: calls keep their index when earlier ones are dropped."""
        index = next(self._indices)
        self._next_index = index + 1
        return index

    def count_unrecorded(self) -> None:
        """A call made in a thread after this block ended: counted, as it is not recorded."""
        self.session.unrecorded_calls += 1

    def add(self, call: Call) -> None:
        calls = self.session.calls
        if calls and calls[-1].index > call.index:  # threads' calls finish out of order
            calls.insert(bisect.bisect(calls, call.index, key=lambda c: c.index), call)
        else:
            calls.append(call)
        if self._bound is not None:
            self._bound.added(call)
        if self.journal is not None:
            self.running.pop(call.index, None)
            self._journal_write(self.journal.call, call)

    def _journal_again(self, call: Call) -> None:
        """A recorded call changed (its stages read at last, growth added): journaled again,
        the reader keeping the latest record of each index."""
        if self.journal is not None:
            self._journal_write(self.journal.call, call)

    def began(self, index: int, label: str, thread: str, transform: str, function: str,
              source: Any) -> None:
        """A call began: the journal says so (after a crash: the call in progress)."""
        if self.journal is not None:
            self._journal_write(self.journal.begin, index, label, thread, transform, function,
                                source)

    def running_call(self, index: int, builder: Any) -> None:
        """Call `index` runs: the progress thread watches its steps until it is added."""
        if self.journal is not None:
            self.running[index] = weakref.ref(builder)

    def stop_progress(self) -> None:
        """The block ended: no more progress frames."""
        if self.progress is not None:
            self.progress.stop()
            self.progress = None

    def _journal_write(self, write: Any, *args: Any) -> None:
        try:
            write(*args)
        except OSError as e:  # a full disk: the recording goes on in memory, and says so
            self.session.metadata["journal"] = (
                f"stopped after {len(self.session.calls)} calls: "
                f"{e.strerror or type(e).__name__}; a crash after it would have lost the calls since")
            self.journal = None

    def call_by_index(self, index: int) -> Call | None:
        """The recorded call with this index; None when it was dropped (max_steps)."""
        calls = self.session.calls
        position = _position_of(calls, index)
        return calls[position] if position is not None else None

    def hand_over(self, index: int, thing: Any, what: str = "stages") -> None:
        self._handed[index, what] = thing

    def take_handed(self, index: int, what: str = "stages") -> Any:
        """What call `index` made for the function it returned (None: nothing), no longer
        held here."""
        return self._handed.pop((index, what), None)

    def completed(self, old: tuple, new: tuple, key: Any) -> None:
        """A pullback's rules completed a signature's stages: every call holding them takes
        the new ones, and so do later calls sharing them."""
        self.stages.completions += 1
        if key is not None and self.stages.by_key.get(key) is old:
            self.stages.by_key[key] = new
        calls = self.session.calls
        for position, call in enumerate(calls):
            if call.stages is old:
                calls[position] = dataclasses.replace(call, stages=new)
                self._journal_again(calls[position])

    def add_growth(self, growth: Growth) -> bool:
        """Keep growth on the call recorded last; False when no call was recorded yet."""
        calls = self.session.calls
        if not calls:
            return False
        calls[-1] = dataclasses.replace(calls[-1], growth=calls[-1].growth + (growth,))
        self._journal_again(calls[-1])
        return True

    def finish_stages(self, key: Any = _EVERY) -> None:
        """Capture what waited for JAX to finish a trace (top-level jit calls): all, or key's."""
        if not self.stages.later:  # nothing waits (always so with stages off)
            return
        with recording_off():
            fixed = self.stages.resolve(self.session.calls, key)
        for call in fixed:  # a top-level jit's: its stages, now that its trace is over
            self._journal_again(call)

    def watch_deferred(self, fun: Any, key: Any) -> None:
        """Read key's waiting stages as soon as the program drops fun.

        They are read from JAX's caches, which hold the trace (and the
        constants it closed over) only while the function lives: read then,
        and what JAX frees at that moment is freed at that moment.
        """
        recorder = weakref.ref(self)

        def dropped(_ref: Any) -> None:
            alive = recorder()
            if alive is not None:
                alive.finish_stages(key)
        try:
            self.stages.watches[key] = weakref.ref(fun, dropped)
        except TypeError:  # not weakly referenceable: read when the block ends
            pass


class _SharedStages:
    """Stages by call signature: captured once, shared by every later call with it.

    A top-level jit's stages wait until its trace is over (`later`); calls
    sharing them get them when they are resolved. `captures` counts the
    captures made (tests and benchmarks read it).
    """

    def __init__(self) -> None:
        self.by_key: dict[Any, tuple] = {}
        self.later: dict[Any, tuple[Any, list]] = {}   # key -> (DeferredJit, [(index, fix)])
        self.captures = 0
        self.completions = 0  # stages completed after a pullback ran a rule they waited for
        self.watches: dict[Any, Any] = {}  # key -> weakref to the function it waits for

    def known(self, key: Any) -> bool:
        return key is not None and (key in self.by_key or key in self.later)

    def share(self, key: Any, index: int, fix: Any) -> tuple:
        if key in self.by_key:
            return self.by_key[key]
        self.later[key][1].append((index, fix))
        return ()

    # NB: keys hold the objects they name weakly (_plan.Identity): sharing
    # stages keeps nothing of the user's program alive.
    def keep(self, key: Any, stages: tuple) -> None:
        if key is not None:
            self.by_key[key] = stages

    def wait(self, key: Any, deferred: Any, index: int, fix: Any) -> Any:
        """Wait for the stages under key (its own when None); the key waited under."""
        key = key if key is not None else ("unshared", index)
        self.later[key] = (deferred, [(index, fix)])
        return key

    def resolve(self, calls: list, only: Any = _EVERY) -> list:
        """Capture the stages waiting (all, or only's) and hand them to their calls; the
        calls that took them, as they are now."""
        fixed: list = []
        while self.later:
            key = next(iter(self.later)) if only is _EVERY else only
            if key not in self.later:
                return fixed
            deferred, waiting = self.later.pop(key)
            self.watches.pop(key, None)
            stages = deferred.finish()
            if not (isinstance(key, tuple) and key[:1] == ("unshared",)):
                self.by_key[key] = stages
            for index, fix in waiting:
                # NB: by index: with calls dropped (max_steps) indices are not positions.
                position = _position_of(calls, index)
                if position is not None:
                    calls[position] = fix(calls[position], stages)
                    fixed.append(calls[position])
            if only is not _EVERY:
                return fixed
        return fixed


def _position_of(calls: list, index: int) -> int | None:
    """Where the call with this index is in calls; None when it was dropped (max_steps)."""
    if index < len(calls) and calls[index].index == index:
        return index  # nothing dropped before it
    return next((p for p in range(len(calls) - 1, -1, -1) if calls[p].index == index), None)
