"""The session picker: the gallery's sessions, one per line; enter opens one."""
from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Header, OptionList
from textual.widgets.option_list import Option

from ...safe_text import terminal
from ..messages import SessionChosen
from ..model import Gallery, session_summary
from ..widgets.common.key_bar import KeyBar


class PickerScreen(Screen):
    """Several recorded sessions (`workbench demo`): choose one to browse."""

    def __init__(self, gallery: Gallery) -> None:
        super().__init__()
        self.gallery = gallery

    def compose(self) -> ComposeResult:
        yield Header()
        options = []
        for i, (title, session) in enumerate(self.gallery):
            line = Text.assemble((terminal(title, 300), "bold"), ("  " + session_summary(session), "dim"))
            options.append(Option(line, id=str(i)))
        yield OptionList(*options, id="sessions")
        yield KeyBar(id="keys")

    def on_mount(self) -> None:
        self.title = "workbench: sessions"
        self.sub_title = f"{len(self.gallery)} sessions  enter: open  ? help  q quit"
        self.query_one(OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.post_message(SessionChosen(event.option_index))
