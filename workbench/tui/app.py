"""The workbench TUI app: bindings and screens; the panes live in widgets/."""
from __future__ import annotations

import gc
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from .messages import SessionChosen
from .screens.loading import LoadingScreen

if TYPE_CHECKING:
    from transforms.model import Session

    from ..run import Recording, Watch
    from .navigation import Entries
    from .screens.session import SessionScreen

# NB: the session, process and picker screens (every widget, the renderers, the record
# model) are imported where first used, not here: `workbench open` draws its first frame
# before reading the dump, and those imports are most of what a first frame would wait for.

# Records gallery entry i (in a worker thread): `workbench demo` shows the picker at once.
Recorder = Callable[[int], "Session"]
# (path, load, check): a dump to read in a worker thread once the first frame is up, and
# what is wrong with it for this opening ("" when nothing is).
Loader = tuple[str, Callable[[str], "Session"], "Callable[[Session], str] | None"]


class WorkbenchApp(App):
    """Browse recorded sessions: one directly, several through a picker."""

    CSS_PATH = "workbench.tcss"
    TITLE = "workbench"
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True),
        Binding("question_mark,f1", "help", "Help"),
    ]

    def __init__(self, gallery: Entries, title: str | None = None,
                 export_dir: str | Path | None = None, *,
                 descriptions: list[str] | None = None, recorder: Recorder | None = None,
                 watch: Watch | None = None, loader: Loader | None = None,
                 process: int = 0) -> None:
        super().__init__()
        self.gallery = gallery
        self.export_dir = export_dir
        self.process = process  # a multi-process run opens at this process
        self.descriptions = descriptions or self._descriptions(gallery)
        self.recorder = recorder
        self.watcher = watch  # a Watch (`workbench run --watch`): re-records on change
        self.loader = loader  # `workbench open` reads its dump after the first frame
        self._wanted: int | None = None  # the entry to open once it is recorded
        self._want_lock = threading.Lock()
        if title:
            self.title = title

    @staticmethod
    def _descriptions(gallery: Entries) -> list[str]:
        if all(s is None for _, s in gallery):
            return [""] * len(gallery)
        from .navigation import session_description
        return [session_description(s) if s is not None else "" for _, s in gallery]

    # With a big session, the app's own long-lived objects (widgets, styles, caches) are
    # frozen out of the GC too, once the first frame is drawn: a full collection walking
    # them took 18 ms in the middle of a key.
    freeze_after_start = False

    def on_mount(self) -> None:
        if self.freeze_after_start:
            self.call_after_refresh(_freeze_long_lived)
        if self.recorder is not None:
            self.run_worker(self._record_all, thread=True, group="gallery", exit_on_error=False)
        if self.watcher is not None:
            self.set_interval(self.watcher.interval, self._check_watch)

    def get_default_screen(self) -> Screen:
        if self.loader is not None:
            path = self.loader[0]
            self.call_after_refresh(
                lambda: self.run_worker(self._load, thread=True, group="load",
                                        exit_on_error=False))
            return LoadingScreen(path)
        if self.watcher is not None:
            # NB: the session screen goes on top of a blank one, so each new recording
            # can switch_screen in place (the bottom screen of the stack cannot be switched).
            self.call_later(self._open, 0)
            return Screen()
        title, session = self.gallery[0]
        if len(self.gallery) == 1 and session is not None:
            return self._screen_of(session, title, gallery=False,
                                   position=self._position(session))
        from .screens.picker import PickerScreen  # NB: not before the loading frame
        return PickerScreen(self.gallery, self.descriptions)

    def _screen_of(self, session: Session, title: str, gallery: bool,
                   position: int = 0) -> SessionScreen:
        """The screen for a session: a multi-process run's opens at one process."""
        if session.processes:
            from .screens.process_sessions import ProcessScreen
            return ProcessScreen(session, position, title, gallery=gallery,
                                 export_dir=self.export_dir)
        from .screens.session import SessionScreen
        return SessionScreen(session, title, gallery=gallery, export_dir=self.export_dir)

    # --- the gallery, recorded in the background ---------------------------------

    def _record_all(self) -> None:
        """Record every pending entry, the one the user asked for first."""
        from transforms.model import Session
        while True:
            with self._want_lock:
                pending = [i for i, (_, s) in enumerate(self.gallery) if s is None]
                if not pending:
                    return
                i = self._wanted if self._wanted in pending else pending[0]
            try:
                session = self.recorder(i)  # type: ignore[misc]
            except Exception as e:  # one broken example must not stop the gallery
                session = Session(calls=[], title=self.gallery[i][0],
                                  metadata={"description": f"recording failed: "
                                                           f"{type(e).__name__}: {e}"})
            self.call_from_thread(self._recorded, i, session)  # waits: entry i is filled

    def _recorded(self, i: int, session: Session) -> None:
        from .screens.picker import PickerScreen
        self.gallery[i] = (self.gallery[i][0], session)
        for screen in self.screen_stack:
            if isinstance(screen, PickerScreen):
                screen.recorded(i)
        if self._wanted == i:
            self._wanted = None
            if isinstance(self.screen, PickerScreen):
                self._open(i)

    # --- `workbench open`: the dump read after the first frame ----------------------

    def _load(self) -> None:
        from .screens import session as _  # noqa: F401 - imported here, off the first frame
        assert self.loader is not None
        path, load, check = self.loader
        try:
            session = load(path)
            problem = check(session) if check is not None else ""
        except Exception as e:  # a corrupt dump: say why on the way out (exit code 2)
            problem = str(e)
        if problem:
            self.call_from_thread(self.exit, None, 2, f"workbench: {problem}")
            return
        self.call_from_thread(self._loaded, path, session)

    def _loaded(self, path: str, session: Session) -> None:
        self.gallery[0] = (path, session)
        self.push_screen(self._screen_of(session, path, gallery=False,
                                         position=self._position(session)))

    # --- `workbench run --watch`: a new recording when the script changes ----------

    def _check_watch(self) -> None:
        from .screens.session import SessionScreen
        if self.watcher is None or not self.watcher.changed():
            return
        if isinstance(self.screen, SessionScreen):
            self.screen.say(f"{os.path.basename(self.watcher.script)} changed: recording…")
        self.run_worker(self._rerecord, thread=True, group="watch", exclusive=True)

    def _rerecord(self) -> None:
        assert self.watcher is not None
        recording = self.watcher.record()
        self.call_from_thread(self._rerecorded, recording)

    def _rerecorded(self, recording: Recording) -> None:
        """Show the new session in place of the old one, at the same place."""
        from .screens.session import SessionScreen
        screen = self.screen
        if recording.session is None:
            if isinstance(screen, SessionScreen):
                screen.say(f"{recording.note}; still showing the last recording", error=True)
            return
        title, _ = self.gallery[0]
        self.gallery[0] = (title, recording.session)
        if not isinstance(screen, SessionScreen):
            return
        place = screen.current_place()
        new = SessionScreen(recording.session, title, export_dir=self.export_dir, place=place,
                            note=f"re-recorded: {recording.note}")
        self.switch_screen(new)

    def on_session_chosen(self, message: SessionChosen) -> None:
        from .screens.picker import PickerScreen
        if self.gallery[message.index][1] is None:
            with self._want_lock:
                self._wanted = message.index
            if isinstance(self.screen, PickerScreen):
                self.screen.say(f"recording {self.gallery[message.index][0]!r}…: it opens "
                                f"when ready")
            return
        self._open(message.index)

    def _open(self, i: int) -> None:
        title, session = self.gallery[i]
        if session is not None:
            self.push_screen(self._screen_of(session, title, gallery=self.watcher is None))

    def _position(self, run: Session) -> int:
        indices = sorted(p.info.index for p in run.processes)
        return indices.index(self.process) if self.process in indices else 0

    def action_help(self) -> None:
        from .screens.help import HelpScreen
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
