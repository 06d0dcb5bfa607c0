"""Progress on long work: a rich bar on stderr when it is a terminal, plain lines otherwise."""
from __future__ import annotations

import sys
from typing import Any, TextIO


class Progress:
    """`with Progress("Recording", total) as p: p.advance("grad_tanh")`."""

    def __init__(self, description: str, total: int, stream: TextIO | None = None,
                 quiet: bool = False):
        self.description, self.total, self.done = description, total, 0
        self.stream = stream if stream is not None else sys.stderr
        self.quiet = quiet
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> Progress:
        if self.quiet or not _is_terminal(self.stream):
            return self
        # rich is imported only here: plain runs and `workbench run` never pay for it.
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress as RichProgress,
            TextColumn,
            TimeElapsedColumn,
        )
        self._bar = RichProgress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(),
                                 TextColumn("{task.fields[item]}"),
                                 console=Console(file=self.stream), transient=True)
        self._bar.__enter__()
        self._task = self._bar.add_task(self.description, total=self.total, item="")
        return self

    def start(self, item: str) -> None:
        """Say what is being worked on now (before the slow part)."""
        if self._bar is not None:
            self._bar.update(self._task, item=item)

    def advance(self, item: str, note: str = "") -> None:
        self.done += 1
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.update(self._task, advance=1, item=item)
        else:
            tail = f": {note}" if note else ""
            print(f"[{self.done}/{self.total}] {item}{tail}", file=self.stream, flush=True)

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
