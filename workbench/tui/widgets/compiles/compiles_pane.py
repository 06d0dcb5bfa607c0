"""The compiles view: every trace, lowering and compile of a jit in the session, per
function, each retrace with why it missed, the fix and the user's line (drawn by
`workbench.render.compiles`).

The session screen adds this pane only for sessions that traced a jit of the user's. It shows the
whole session, whichever call is selected.
"""
from __future__ import annotations

from textual.containers import VerticalScroll
from textual.widgets import Static

from transforms.model import Session, SourceLocation

from ....render.compiles import compiles_view
from ...guard import guarded
from ...navigation import Outline, Selection
from ...source import source_context, source_roots
from ..common.selection_view import SelectionView


def has_compiles(session: Session) -> bool:
    """A jit of the user's (its key recorded) was traced: eager jnp's own compiles alone
    (a session of vmap and grad calls has them, depending on JAX's caches) are no reason
    for the view."""
    return any(c.key is not None for c in session.compiles)


class CompilesPane(VerticalScroll, SelectionView, can_focus=True):
    VIEW = "compiles"
    DEFAULT_CSS = """
    CompilesPane { padding: 0 1; height: 1fr; }
    """

    def __init__(self, outline: Outline, **kwargs) -> None:
        super().__init__(**kwargs)
        self.outline = outline
        self._roots = source_roots(outline.session)

    def depends_on(self, old: Selection | None, new: Selection | None) -> bool:
        return old is None  # the whole session: drawn once

    def compose(self):
        yield Static(id="compiles-body")

    def show_selection(self, selection: Selection) -> None:
        self.show(self.outline.session)

    def show(self, session: Session) -> None:
        self.query_one("#compiles-body", Static).update(
            guarded(lambda: compiles_view(session, self._source_line), "compiles"))

    def _source_line(self, location: SourceLocation) -> str | None:
        found = source_context(location, 0, self._roots)
        return found[1][0] if found is not None and found[1] else None
