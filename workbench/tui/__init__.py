"""The workbench's terminal UI (Textual): browse recorded sessions.

    workbench.tui.run(session)                    # one session
    workbench.tui.run([(title, session), ...])    # a gallery: a session picker first
    workbench.tui.run_gallery([(title, description), ...], record)  # the picker at once,
                                                  # record(i) -> Session run in the background
    workbench.tui.open_dump("trace.json")         # the first frame at once, then the dump
"""
from __future__ import annotations

import gc
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

if TYPE_CHECKING:
    from transforms.model import Session

    from .navigation import Entries

# A session with this many records (steps, equations, tree nodes) is frozen out of the GC.
FREEZE_STEPS = 10_000


def build_app(sessions: Session | Sequence[Session] | Sequence[tuple[str, Session]],
              title: str | None = None, export_dir: str | Path | None = None,
              watch: Any = None, process: int = 0):
    """The app, not yet running (tests drive it with `run_test()`). `watch`: a
    `workbench.run._watch.Watch` that re-records the session when its script changes;
    `process`: the process a multi-process run opens at."""
    from .app import WorkbenchApp
    from .navigation import as_gallery
    gallery = as_gallery(sessions, title)
    big = sum(record_count(s) for _, s in gallery) >= FREEZE_STEPS
    if big:
        # NB: a big session is millions of long-lived objects; each full collection
        # would walk them all (tens of ms, mid-keystroke). Freeze them out of the GC.
        gc.collect()
        gc.freeze()
    entries: Entries = list(gallery)
    app = WorkbenchApp(entries, title=title, export_dir=export_dir, watch=watch,
                       process=process)
    app.freeze_after_start = big
    return app


def record_count(session: Session) -> int:
    """Steps, stage equations and pytree nodes: what makes a session big to hold."""
    return session.step_count + sum(
        sum(len(st.eqns) for st in c.stages) + sum(len(t.nodes) for t in c.trees)
        for c in session.calls)


def build_gallery_app(entries: Sequence[tuple[str, str]], record: Callable[[int], Session],
                      title: str | None = None, export_dir: str | Path | None = None):
    """A picker over (title, description) entries shown at once; record(i) makes entry i's
    session in a worker thread, in order, the one the user opens first."""
    from .app import WorkbenchApp
    if not entries:
        raise ValueError("no session to show: the gallery is empty")
    pending: Entries = [(str(t), None) for t, _ in entries]
    return WorkbenchApp(pending, title=title, export_dir=export_dir,
                        descriptions=[str(d) for _, d in entries], recorder=record)


def run(sessions: Session | Sequence[Session] | Sequence[tuple[str, Session]],
        title: str | None = None, export_dir: str | Path | None = None,
        watch: Any = None, process: int = 0) -> None:
    """Open the TUI on one session or a gallery of (title, Session) pairs; returns on quit.

    A multi-process run (Session.processes) opens at process `process`; `p` switches."""
    build_app(sessions, title, export_dir, watch, process).run()


def build_open_app(path: str, load: Callable[[str], Session] | None = None,
                   export_dir: str | Path | None = None, process: int | None = None,
                   check: Callable[[Session], str] | None = None):
    """`workbench open PATH`: the first frame at once, the dump read in a worker thread
    (load(path), transforms.model._load.load by default), then its session shown. `check`:
    what is wrong with the loaded session for this opening ("" if nothing), said on exit."""
    from .app import WorkbenchApp
    app = WorkbenchApp([(path, None)], export_dir=export_dir, process=process or 0,
                       loader=(path, load or _load_dump, check))
    return app


def _load_dump(path: str) -> Session:
    # Imported in the loader's thread, after the first frame.
    from transforms.model import load
    return load(path)


def open_dump(path: str, export_dir: str | Path | None = None, process: int | None = None,
              load: Callable[[str], Session] | None = None,
              check: Callable[[Session], str] | None = None) -> int:
    """Run `build_open_app`; the exit code: 0, or 2 when the dump cannot be read or fails
    `check` (the app then exits with the message, which Textual prints on the way out)."""
    app = build_open_app(path, load, export_dir, process, check)
    app.run()
    return app.return_code or 0


def run_gallery(entries: Sequence[tuple[str, str]], record: Callable[[int], Session],
                title: str | None = None, export_dir: str | Path | None = None) -> None:
    """Open the picker at once and record the sessions behind it; returns on quit."""
    build_gallery_app(entries, record, title, export_dir).run()


__all__ = ["build_app", "build_gallery_app", "build_open_app", "open_dump", "run",
           "run_gallery"]
