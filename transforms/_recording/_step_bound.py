"""A recording kept to about max_steps steps (record(max_steps=N))."""
from __future__ import annotations

from ..model import Call, Session

__all__ = ["StepBound"]


class StepBound:
    """Keeps a recording to about max_steps steps: the first calls (up to half the budget,
    and always the first) and the latest ones; the calls between are dropped and counted on
    the Session (dropped_calls, dropped_steps). The call just finished is always kept."""

    def __init__(self, session: Session, max_steps: int):
        self.session = session
        self.max_steps = max_steps
        self.held = 0           # steps in session.calls
        self.head = 0           # the first calls, kept for good
        self.head_open = True

    def added(self, call: Call) -> None:
        calls = self.session.calls
        self.held += len(call.steps)
        if self.head_open:
            if self.held <= self.max_steps // 2 or len(calls) == 1:
                self.head = len(calls)
                return
            self.head_open = False
        while self.held > self.max_steps and len(calls) > self.head + 1:
            dropped = calls.pop(self.head)  # the oldest of the latest calls
            self.held -= len(dropped.steps)
            self.session.dropped_calls += 1
            self.session.dropped_steps += len(dropped.steps)
