"""A multi-process run: one process's session at a time, `p`/`P` switching process.

The screen is the session screen on `process_sessions(run)[i]`; switching puts
the next process's screen in its place on the same call, step and view, so
two processes of one run can be read side by side in turn. Where the
processes traced different programs, the screen opens on the first divergent
step and says so.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

from textual.binding import Binding

from transforms.model import Session

from ...analysis import process_label, process_sessions, run_divergence
from .session import SessionScreen


class ProcessScreen(SessionScreen):
    """One process of a merged run; `p` the next process, `P` the previous one."""

    BINDINGS = [
        Binding("p", "process(1)", "Next process"),
        Binding("P", "process(-1)", "Previous process", show=False),
    ]

    def __init__(self, run: Session, position: int = 0, title: str = "session", *,
                 gallery: bool = False, export_dir: str | Path | None = None,
                 place: tuple[int, int | None, str] | None = None) -> None:
        self.run = run
        self.views = process_sessions(run)
        self.position = position % len(self.views)
        self.place = place          # (call, step position, view) to keep on a switch
        self.switched = False       # put in place by a switch (not the app's first screen)
        self.divergence = run_divergence(run)
        session = self.views[self.position]
        label = process_label(session.process)
        super().__init__(session, f"{title} [{label}]" if label else title, gallery=gallery,
                         export_dir=export_dir)
        self.run_title = title
        # NB: the devices view shows the run's processes, even for a call on one device.
        self.has_devices = True

    def on_mount(self) -> None:
        super().on_mount()
        info = self.session.process
        if info is not None:
            self.sub_title = f"{info.status or 'recorded'}; {self.sub_title}"
        if self.place is not None:
            call, step, view = self.place
            self._go(call, step)
            self.action_view(view)
            self.say(self._process_text())
        elif self.divergence is not None:
            d = self.divergence
            mine = self.session.process.index if self.session.process is not None else 0
            if d.step is not None and mine in (d.process_a, d.process_b):
                self._go(d.call, d.step)
            here = " (here)" if d.step is not None and mine in (d.process_a, d.process_b) else ""
            where = f"call {d.call}" + (f", step {d.step}" if d.step is not None else "")
            self.say(f"WARNING: processes {d.process_a} and {d.process_b} traced different "
                     f"programs from {where}{here}; p: the other process", error=True)
        else:
            self.say(self._process_text() + "  (p: next process)")

    def _go(self, call: int, step: int | None) -> None:
        if not 0 <= call < len(self.session.calls):
            return
        calls = self.session.calls
        if step is not None and step < len(calls[call].steps):
            self.steps.select_step(call, step)
        elif calls[call].steps:
            self.steps.select_step(call, 0)

    def _process_text(self) -> str:
        info = self.session.process
        if info is None:
            return "a process with no recording"
        local = ",".join(map(str, info.local_devices)) or "?"
        return (f"{process_label(info)}: devices {local}; {info.status or 'recorded'}"
                + (f" ({info.message})" if info.message and info.status != "ok" else ""))

    def action_process(self, delta: int) -> None:
        if len(self.views) < 2:
            self.say("this run has one process")
            return
        call, step = self.steps.current()
        screen = ProcessScreen(self.run, self.position + delta, self.run_title,
                               gallery=self.gallery, export_dir=self.export_dir,
                               place=(call, step, self.view))
        # NB: the app's default screen cannot be switched away (Textual keeps no result
        # callback for it): the first switch pushes, later ones replace the pushed screen.
        if self.switched:
            self.app.switch_screen(screen)
        else:
            self.app.push_screen(screen)
        screen.switched = True

    def commands(self) -> Iterable[tuple[str, str, Callable[[], object]]]:
        yield "Next process", "the same call and step in the next process (p)", \
            lambda: self.action_process(1)
        yield "Previous process", "the same call and step in the previous process (P)", \
            lambda: self.action_process(-1)
        yield from super().commands()
