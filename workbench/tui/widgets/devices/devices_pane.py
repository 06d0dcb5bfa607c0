"""The devices view: a call's arrays on the device mesh (which device holds
which block of each input, output and gradient) and each compiled stage's
collectives, drawn by `workbench.render.devices`.

The session screen adds this pane only for sessions that ran on several devices.
"""
from __future__ import annotations

from textual.containers import VerticalScroll
from textual.widgets import Static

from transforms.model import Call, ProcessInfo, Session

from ....render.devices import DevicesView
from ...guard import guarded
from ...navigation import Outline, Selection
from ..common.selection_view import SelectionView, call_changed


def has_devices(session: Session) -> bool:
    """Some call kept a multi-device layout or a compiled stage with collectives, or
    the session is a process of a multi-process run."""
    if session.process is not None and session.process.count > 1:
        return True
    return any(c.shardings or any(s.collectives for s in c.stages) for c in session.calls)


class DevicesPane(VerticalScroll, SelectionView, can_focus=True):
    VIEW = "devices"
    DEFAULT_CSS = """
    DevicesPane { padding: 0 1; height: 1fr; }
    """

    def __init__(self, outline: Outline, **kwargs) -> None:
        super().__init__(**kwargs)
        self.outline = outline

    depends_on = staticmethod(call_changed)

    def show_selection(self, selection: Selection) -> None:
        session = self.outline.session
        self.show(session.calls[selection.call], session.process)

    def compose(self):
        yield Static(id="devices-body")

    def show(self, call: Call, process: ProcessInfo | None = None) -> None:
        self.query_one("#devices-body", Static).update(
            guarded(lambda: DevicesView(call, process), "devices"))
