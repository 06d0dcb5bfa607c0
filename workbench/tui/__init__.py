"""The workbench's terminal UI (Textual): browse recorded sessions.

    workbench.tui.run(session)                    # one session
    workbench.tui.run([(title, session), ...])    # a gallery: a session picker first
"""
from __future__ import annotations

import gc
from pathlib import Path
from typing import Sequence

from transforms.record import Session

from .model import as_gallery

FREEZE_STEPS = 10_000


def build_app(sessions: Session | Sequence[Session] | Sequence[tuple[str, Session]],
              title: str | None = None, export_dir: str | Path | None = None,
              process: int = 0):
    """The app, not yet running (tests drive it with `run_test()`)."""
    from .app import WorkbenchApp
    gallery = as_gallery(sessions, title)
    big = sum(s.step_count for _, s in gallery) >= FREEZE_STEPS
    if big:
        # NB: a big session is millions of long-lived objects; each full collection
        # would walk them all (tens of ms, mid-keystroke). Freeze them out of the GC.
        gc.collect()
        gc.freeze()
    app = WorkbenchApp(gallery, title=title, export_dir=export_dir, process=process)
    app.freeze_after_start = big
    return app


def run(sessions: Session | Sequence[Session] | Sequence[tuple[str, Session]],
        title: str | None = None, export_dir: str | Path | None = None,
        process: int = 0) -> None:
    """Open the TUI on one session or a gallery of (title, Session) pairs; returns on quit.

    A multi-process run (Session.processes) opens at process `process`; `p` switches."""
    build_app(sessions, title, export_dir, process).run()


__all__ = ["build_app", "run"]
