"""SelectionView: a view of the session screen that follows the navigator's selection.

The screen binds its `selection` (call, step) and `view` (the view shown) into
each view with `data_bind`. A view drawn from what the selection moved away
from is `stale`; it draws the selection only while it is the view shown, and a
hidden one catches up when shown, so a key in the navigator redraws one view,
not six.
"""
from __future__ import annotations

from typing import ClassVar

from textual.reactive import var
from textual.widget import Widget

from ...navigation import Selection


class SelectionView(Widget):
    """Mixed into a view's widget class, after its Textual base (whose CSS it keeps):
    `VIEW` names the view, `show_selection` draws it."""

    VIEW: ClassVar[str] = ""

    selection: var[Selection | None] = var(None, init=False)  # bound to the screen's
    view: var[str] = var("", init=False)                      # the view shown: bound too
    stale: var[bool] = var(True, init=False)                  # drawn from an older selection

    def depends_on(self, old: Selection | None, new: Selection | None) -> bool:
        """Whether what this view draws changes when the selection goes from old to new:
        the step, unless a view says otherwise."""
        return True

    def watch_selection(self, old: Selection | None, new: Selection | None) -> None:
        if self.depends_on(old, new):
            self.stale = True
        self._catch_up()  # stale already (the first selection): `stale` did not change

    def watch_view(self) -> None:
        self._catch_up()

    def watch_stale(self) -> None:
        self._catch_up()

    def _catch_up(self) -> None:
        # NB: no selection before the navigator's first row is selected (or in a session
        # with no call): nothing to draw yet.
        if self.stale and self.view == self.VIEW and self.selection is not None:
            self.stale = False
            self.show_selection(self.selection)

    def show_selection(self, selection: Selection) -> None:
        raise NotImplementedError


def call_changed(old: Selection | None, new: Selection | None) -> bool:
    """`depends_on` for the views that show a whole call: only another call changes them."""
    return old is None or new is None or old.call != new.call
