"""The workbench's terminal UI (Textual): browse recorded sessions.

    workbench.tui.run(session)                    # one session
    workbench.tui.run([(title, session), ...])    # a gallery: a session picker first
    workbench.tui.run_gallery([(title, description), ...], record)  # the picker at once,
                                                  # record(i) -> Session run in the background
"""
from __future__ import annotations

import gc
from pathlib import Path
from typing import Any, Callable, Sequence

from transforms.record import Session

from .model import Entries, as_gallery

FREEZE_STEPS = 10_000


def build_app(sessions: Session | Sequence[Session] | Sequence[tuple[str, Session]],
              title: str | None = None, export_dir: str | Path | None = None,
              watch: Any = None):
    """The app, not yet running (tests drive it with `run_test()`). `watch`: a
    `workbench.watch.Watch` that re-records the session when its script changes."""
    from .app import WorkbenchApp
    gallery = as_gallery(sessions, title)
    big = sum(s.step_count for _, s in gallery) >= FREEZE_STEPS
    if big:
        # NB: a big session is millions of long-lived objects; each full collection
        # would walk them all (tens of ms, mid-keystroke). Freeze them out of the GC.
        gc.collect()
        gc.freeze()
    entries: Entries = list(gallery)
    app = WorkbenchApp(entries, title=title, export_dir=export_dir, watch=watch)
    app.freeze_after_start = big
    return app


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
        watch: Any = None) -> None:
    """Open the TUI on one session or a gallery of (title, Session) pairs; returns on quit."""
    build_app(sessions, title, export_dir, watch).run()


def run_gallery(entries: Sequence[tuple[str, str]], record: Callable[[int], Session],
                title: str | None = None, export_dir: str | Path | None = None) -> None:
    """Open the picker at once and record the sessions behind it; returns on quit."""
    build_gallery_app(entries, record, title, export_dir).run()


__all__ = ["build_app", "build_gallery_app", "run", "run_gallery"]
