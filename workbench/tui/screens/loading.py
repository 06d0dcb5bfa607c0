"""The first screen of `workbench open`: drawn at once, while the dump loads in a thread.

A 100,000-step dump takes longer to read than Textual takes to start; the
terminal shows the workbench, naming the file and its size, instead of
nothing, and the session replaces this screen when it is read.
"""
from __future__ import annotations

import os

from rich.text import Text
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Header, Static

from ..widgets.common.key_bar import KeyBar


class LoadingScreen(Screen):
    DEFAULT_CSS = """
    LoadingScreen #loading { height: 1fr; padding: 1 2; }
    """

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def compose(self) -> ComposeResult:
        yield Header()
        try:
            size = f" ({os.path.getsize(self.path) / 1e6:,.1f} MB)"
        except OSError:
            size = ""
        yield Static(Text.assemble(("loading ", "dim"), (self.path, "bold"), (f"{size}…", "dim")),
                     id="loading")
        yield KeyBar(id="keys")

    def on_mount(self) -> None:
        self.title = f"workbench: {self.path}"
        self.sub_title = "loading…"
