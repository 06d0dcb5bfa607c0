"""The main screen: the navigator beside the step, stages, pytree and failure views."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, ClassVar, Iterable, NamedTuple

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Header, Input, Static

from transforms.model import Call, Session

from ... import _safe_text as safe_text
from .. import export
from ..messages import CallSelected, EquationChosen, FailureChosen, Status, StepSelected, ViewChosen
from ..navigation import CALL, pack, session_description, session_output, session_summary
from ..widgets.common.key_bar import KeyBar
from ..widgets.common.line_list import LineList
from ..widgets.common.pane_stack import PaneStack
from ..widgets.common.search_bar import SearchBar
from ..widgets.common.status_bar import StatusBar
from ..widgets.common.tab_line import TabLine
from ..widgets.common.text_lines import TextLines
from ..widgets.devices.devices_pane import DevicesPane, has_devices
from ..widgets.failure.failure_pane import FailurePane
from ..widgets.navigator.navigator import Navigator
from ..widgets.navigator.step_list import StepList
from ..widgets.pytree.pytree_pane import PytreePane
from ..widgets.stages.stage_text import stage_map
from ..widgets.stages.stages_pane import STAGE_KEYS, StagesPane
from ..widgets.step.step_pane import StepPane

VIEWS = ("step", "stages", "pytree", "failure", "devices", "output")


# Sessions with this many steps index them for search in the background (idle slices).
PREPARE_SEARCH_STEPS = 20_000


class Place(NamedTuple):
    """The user's place in a session: selection, view, filter, navigator hidden."""
    call: int
    step: int | None
    view: str
    filter: str
    zoomed: bool


class SessionScreen(Screen):
    """One session: pick a step on the left, see it from every side on the right."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("1", "view('step')", "Step"),
        Binding("2", "view('stages')", "Stages"),
        Binding("3", "view('pytree')", "Pytree"),
        Binding("4", "view('failure')", "Failure"),
        Binding("5", "view('devices')", "Devices", show=False),
        Binding("6", "view('output')", "Story: description and printed output", show=False),
        Binding("slash", "search", "Search"),
        Binding("n", "next_match(True)", "Next match", show=False),
        Binding("N", "next_match(False)", "Previous match", show=False),
        Binding("f", "filter", "Filter", show=False),
        Binding("e", "export_json", "Export JSON", show=False),
        Binding("i", "export_graph", "Export graph image", show=False),
        Binding("s", "export_svg", "Save view as SVG", show=False),
        Binding("z", "zoom", "Hide/show navigator", show=False),
        Binding("o", "sessions", "Sessions", show=False),
        Binding("escape", "back", "Back", show=False),
        *(Binding(b.key, f"stages({b.action!r})", b.description, show=b.show)
          for b in STAGE_KEYS),
    ]

    def __init__(self, session: Session, title: str = "session", *, gallery: bool = False,
                 export_dir: str | Path | None = None, place: Place | None = None,
                 note: str = "") -> None:
        super().__init__()
        self._place = place  # where the user was in the session this one replaces
        self._note = note
        self.session = session
        self.session_title = title
        self.gallery = gallery
        self.export_dir = export.export_folder(export_dir)
        self.call_index = 0
        self.step_pos: int | None = None
        self._scope: LineList | None = None
        self._before_search: Widget | None = None
        self._dirty: set[str] = set(VIEWS)
        # NB: the devices view exists only for sessions that ran on several devices.
        self.has_devices = has_devices(session)
        self.description = session_description(session)
        self.output = session_output(session)

    def compose(self) -> ComposeResult:
        yield Header()
        if self.description:
            yield Static(Text(self.description), id="story")
        with Horizontal(id="body"):
            yield Navigator(self.session, id="navigator")
            with Vertical(id="views"):
                yield TabLine(self._tab_labels(), "step", id="tabs")
                with PaneStack(initial="step-pane", id="view-switcher"):
                    yield StepPane(id="step-pane")
                    yield StagesPane(self.session, id="stages-pane")
                    yield PytreePane(id="pytree-pane")
                    yield FailurePane(id="failure-pane")
                    if self.has_devices:
                        yield DevicesPane(id="devices-pane")
                    yield TextLines(id="output-pane")
        yield SearchBar(id="search")
        yield StatusBar(id="status")
        yield KeyBar(id="keys")

    def _tab_labels(self) -> list[tuple[str, str]]:
        failed = sum(1 for c in self.session.calls if c.errors)
        labels = [("step", "1 Step"), ("stages", "2 Stages"), ("pytree", "3 Pytree"),
                  ("failure", f"4 Failure ✗{failed}" if failed else "4 Failure")]
        labels += [("devices", "5 Devices")] if self.has_devices else []
        return labels + [("output", "6 Story")]

    def _heading(self) -> str:
        """The caller's title (a file name), and the recording's own title when it says more."""
        own = self.session.title
        if not own or own == self.session_title:
            return self.session_title
        return own if self.session_title == "session" else f"{self.session_title} — {own}"

    def on_mount(self) -> None:
        self.title = f"workbench: {safe_text.terminal(self._heading(), 300)}"
        self.sub_title = (f"{session_summary(self.session)}"
                          f"  ? help  ctrl+p commands")
        self.steps.focus()
        if self._place is not None:
            self._restore(self._place)
        if self._note:
            self.say(self._note)
        if self.session.step_count >= PREPARE_SEARCH_STEPS:
            # Index the steps for search in idle slices of a few ms, so the first `/` on a
            # big session does not pay for it.
            self._preparing = self.set_interval(0.02, self._prepare_search)

    def _prepare_search(self) -> None:
        if self.steps.outline.prepare_search():
            self._preparing.stop()

    def current_place(self) -> Place:
        """Where the user is: kept when a new recording replaces this session (--watch)."""
        nav = self.query_one(Navigator)
        return Place(self.call_index, self.step_pos, self.active_view,
                     self.query_one("#filter", Input).value, not nav.display)

    def _restore(self, place: Place) -> None:
        calls = self.session.calls
        if place.filter:
            self.query_one("#filter", Input).value = place.filter
            self.steps.set_filter(place.filter)
        if calls:
            call = min(place.call, len(calls) - 1)
            steps = calls[call].steps
            if place.step is not None and steps:
                self.steps.select_step(call, min(place.step, len(steps) - 1))
            else:
                self.steps.set_cursor(self.steps.outline.find(pack(CALL, call, 0)))
        if place.zoomed:
            self.action_zoom()
        if place.view != "step" and (place.view != "devices" or self.has_devices):
            self.action_view(place.view)

    # --- parts ------------------------------------------------------------------

    @property
    def steps(self) -> StepList:
        return self.query_one(StepList)

    @property
    def call(self) -> Call | None:
        calls = self.session.calls
        return calls[self.call_index] if 0 <= self.call_index < len(calls) else None

    def say(self, text: str, error: bool = False) -> None:
        self.query_one(StatusBar).say(text, error)

    def on_status(self, message: Status) -> None:
        self.say(message.text)

    # --- selection flows ----------------------------------------------------------

    def on_call_selected(self, message: CallSelected) -> None:
        self.call_index = message.call
        self._dirty.update(("stages", "pytree", "failure", "devices"))
        self._refresh_active()
        self._load_hidden_stages()

    def _load_hidden_stages(self) -> None:
        """Give the (hidden, but laid out) stages view the call's stages now: their lines
        are indexed and their scrollbars placed before the user switches, so the switch
        itself is one frame."""
        call = self.call
        if call is not None and call.stages and "stages" in self._dirty:
            self.query_one(StagesPane).show_call(self.call_index, call)
            self._dirty.discard("stages")

    def on_step_selected(self, message: StepSelected) -> None:
        # The cursor as it is now, not as the message saw it: after a filter changes the
        # rows, several of these may queue up, and the views must show the cursor's row.
        call, step = self.steps.current()
        if call != self.call_index:
            self.on_call_selected(CallSelected(call))
        self.call_index, self.step_pos = call, step
        self._dirty.add("step")
        self._dirty.add("stages-cursor")
        self._refresh_active()

    def on_view_chosen(self, message: ViewChosen) -> None:
        self.action_view(message.view)

    @property
    def active_view(self) -> str:
        """The view shown: step | stages | pytree | failure."""
        current = self.query_one(PaneStack).current or "step-pane"
        return current.removesuffix("-pane")

    def _active(self) -> str:
        return self.active_view

    def _refresh_active(self) -> None:
        call = self.call
        if call is None:
            return
        view = self._active()
        index = self.steps.outline.index(self.call_index)
        if view == "step" and "step" in self._dirty:
            self.query_one(StepPane).show(call, index, self.step_pos,
                                          self.steps.outline.call_label(self.call_index))
            self._dirty.discard("step")
        elif view == "stages":
            pane = self.query_one(StagesPane)
            if "stages" in self._dirty:
                pane.show_call(self.call_index, call)
                self._dirty.discard("stages")
            if "stages-cursor" in self._dirty:
                self._show_step_in_stages(pane)
                self._dirty.discard("stages-cursor")
        elif view == "pytree" and "pytree" in self._dirty:
            self.query_one(PytreePane).show(call)
            self._dirty.discard("pytree")
        elif view == "failure" and "failure" in self._dirty:
            outline = self.steps.outline
            failing = tuple((c.index, outline.call_label(i))
                            for i, c in enumerate(self.session.calls) if c.errors)
            self.query_one(FailurePane).show(self.call_index, call, index,
                                             outline.call_label(self.call_index), failing)
            self._dirty.discard("failure")
        elif view == "devices" and "devices" in self._dirty:
            self.query_one(DevicesPane).show(call, self.session.process)
            self._dirty.discard("devices")
        elif view == "output" and "output" in self._dirty:
            self._show_output()
            self._dirty.discard("output")

    def _show_output(self) -> None:
        """The story: what the recording shows (its description) and what the recorded
        program printed (the whole session's: prints are not per call)."""
        lines: list[str] = []
        headings: set[int] = set()
        if self.description:
            headings.add(len(lines))
            lines += ["What it shows", self.description, ""]
        headings.add(len(lines))
        lines.append("What it printed")
        if self.output is None:
            lines.append("(this recording kept no printed output: the gallery and "
                         "`workbench run --watch` keep it)")
        elif not self.output.strip():
            lines.append("(nothing)")
        else:
            lines += self.output.rstrip("\n").split("\n")
        self.query_one("#output-pane", TextLines).set_lines(lines, headings=headings)

    def _show_step_in_stages(self, pane: StagesPane) -> None:
        """Put each stage's cursor on the equation this step became, as recorded."""
        call = self.call
        if call is None or self.step_pos is None or not call.stages:
            return
        step = call.steps[self.step_pos]
        index = self.steps.outline.index(self.call_index)
        for text in (pane.left, pane.right):
            if text.map is not None:
                text.show_eqn(text.map.eqn_of_step(step, index.step_at))

    def on_equation_chosen(self, message: EquationChosen) -> None:
        """Enter on an equation: go to the step it was staged from (in the user's function)."""
        call = self.session.calls[message.call]
        stage = call.stages[message.stage]
        pane = self.query_one(StagesPane)
        smap = next((t.map for t in (pane.left, pane.right)
                     if t.stage_index == message.stage and t.map is not None), None)
        step_index = (smap or stage_map(stage)).step_of_eqn(message.eqn)
        if step_index is None:
            self.say(f"equation {message.eqn} of {stage.name} was not staged from a recorded "
                     f"step" if stage.eqn_steps else
                     f"{stage.name} has no recorded link from its equations to the steps")
            return
        pos = self.steps.outline.index(message.call).step_position(step_index)
        if pos is None:
            self.say(f"equation {message.eqn} of {stage.name} came from step #{step_index}, "
                     f"which this call did not record")
            return
        self.steps.select_step(message.call, pos)
        self.action_view("step")
        level = self.steps.outline.index(message.call).level_by_index.get(call.steps[pos].level)
        self.say(f"equation {message.eqn} of {stage.name}: step #{step_index}"
                 + (f" at {level.label}" if level is not None else ""))

    def on_failure_chosen(self, message: FailureChosen) -> None:
        call = self.session.calls[message.call]
        error = call.errors[message.error]
        pos = self.steps.outline.index(message.call).step_position(error.step)
        if pos is None:
            self.say("this error has no recorded step")
            return
        self.steps.select_step(message.call, pos)
        self.action_view("step")
        self.steps.focus()

    # --- actions ------------------------------------------------------------------

    def _toggle_in_stages(self, what: str) -> None:
        self.action_view("stages")
        self.query_one(StagesPane).action_toggle(what)

    def action_view(self, view: str) -> None:
        """Show a view. The focus stays where it was (the navigator's arrows keep moving
        the selection); if it was in the view being replaced, it moves into the new one."""
        if view == "devices" and not self.has_devices:
            self.say("this session ran on one device: no shardings or collectives recorded")
            return
        switcher = self.query_one(PaneStack)
        inside = self.focused is not None and switcher in self.focused.ancestors_with_self
        switcher.current = f"{view}-pane"
        self.query_one(TabLine).set_active(view)
        if inside:
            if view == "stages":
                self.query_one(StagesPane).focus_text()
            else:
                self.query_one(f"#{view}-pane").focus()
        self._refresh_active()
        self.refresh_bindings()

    async def action_stages(self, action: str) -> None:
        """A stages-view key, wherever the focus is."""
        await self.app.run_action(action, self.query_one(StagesPane))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "stages":
            stack = self.query(PaneStack)
            return bool(stack) and stack.first().current == "stages-pane"
        return True

    def action_zoom(self) -> None:
        """Give the views the whole width (stages side by side need it), or bring the navigator back."""
        nav = self.query_one(Navigator)
        nav.display = not nav.display
        if not nav.display and nav.has_focus_within:
            self.query_one(f"#{self._active()}-pane").focus()

    def action_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_search(self) -> None:
        focused = self.focused
        self._before_search = focused
        self._scope = focused if isinstance(focused, LineList) else self.steps
        where = "steps" if isinstance(self._scope, StepList) else (
            "the aligned diff" if self._scope.id == "stage-diff" else "the stage text")
        self.query_one(SearchBar).open(where)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if not isinstance(event.input, SearchBar):
            return
        event.stop()
        bar = event.input
        bar.remove_class("-open")
        scope = self._scope or self.steps
        count = scope.search(event.value)
        scope.focus()
        n = scope.next_match(True) if count else None
        if count and n is not None:
            self.say(f"{count:,} matches for {event.value!r}: {n + 1}/{count}  (n next, N previous)")
        else:
            self.say(f"no match for {event.value!r}")

    def focus_previous_pane(self) -> None:
        target = self._before_search if self._before_search is not None else self.steps
        if target.is_attached:
            target.focus()

    def action_next_match(self, forward: bool) -> None:
        scope = self._scope or self.steps
        if not scope.matches:
            self.say("no search yet: press / to search")
            return
        n = scope.next_match(forward)
        if n is not None:
            self.say(f"match {n + 1}/{len(scope.matches)} for {scope.query_text!r}")

    def action_back(self) -> None:
        bar = self.query_one(SearchBar)
        if bar.has_class("-open"):
            bar.action_close()
        elif self.gallery:
            self.app.pop_screen()

    def action_sessions(self) -> None:
        if self.gallery:
            self.app.pop_screen()
        else:
            self.say("one session is open: there is no gallery to go back to")

    def _stem(self, call: Call | None) -> str:
        label = self.steps.outline.call_label(self.call_index) if call is not None else ""
        return export.file_stem(self._heading(), call, label)

    def action_export_json(self) -> None:
        self._export("JSON", lambda call: export.export_call_json(
            self.session, call, self.export_dir, self._stem(call)))

    def action_export_graph(self) -> None:
        self._export("graph", lambda call: export.export_call_graph(
            call, self.export_dir, self._stem(call)))

    def action_export_svg(self) -> None:
        name = f"{self._stem(self.call)}-{self._active()}.svg"
        try:
            self.export_dir.mkdir(parents=True, exist_ok=True)
            path = self.app.save_screenshot(filename=name, path=str(self.export_dir))
        except Exception as e:  # a full disk, a read-only folder, text SVG cannot hold
            self.say(f"could not save the view: {type(e).__name__}: {e}", error=True)
            return
        self.say(f"saved this view to {path}")

    @work(thread=True, exclusive=True, group="export")
    def _export(self, what: str, write: Callable[[Call], Path]) -> None:
        call = self.call
        if call is None:
            return
        try:
            path = write(call)
        except Exception as e:  # Graphviz refusing a graph, a full disk: a message, not a crash
            self.app.call_from_thread(self.say, f"{what} export failed: {type(e).__name__}: "
                                                f"{e}", True)
            return
        self.app.call_from_thread(self.say, f"wrote call {call.index} as {what} to {path}")

    # --- the command palette ------------------------------------------------------

    def commands(self) -> Iterable[tuple[str, str, Callable[[], object]]]:
        yield "Step view", "the selected step: params, tracer towers, source", \
            lambda: self.action_view("step")
        yield "Stages view", "two stages side by side with the diff marked", \
            lambda: self.action_view("stages")
        yield "Pytree view", "input and output trees, leaves paired", \
            lambda: self.action_view("pytree")
        yield "Failure view", "what failed, where, and a hint", \
            lambda: self.action_view("failure")
        if self.has_devices:
            yield "Devices view", "arrays on the device mesh, collectives per stage", \
                lambda: self.action_view("devices")
        yield "Story view", "what the recording shows and what its program printed (6)", \
            lambda: self.action_view("output")
        yield "Hide or show the navigator", "the views take the whole width (z)", self.action_zoom
        yield "Search", "search steps or the focused stage text (/)", self.action_search
        yield "Filter steps", "p:PRIM l:LEVEL is:error words (f)", self.action_filter
        if self.steps.outline.failing_codes():
            yield "Next failing step", "jump to the next step that failed (x)", \
                lambda: self.steps.action_next_failure(1)
        yield "Toggle aligned diff", "the two stages aligned equation by equation (d)", \
            lambda: self._toggle_in_stages("diff")
        yield "Toggle stage stats", "equations, avals, primitive histogram (t)", \
            lambda: self._toggle_in_stages("stats")
        yield "Show growth", "equations against batch size, e.g. Python loop vs vmap (w)", \
            lambda: self._toggle_in_stages("growth")
        where = f"into {self.export_dir}"
        yield "Export call as JSON", f"write the current call as a session file {where} (e)", \
            self.action_export_json
        yield "Export graph image", f"draw the current call's graph {where} (i)", \
            self.action_export_graph
        yield "Save view as SVG", f"a screenshot of this view {where} (s)", \
            self.action_export_svg
        if self.gallery:
            yield "Sessions", "back to the session picker (o)", self.action_sessions

