"""The session screen's entries in the command palette: each view, search, filter, the stages
view's toggles and the exports, with the key that does the same."""
from __future__ import annotations

from typing import Callable, Iterator, Protocol

from ..navigation import Outline
from ..widgets.navigator.step_list import StepList

Command = tuple[str, str, Callable[[], object]]  # title, help, what it runs


class CommandScreen(Protocol):
    """What the commands read and run on the session screen (session.SessionScreen)."""
    has_devices: bool
    gallery: bool
    outline: Outline

    @property
    def export_dir(self) -> object: ...
    @property
    def steps(self) -> StepList: ...
    def action_view(self, view: str) -> None: ...
    def action_zoom(self) -> None: ...
    def action_search(self) -> None: ...
    def action_filter(self) -> None: ...
    def toggle_in_stages(self, what: str) -> None: ...
    def action_export_json(self) -> None: ...
    def action_export_graph(self) -> None: ...
    def action_export_svg(self) -> None: ...
    def action_sessions(self) -> None: ...


def commands(screen: CommandScreen) -> Iterator[Command]:
    """(title, help, callback) for each command the screen offers now."""
    yield "Step view", "the selected step: params, tracer towers, source", \
        lambda: screen.action_view("step")
    yield "Stages view", "two stages side by side with the diff marked", \
        lambda: screen.action_view("stages")
    yield "Pytree view", "input and output trees, leaves paired", \
        lambda: screen.action_view("pytree")
    yield "Failure view", "what failed, where, and a hint", \
        lambda: screen.action_view("failure")
    if screen.has_devices:
        yield "Devices view", "arrays on the device mesh, collectives per stage", \
            lambda: screen.action_view("devices")
    yield "Story view", "what the recording shows and what its program printed (6)", \
        lambda: screen.action_view("output")
    yield "Hide or show the navigator", "the views take the whole width (z)", screen.action_zoom
    yield "Search", "search steps or the focused stage text (/)", screen.action_search
    yield "Filter steps", "p:PRIM l:LEVEL is:error words (f)", screen.action_filter
    if screen.outline.failing_codes():
        yield "Next failing step", "jump to the next step that failed (x)", \
            lambda: screen.steps.action_next_failure(1)
    yield "Toggle aligned diff", "the two stages aligned equation by equation (d)", \
        lambda: screen.toggle_in_stages("diff")
    yield "Toggle stage stats", "equations, avals, primitive histogram (t)", \
        lambda: screen.toggle_in_stages("stats")
    yield "Show growth", "equations against batch size, e.g. Python loop vs vmap (w)", \
        lambda: screen.toggle_in_stages("growth")
    where = f"into {screen.export_dir}"
    yield "Export call as JSON", f"write the current call as a session file {where} (e)", \
        screen.action_export_json
    yield "Export graph image", f"draw the current call's graph {where} (i)", \
        screen.action_export_graph
    yield "Save view as SVG", f"a screenshot of this view {where} (s)", screen.action_export_svg
    if screen.gallery:
        yield "Sessions", "back to the session picker (o)", screen.action_sessions
