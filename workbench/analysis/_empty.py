"""Why a session has no call: what `show` and the terminal UI say of an empty recording."""
from __future__ import annotations

from transforms.model import NOTHING_RECORDED, NOTHING_RECORDED_IN_RUN, Session

__all__ = ["nothing_recorded"]


def nothing_recorded(session: Session) -> str | None:
    """The note for a session with no call (None when it has calls, or dropped them):
    `workbench run` (whose dumps name their `script`) recorded jax.* too; record() did not."""
    if session.calls or session.dropped_calls:
        return None
    return NOTHING_RECORDED_IN_RUN if "script" in session.metadata else NOTHING_RECORDED
