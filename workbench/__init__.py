"""Read recorded sessions and show them: a terminal summary, the TUI, Graphviz views."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transforms.model import Session


def show(session: "Session", title: str | None = None) -> None:
    """Browse a recorded session in the terminal UI (imports Textual only when called)."""
    from .tui import run
    run(session, title=title)


__all__ = ["show"]
