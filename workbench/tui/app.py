"""The workbench TUI app: bindings and screens; the panes live in widgets/."""
from __future__ import annotations

import gc
from pathlib import Path
from typing import Iterable

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from transforms.record import Session

from .messages import SessionChosen
from .model import Gallery
from .screens.help import HelpScreen
from .screens.picker import PickerScreen
from .screens.processes import ProcessScreen
from .screens.session import SessionScreen


class WorkbenchApp(App):
    """Browse recorded sessions: one directly, several through a picker."""

    CSS_PATH = "workbench.tcss"
    TITLE = "workbench"
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True),
        Binding("question_mark,f1", "help", "Help"),
    ]

    def __init__(self, gallery: Gallery, title: str | None = None,
                 export_dir: str | Path | None = None, process: int = 0) -> None:
        super().__init__()
        self.gallery = gallery
        self.export_dir = export_dir
        self.process = process  # a multi-process run opens at this process
        if title:
            self.title = title

    # With a big session, the app's own long-lived objects (widgets, styles, caches) are
    # frozen out of the GC too, once the first frame is drawn: a full collection walking
    # them took 18 ms in the middle of a key.
    freeze_after_start = False

    def on_mount(self) -> None:
        if self.freeze_after_start:
            self.call_after_refresh(_freeze_long_lived)

    def get_default_screen(self) -> Screen:
        if len(self.gallery) == 1:
            title, session = self.gallery[0]
            if session.processes:
                return ProcessScreen(session, self._position(session), title,
                                     export_dir=self.export_dir)
            return SessionScreen(session, title, export_dir=self.export_dir)
        return PickerScreen(self.gallery)

    def on_session_chosen(self, message: SessionChosen) -> None:
        title, session = self.gallery[message.index]
        if session.processes:
            self.push_screen(ProcessScreen(session, 0, title, gallery=True,
                                           export_dir=self.export_dir))
            return
        self.push_screen(SessionScreen(session, title, gallery=True, export_dir=self.export_dir))

    def _position(self, run: Session) -> int:
        indices = sorted(p.info.index for p in run.processes)
        return indices.index(self.process) if self.process in indices else 0

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        commands = getattr(screen, "commands", None)
        if commands is not None:
            for title, help, callback in commands():
                yield SystemCommand(title, help, callback)
        yield SystemCommand("Help", "every key of the workbench (?)", self.action_help)


def _freeze_long_lived() -> None:
    gc.collect()
    gc.freeze()
