"""The story view: what the recording shows (its description) and what the recorded
program printed (the whole session's: prints are not per call)."""
from __future__ import annotations

from transforms.model import Session

from .... import _safe_text as safe_text
from ...navigation import Selection, session_description, session_ending, session_output
from ..common.selection_view import SelectionView
from ..common.text_lines import TextLines


class StoryPane(TextLines, SelectionView):
    """The session's story, drawn once: it is the same whichever step is selected."""

    VIEW = "output"

    def __init__(self, session: Session, **kwargs) -> None:
        super().__init__(**kwargs)
        self.session = session

    def depends_on(self, old: Selection | None, new: Selection | None) -> bool:
        return False

    def show_selection(self, selection: Selection) -> None:
        lines, headings = story_lines(session_description(self.session),
                                      session_output(self.session), session_ending(self.session))
        self.set_lines(lines, headings=headings)


def story_lines(description: str, output: str | None,
                ending: str = "") -> tuple[list[str], set[int]]:
    """The story's lines, and which of them are headings; `ending`: how a run that died
    ended (texts.session_ending), said first."""
    lines: list[str] = []
    headings: set[int] = set()
    if ending:
        headings.add(len(lines))
        lines += ["How it ended", ending, ""]
    if description:
        headings.add(len(lines))
        lines += ["What it shows", description, ""]
    headings.add(len(lines))
    lines.append("What it printed")
    if output is None:
        lines.append("(this recording kept no printed output: the gallery and "
                     "`workbench run --watch` keep it)")
    elif not output.strip():
        lines.append("(nothing)")
    else:
        # JAX prints a jaxpr in colour when it was imported on a terminal (the TUI's)
        lines += safe_text.without_colors(output).rstrip("\n").split("\n")
    return lines, headings
