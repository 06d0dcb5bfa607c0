"""How a notebook shows the records (`_repr_html_`, `_repr_pretty_`) without the model knowing
who draws them: a reader registers a Display (workbench.html does), or is found through the
`transforms.display` entry point group the first time a record is shown.

NB: the model imports neither JAX nor the workbench (tests/test_layers.py): the workbench is
named only in the package's metadata (pyproject.toml), never imported from here.
"""
from __future__ import annotations

import importlib.metadata
from typing import Any, Protocol

ENTRY_POINT_GROUP = "transforms.display"


class Display(Protocol):
    """Draws records for a notebook: HTML and plain text, or None for a record it does not
    know (the next display, or the record's own repr, is then used)."""

    def html(self, record: object) -> str | None: ...

    def text(self, record: object) -> str | None: ...


_displays: list[Display] = []
_searched = False


def register_display(display: Display) -> None:
    """Use `display` first from now on (registering one twice keeps one)."""
    if display in _displays:
        _displays.remove(display)
    _displays.insert(0, display)


def _registered() -> list[Display]:
    """The displays; the first time none is registered, the entry points' are loaded (each
    names a function that registers its display)."""
    global _searched
    if not _displays and not _searched:
        _searched = True
        for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            entry.load()()
    return _displays


def html_of(record: object) -> str | None:
    return next((out for d in _registered() if (out := d.html(record)) is not None), None)


def text_of(record: object) -> str | None:
    return next((out for d in _registered() if (out := d.text(record)) is not None), None)


class Displayed:
    """A record a notebook shows with a registered Display: Session, Call, Stage, StageDiff,
    TreePair, ErrorRecord. Adds no field (the codec reads the dataclass's own)."""
    __slots__ = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # IPython's pretty printer takes the first class in the MRO with `_repr_pretty_` or
        # `__repr__` in its own __dict__: a dataclass's generated __repr__ would win.
        cls._repr_pretty_ = Displayed._repr_pretty_  # type: ignore[method-assign]

    def _repr_html_(self) -> str | None:
        return html_of(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        text = None if cycle else text_of(self)
        printer.text(text if text is not None else repr(self))
