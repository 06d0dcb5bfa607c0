"""The main screen: the navigator beside the step, stages, pytree and failure views.

The screen holds the selection (the navigator's call and step) and the view shown as
reactives; each view follows them, bound with `data_bind` (widgets/common/selection_view),
and the tabs mark the view. Search is the search bar's, exports are session_export's,
the command palette's entries session_commands'.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, ClassVar, Iterable, NamedTuple

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import Header, Input, Static

from transforms.model import Call, Session

from ... import _safe_text as safe_text
from .. import export
from ..messages import CallChosen, EquationChosen, FailureChosen, Status, StepSelected, ViewChosen
from ..navigation import (
    CALL,
    Outline,
    Selection,
    pack,
    session_description,
    session_ending,
    session_summary,
)
from ..widgets.common.key_bar import KeyBar
from ..widgets.common.line_list import LineList
from ..widgets.common.pane_stack import PaneStack
from ..widgets.common.search_bar import SearchBar
from ..widgets.common.selection_view import SelectionView
from ..widgets.common.status_bar import StatusBar
from ..widgets.common.tab_line import TabLine
from ..widgets.compiles.compiles_pane import CompilesPane, has_compiles
from ..widgets.devices.devices_pane import DevicesPane, has_devices
from ..widgets.failure.failure_pane import FailurePane
from ..widgets.navigator.navigator import Navigator
from ..widgets.navigator.step_list import StepList
from ..widgets.pytree.pytree_pane import PytreePane
from ..widgets.stages.stages_pane import STAGE_KEYS, StagesPane
from ..widgets.step.step_pane import StepPane
from ..widgets.story.story_pane import StoryPane
from . import session_commands, session_export

VIEWS = ("step", "stages", "pytree", "failure", "devices", "output", "compiles")


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
        Binding("7", "view('compiles')", "Compiles", show=False),
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

    # NB: set on every navigator move, even to the same row, as the views were redrawn
    # (the step view scrolled back to its top) on each.
    selection: var[Selection | None] = var(None, init=False, always_update=True)
    view: var[str] = var("step", init=False, bindings=True)  # the view shown: one of VIEWS

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
        self.outline = Outline(session)
        # NB: the devices view exists only for sessions that ran on several devices.
        self.has_devices = has_devices(session)
        self.has_compiles = has_compiles(session)  # the compiles view: when some were recorded
        self.description = session_description(session)
        self.ending = session_ending(session)  # a run that died: how, said first

    def compose(self) -> ComposeResult:
        yield Header()
        if self.description or self.ending:
            yield Static(self._banner(), id="story")
        with Horizontal(id="body"):
            yield Navigator(self.outline, id="navigator")
            with Vertical(id="views"):
                yield TabLine(self._tab_labels(), "step", id="tabs").data_bind(
                    active=SessionScreen.view)
                with PaneStack(initial="step-pane", id="view-switcher"):
                    for pane in self._views():
                        yield pane.data_bind(SessionScreen.selection, SessionScreen.view)
        yield SearchBar(id="search")
        yield StatusBar(id="status")
        yield KeyBar(id="keys")

    def _banner(self) -> Text:
        """Above the views: how the run ended (when it died), then what the recording shows."""
        text = Text(self.ending, style="bold red") if self.ending else Text()
        if self.description:
            text.append(("\n" if self.ending else "") + self.description)
        return text

    def _views(self) -> list[SelectionView]:
        outline = self.outline
        views: list[SelectionView] = [
            StepPane(outline, id="step-pane"), StagesPane(outline, id="stages-pane"),
            PytreePane(outline, id="pytree-pane"), FailurePane(outline, id="failure-pane")]
        if self.has_devices:
            views.append(DevicesPane(outline, id="devices-pane"))
        views.append(StoryPane(self.session, id="output-pane"))
        if self.has_compiles:
            views.append(CompilesPane(outline, id="compiles-pane"))
        return views

    def _tab_labels(self) -> list[tuple[str, str]]:
        failed = sum(1 for c in self.session.calls if c.errors)
        labels = [("step", "1 Step"), ("stages", "2 Stages"), ("pytree", "3 Pytree"),
                  ("failure", f"4 Failure ✗{failed}" if failed else "4 Failure")]
        labels += [("devices", "5 Devices")] if self.has_devices else []
        labels += [("output", "6 Story")]
        if self.has_compiles:
            retraces = sum(c.is_miss and c.key is not None for c in self.session.compiles)
            labels.append(("compiles", f"7 Compiles ↻{retraces}" if retraces else "7 Compiles"))
        return labels

    def heading(self) -> str:
        """The caller's title (a file name), and the recording's own title when it says more."""
        own = self.session.title
        if not own or own == self.session_title:
            return self.session_title
        return own if self.session_title == "session" else f"{self.session_title} — {own}"

    def on_mount(self) -> None:
        self.title = f"workbench: {safe_text.terminal(self.heading(), 300)}"
        self.sub_title = (f"{session_summary(self.session)}"
                          f"  ? help  ctrl+p commands")
        self.steps.focus()
        if self._place is not None:
            self._restore(self._place)
        if self._note:
            self.say(self._note)

    def current_place(self) -> Place:
        """Where the user is: kept when a new recording replaces this session (--watch)."""
        nav = self.query_one(Navigator)
        return Place(self.call_index, self.step_pos, self.view,
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
                self.steps.set_cursor(self.outline.find(pack(CALL, call, 0)))
        if place.zoomed:
            self.action_zoom()
        if place.view != "step" and self._has_view(place.view):
            self.action_view(place.view)

    # --- parts ------------------------------------------------------------------

    @property
    def steps(self) -> StepList:
        return self.query_one(StepList)

    @property
    def call_index(self) -> int:
        return self.selection.call if self.selection is not None else 0

    @property
    def step_pos(self) -> int | None:
        return self.selection.step if self.selection is not None else None

    @property
    def call(self) -> Call | None:
        calls = self.session.calls
        return calls[self.call_index] if 0 <= self.call_index < len(calls) else None

    def _has_view(self, view: str) -> bool:
        return {"devices": self.has_devices, "compiles": self.has_compiles}.get(view, True)

    @property
    def active_view(self) -> str:
        """The view shown: step | stages | pytree | failure | devices | output | compiles."""
        return self.view

    def say(self, text: str, error: bool = False) -> None:
        self.query_one(StatusBar).say(text, error)

    def on_status(self, message: Status) -> None:
        self.say(message.text)

    # --- the selection and what follows it --------------------------------------------

    def on_step_selected(self, message: StepSelected) -> None:
        # The cursor as it is now, not as the message saw it: after a filter changes the
        # rows, several of these may queue up, and the views must show the cursor's row.
        self.selection = Selection(*self.steps.current())

    def on_view_chosen(self, message: ViewChosen) -> None:
        self.action_view(message.view)

    def watch_view(self, view: str) -> None:
        self.query_one(PaneStack).current = f"{view}-pane"

    def on_equation_chosen(self, message: EquationChosen) -> None:
        """Enter on an equation: go to the step it was staged from (in the user's function)."""
        pos, note = self.query_one(StagesPane).origin(message)
        if pos is not None:
            self.steps.select_step(message.call, pos)
            self.action_view("step")
        self.say(note)

    def on_call_chosen(self, message: CallChosen) -> None:
        self.steps.select_call(message.call)

    def on_failure_chosen(self, message: FailureChosen) -> None:
        call = self.session.calls[message.call]
        error = call.errors[message.error]
        pos = self.outline.index(message.call).step_position(error.step)
        if pos is None:
            self.say("this error has no recorded step")
            return
        self.steps.select_step(message.call, pos)
        self.action_view("step")
        self.steps.focus()

    # --- actions ------------------------------------------------------------------

    def action_view(self, view: str) -> None:
        """Show a view. The focus stays where it was (the navigator's arrows keep moving
        the selection); if it was in the view being replaced, it moves into the new one."""
        if view == "devices" and not self.has_devices:
            self.say("this session ran on one device: no shardings or collectives recorded")
            return
        if view == "compiles" and not self.has_compiles:
            self.say("no jit traced or compiled while this session recorded")
            return
        stack = self.query_one(PaneStack)
        inside = self.focused is not None and stack in self.focused.ancestors_with_self
        self.view = view
        if inside:
            self._focus_view()

    def _focus_view(self) -> None:
        """Focus the view shown: the stages view's text (its pane takes no focus itself)."""
        if self.view == "stages":
            self.query_one(StagesPane).focus_text()
        else:
            self.query_one(f"#{self.view}-pane").focus()

    async def action_stages(self, action: str) -> None:
        """A stages-view key, wherever the focus is."""
        await self.app.run_action(action, self.query_one(StagesPane))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "stages":
            return self.view == "stages"
        return True

    def toggle_in_stages(self, what: str) -> None:
        self.action_view("stages")
        self.query_one(StagesPane).action_toggle(what)

    def action_zoom(self) -> None:
        """Give the views the whole width (stages side by side need it), or bring the navigator back."""
        nav = self.query_one(Navigator)
        nav.display = not nav.display
        if not nav.display and nav.has_focus_within:
            # NB: not the filter box, which would take the next `z` as text
            self._focus_view()

    def action_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_search(self) -> None:
        focused = self.focused
        scope = focused if isinstance(focused, LineList) else self.steps
        where = "steps" if isinstance(scope, StepList) else (
            "the aligned diff" if scope.id == "stage-diff" else "the stage text")
        self.query_one(SearchBar).open(scope, focused or scope, where)

    def action_next_match(self, forward: bool) -> None:
        self.query_one(SearchBar).next_match(forward)

    def action_back(self) -> None:
        bar = self.query_one(SearchBar)
        if bar.is_open:
            bar.action_close()
        elif self.gallery:
            self.app.pop_screen()

    def action_sessions(self) -> None:
        if self.gallery:
            self.app.pop_screen()
        else:
            self.say("one session is open: there is no gallery to go back to")

    def action_export_json(self) -> None:
        session_export.export_json(self)

    def action_export_graph(self) -> None:
        session_export.export_graph(self)

    def action_export_svg(self) -> None:
        session_export.save_view(self)

    def commands(self) -> Iterable[tuple[str, str, Callable[[], object]]]:
        """The command palette's entries for this screen (the app asks for them)."""
        return session_commands.commands(self)
