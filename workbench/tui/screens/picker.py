"""The session picker: the gallery's sessions, one per line, the highlighted one's story
below; enter opens one. Sessions still being recorded say so and open when ready."""
from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Header, OptionList, Static
from textual.widgets.option_list import Option

from ..._safe_text import terminal
from ..messages import SessionChosen
from ..navigation import Entries, sanitize, session_summary
from ..widgets.common.key_bar import KeyBar
from ..widgets.common.status_bar import StatusBar


class SessionOptions(OptionList):
    """The list, with the navigator's keys: g/G first/last, j/k down/up."""

    BINDINGS = [
        Binding("G", "last", "Last", show=False),
        Binding("g", "first", "First", show=False),
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
    ]


class PickerScreen(Screen):
    """Several recorded sessions (`workbench demo`): choose one to browse."""

    DEFAULT_CSS = """
    PickerScreen #about { height: auto; max-height: 6; padding: 0 1; background: $boost;
                          border-top: hkey $panel-lighten-2; }
    """

    def __init__(self, entries: Entries, descriptions: list[str] | None = None) -> None:
        super().__init__()
        self.entries = entries
        self.descriptions = descriptions or [""] * len(entries)

    def compose(self) -> ComposeResult:
        yield Header()
        yield SessionOptions(*[Option(self._line(i), id=str(i)) for i in range(len(self.entries))],
                             id="sessions")
        yield Static(id="about")
        yield StatusBar(id="status")
        yield KeyBar(id="keys")

    def _line(self, i: int) -> Text:
        title, session = self.entries[i]
        summary = "recording…" if session is None else session_summary(session)
        return Text.assemble((terminal(title, 300), "bold"), ("  " + summary, "dim"))

    def on_mount(self) -> None:
        self.title = "workbench: sessions"
        self.sub_title = f"{len(self.entries)} sessions  enter: open  ? help  q quit"
        options = self.query_one(OptionList)
        options.focus()
        self._describe(options.highlighted or 0)

    def recorded(self, i: int) -> None:
        """Session i is there now: show its summary."""
        self.query_one(OptionList).replace_option_prompt_at_index(i, self._line(i))

    def say(self, text: str, error: bool = False) -> None:
        self.query_one(StatusBar).say(text, error)

    def _describe(self, i: int) -> None:
        if not 0 <= i < len(self.entries):
            return
        about = self.descriptions[i] if i < len(self.descriptions) else ""
        self.query_one("#about", Static).update(
            Text(sanitize(about) or "(no description recorded)", style="" if about else "dim"))

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        self._describe(event.option_index)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.post_message(SessionChosen(event.option_index))
