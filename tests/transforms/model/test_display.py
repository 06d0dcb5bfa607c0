"""The model's display hook (transforms/model/_display.py): a registered Display draws the
records; the latest registered is asked first; a record it does not know falls through to the
next, then to the record's own repr."""
from __future__ import annotations

import pytest

from transforms.model import Session, Stage, _display, register_display


class Named:
    def __init__(self, name: str, kind: type):
        self.name, self.kind = name, kind

    def html(self, record):
        return f"<b>{self.name}</b>" if isinstance(record, self.kind) else None

    def text(self, record):
        return self.name if isinstance(record, self.kind) else None


class Printer:
    def __init__(self):
        self.out = []

    def text(self, text):
        self.out.append(text)


@pytest.fixture
def displays(monkeypatch):
    monkeypatch.setattr(_display, "_displays", [])
    monkeypatch.setattr(_display, "_searched", True)  # no entry points: only what we register


def printed(record, cycle=False) -> str:
    printer = Printer()
    record._repr_pretty_(printer, cycle)
    return printer.out[0]


def test_the_latest_display_that_knows_a_record_draws_it(displays):
    assert Session()._repr_html_() is None and printed(Stage("f")) == repr(Stage("f"))
    sessions, stages = Named("sessions", Session), Named("stages", Stage)
    register_display(sessions)
    register_display(stages)
    assert Session()._repr_html_() == "<b>sessions</b>" and printed(Stage("f")) == "stages"
    register_display(Named("newer", Stage))
    assert printed(Stage("f")) == "newer" and printed(Session()) == "sessions"
    register_display(sessions)  # again: first, once
    assert _display._displays.count(sessions) == 1 and _display._displays[0] is sessions


def test_a_cycle_prints_the_repr(displays):
    register_display(Named("stages", Stage))
    assert printed(Stage("f"), cycle=True) == repr(Stage("f"))


def test_the_display_hook_adds_no_field_to_a_record():
    import dataclasses
    assert tuple(f.name for f in dataclasses.fields(Stage)) == Stage.__slots__
    assert not hasattr(Stage("f"), "__dict__")  # still slotted
