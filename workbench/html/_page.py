"""Each view as a notebook output, and a session as one standalone page (`workbench html
trace.json -o report.html`): self-contained, no script, no network."""
from __future__ import annotations

import os
from typing import Any

from transforms.model import (
    Call,
    ErrorRecord,
    Session,
    Stage,
    StageDiff,
    TreePair,
    register_display,
    write_atomically,
)

from ._blocks import DEFAULT, Budget, h
from ._call import call_html
from ._failure import failure_html
from ._session import session_html
from ._stages import diff_html, stage_html
from ._style import STYLE, wrap
from ._text import record_text
from ._trees import pair_html

__all__ = ["HtmlDisplay", "install", "page", "record_html", "write_page"]


def record_html(record: Any, budget: Budget = DEFAULT) -> str | None:
    """The view of a record as a notebook output (its stylesheet included); None for a record
    that has no view."""
    if isinstance(record, Session):
        body = session_html(record, budget)
    elif isinstance(record, Call):
        body = call_html(record, budget)
    elif isinstance(record, Stage):
        body = stage_html(record, budget, opened=True)
    elif isinstance(record, StageDiff):
        body = diff_html(record, budget=budget)
    elif isinstance(record, TreePair):
        body = pair_html(record, budget)
    elif isinstance(record, ErrorRecord):
        body = failure_html(record, budget=budget)
    else:
        return None
    return wrap(body)


def page(session: Session, title: str | None = None, budget: Budget = DEFAULT) -> str:
    """The session as a whole HTML document."""
    name = h(title if title is not None else (session.title or "JAX transformation session"))
    # The page allows no script at all, whatever got in (Content-Security-Policy).
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            "style-src 'unsafe-inline'; img-src data:\">"
            f"<meta name=\"viewport\" content=\"width=device-width\"><title>{name}</title>"
            f"{STYLE}</head><body><div class=\"wb\">{session_html(session, budget)}</div>"
            "</body></html>\n")


def write_page(session: Session, out: str | os.PathLike, title: str | None = None,
               budget: Budget = DEFAULT) -> None:
    """Write the page atomically (it appears complete or not at all)."""
    write_atomically(out, page(session, title, budget))


class HtmlDisplay:
    """The workbench's Display for transforms.model: its records' notebook outputs."""

    def html(self, record: object) -> str | None:
        return record_html(record)

    def text(self, record: object) -> str | None:
        return record_text(record)


_DISPLAY = HtmlDisplay()


def install() -> None:
    """Show the records as HTML in notebooks (the `transforms.display` entry point; importing
    workbench.html calls it too)."""
    register_display(_DISPLAY)
