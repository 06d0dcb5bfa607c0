"""What the recorder could not record, kept as a record: a fault of ours must not fail the
user's program (recording changes nothing JAX does), nor be dropped unseen. A handler that
guards recording keeps what it lost as an `internal` Diagnostic on the call, which `workbench
show` and the TUI's pytree and failure views print.
"""
from __future__ import annotations

from typing import Protocol

from .._common import first_line
from ..model import LOST, Diagnostic

__all__ = ["NoteLost", "lost_diagnostic"]


def lost_diagnostic(what: str, error: BaseException) -> Diagnostic:
    """`what` the recorder failed at (e.g. "reading the inputs' shardings"), and why."""
    return Diagnostic(LOST, f"the workbench failed {what}: {type(error).__name__}: "
                      f"{first_line(error)}", "")


class NoteLost(Protocol):
    """Where a guarded part of the recorder says what it lost (a call's CallTrees.note_lost)."""

    def __call__(self, what: str, error: BaseException) -> None: ...
