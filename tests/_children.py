"""Starting a child process whose signals are at their defaults, as a user's would be."""
from __future__ import annotations

import contextlib
import signal
from typing import Iterator


@contextlib.contextmanager
def signals_at_default(*signums: int) -> Iterator[None]:
    """While a child is started: a test run begun by a non-interactive shell (`pytest &`,
    `nohup`) has SIGINT or SIGHUP ignored, an ignored signal stays ignored across exec,
    and the child would never see it. A handler installed here is reset to the default in
    the child at exec, as a user's foreground shell gives it."""
    previous = {s: signal.signal(s, signal.default_int_handler if s == signal.SIGINT
                                 else lambda *_: None) for s in signums}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
