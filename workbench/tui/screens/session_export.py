"""The session screen's exports: the current call as JSON or as a graph image (written in a
worker thread), the view as SVG; each says in the status line where it went, or why not."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Protocol

from textual.app import App

from transforms.model import Call, Session

from .. import export
from ..navigation import Outline


class ExportingScreen(Protocol):
    """What the exports read on the session screen (session.SessionScreen)."""
    session: Session
    outline: Outline
    export_dir: Path
    view: str

    @property
    def app(self) -> App[Any]: ...
    @property
    def call(self) -> Call | None: ...
    @property
    def call_index(self) -> int: ...
    def heading(self) -> str: ...
    def say(self, text: str, error: bool = False) -> None: ...
    def run_worker(self, work: Callable[[], None], *, thread: bool, exclusive: bool,
                   group: str) -> object: ...


def stem(screen: ExportingScreen, call: Call | None) -> str:
    """The files' name: the session's heading, the call and its label."""
    label = screen.outline.call_label(screen.call_index) if call is not None else ""
    return export.file_stem(screen.heading(), call, label)


def export_json(screen: ExportingScreen) -> None:
    _export(screen, "JSON", lambda call: export.export_call_json(
        screen.session, call, screen.export_dir, stem(screen, call)))


def export_graph(screen: ExportingScreen) -> None:
    _export(screen, "graph", lambda call: export.export_call_graph(
        call, screen.export_dir, stem(screen, call)))


def save_view(screen: ExportingScreen) -> None:
    """A screenshot of the screen as it is, written at once (it is the frame shown)."""
    name = f"{stem(screen, screen.call)}-{screen.view}.svg"
    try:
        path = export.save_screen_svg(screen.app, screen.export_dir, name)
    except Exception as e:  # a full disk, a read-only folder, text SVG cannot hold
        screen.say(f"could not save the view: {type(e).__name__}: {e}", error=True)
        return
    screen.say(f"saved this view to {path}")


def _export(screen: ExportingScreen, what: str, write: Callable[[Call], Path]) -> None:
    """Write the current call in a worker thread (a big call's graph takes seconds)."""
    call = screen.call
    if call is None:
        return
    app = screen.app

    def run() -> None:
        try:
            path = write(call)
        except Exception as e:  # Graphviz refusing a graph, a full disk: a message, not a crash
            app.call_from_thread(screen.say, f"{what} export failed: {type(e).__name__}: {e}",
                                 True)
            return
        app.call_from_thread(screen.say, f"wrote call {call.index} as {what} to {path}")

    screen.run_worker(run, thread=True, exclusive=True, group="export")
