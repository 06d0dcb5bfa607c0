"""The navigator's filter: `p:sin l:grad#2 is:error words`."""
from __future__ import annotations

from textual.widgets import Input


class FilterInput(Input):
    """One line above the step list; filters as you type on small sessions, on enter on large."""

    DEFAULT_CSS = """
    FilterInput { border: none; height: 1; padding: 0 1; background: $boost; }
    FilterInput:focus { border: none; background: $primary 20%; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(placeholder="filter: p:prim l:level is:error text", **kwargs)
