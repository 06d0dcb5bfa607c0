"""Schema version 3 on: a dump ends with an index of where each call's steps, trees and pairs
are, so `load(path, lazy=True)` decodes a call's parts when first read (issue 18, item 2).
Version 4 writes a call's steps as numbers into tables["Step"] (transforms/model/_step_shapes.py)."""
from __future__ import annotations

import json

import jax.numpy as jnp
import pytest
from tui_sessions import sync

import transforms as T
from transforms.model import LAZY_FIELDS, RECORD_TYPES, Lazy, SessionLoadError, _layout
from workbench.tui.navigation import Outline


def loss(w, x):
    return jnp.sum(jnp.tanh(x * w) ** 2)


@pytest.fixture(scope="module")
def recorded():
    with T.record(stages=True) as session:
        for i in range(4):
            T.vmap(T.grad(loss), in_axes=(None, 0))(jnp.ones(3), jnp.ones((2, 3)) * i)
        T.jit(jnp.cos)(1.0)
    return session


@pytest.fixture
def dump(tmp_path, recorded):
    path = tmp_path / "t.json"
    recorded.save(path)
    return path


def test_lazy_load_decodes_a_call_only_when_read_and_equals_the_eager_load(dump, recorded):
    lazy = T.load(dump, lazy=True)
    parts = [getattr(c, f) for c in lazy.calls for f in LAZY_FIELDS]
    assert all(isinstance(p, Lazy) and not p.decoded for p in parts)
    assert [len(c.steps) for c in lazy.calls] == [len(c.steps) for c in recorded.calls]
    assert not any(p.decoded for p in parts)  # len needs no decoding
    assert lazy.calls[1].steps[0] == recorded.calls[1].steps[0]
    assert lazy.calls[1].steps.decoded and not lazy.calls[0].steps.decoded
    eager = T.load(dump)
    assert all(type(getattr(c, f)) is tuple for c in eager.calls for f in LAZY_FIELDS)
    assert eager.calls == lazy.calls == recorded.calls
    assert eager.schema_version == lazy.schema_version == T.SCHEMA_VERSION == 4


def test_the_dump_is_plain_json_with_the_index_last(dump, recorded):
    text = dump.read_text()
    data = json.loads(text)
    assert list(data)[-2:] == ["calls", "lazy_at"]
    index = data["lazy_at"]
    assert index["fields"] == ["steps", "trees", "pairs"]
    steps_field = data["fields"]["Call"].index("steps")
    for call, (steps_span, _, _) in zip(data["calls"], index["spans"]):
        start, stop, count = steps_span
        assert json.loads(text[start:stop]) == call[steps_field] and count == len(call[steps_field])


def test_a_reindented_dump_is_read_whole(tmp_path, dump, recorded):
    again = tmp_path / "indented.json"
    again.write_text(json.dumps(json.loads(dump.read_text()), indent=2))
    loaded = T.load(again, lazy=True)
    assert all(type(c.steps) is tuple for c in loaded.calls)  # the index no longer holds
    assert loaded.calls == recorded.calls


def test_an_index_that_does_not_hold_is_never_trusted(tmp_path, dump, recorded):
    data = json.loads(dump.read_text())
    data["lazy_at"]["spans"][0][0][0] += 1  # the steps of call 0 start one character later
    bad = tmp_path / "bad-index.json"
    bad.write_text(json.dumps(data, separators=(",", ":")))
    assert T.load(bad, lazy=True).calls == recorded.calls


@pytest.mark.parametrize("mangle", ["a span of nine numbers", "not an object"])
def test_an_index_of_any_shape_is_read_whole_and_valid_to_the_schema(tmp_path, dump, recorded,
                                                                      mangle):
    """The index is advisory: the loader reads around one that does not hold, and the
    schema's validator agrees that the file is a dump (found by the fuzzer on 3.12)."""
    from workbench.cli import _main as cli
    data = json.loads(dump.read_text())
    if mangle == "not an object":
        data["lazy_at"] = 7
    else:
        data["lazy_at"]["spans"][0][0] = list(range(9))
    bad = tmp_path / "odd-index.json"
    bad.write_text(json.dumps(data, separators=(",", ":")))
    assert T.load(bad, lazy=True).calls == recorded.calls
    assert cli.main(["schema", "--validate", str(bad)]) == 0


def _index(text: str) -> dict:
    return json.loads(text[text.rindex(',"lazy_at":') + len(',"lazy_at":'):-1])


def _with_part(text: str, call: int, field: int, part: list) -> str:
    """The dump with one call's steps (trees, pairs) replaced, its index kept true (the
    spans after the edit shifted)."""
    index = _index(text)
    start, stop, _ = index["spans"][call][field]
    new = json.dumps(part, separators=(",", ":"))
    shift = len(new) - (stop - start)
    for row in index["spans"]:
        for span in row:
            if span[0] > start:
                span[0] += shift
            if span[1] >= stop:
                span[1] += shift
    index["spans"][call][field][2] = len(part)
    edited = text[:start] + new + text[stop:]
    return (edited[:edited.rindex(',"lazy_at":')] + ',"lazy_at":'
            + json.dumps(index, separators=(",", ":")) + "}")


@pytest.mark.parametrize("version", [3, 4])
def test_a_malformed_step_row_is_an_error_when_its_call_is_read(tmp_path, recorded, version):
    text = _layout.json_text(recorded, RECORD_TYPES, version)
    start, stop, _ = _index(text)["spans"][2][0]
    rows = json.loads(text[start:stop])
    if version == 3:
        rows[0][0] = "not an index"
    else:  # a step is a shape's number, or [index, shape number]
        rows[0] = "not a step"
    bad = tmp_path / "bad-row.json"
    bad.write_text(_with_part(text, 2, 0, rows))
    assert len(T.load(bad, lazy=True).calls) == 5
    lazy = T.load(bad, lazy=True)
    assert len(lazy.calls[2].steps) == len(rows)
    lazy.calls[1].steps[0]  # the others read fine
    message = r"calls\[2\]\.steps" + ("" if version == 3 else r"\[0\]: expected a step shape")
    with pytest.raises(SessionLoadError, match=message):
        lazy.calls[2].steps[0]
    with pytest.raises(SessionLoadError, match=message):
        T.load(bad)


@pytest.mark.parametrize("version", [3, 4])
def test_the_consistency_checks_run_on_a_lazy_part_when_it_is_decoded(tmp_path, recorded,
                                                                      version):
    """A step row that decodes but breaks a load-time check (_check: a step index twice):
    the lazy load opens and reads the other calls, the call raises when read, and the
    whole load refuses the file, with the same message."""
    text = _layout.json_text(recorded, RECORD_TYPES, version)
    start, stop, _ = _index(text)["spans"][2][0]
    rows = json.loads(text[start:stop])
    if version == 3:
        assert (rows[0][0], rows[1][0]) == (0, 1)
        rows[1][0] = 0
    else:  # the index written out: [index, shape number]
        assert all(type(r) is int for r in rows)
        rows[1] = [0, rows[1]]
    bad = tmp_path / "twice.json"
    bad.write_text(_with_part(text, 2, 0, rows))
    lazy = T.load(bad, lazy=True)
    assert not lazy.calls[2].steps.decoded  # the whole-session checks left it alone
    tuple(lazy.calls[1].steps)
    message = r"calls\[2\]\.steps: Step\.index 0 appears twice"
    with pytest.raises(SessionLoadError, match=message):
        lazy.calls[2].steps[0]
    with pytest.raises(SessionLoadError, match=message):
        T.load(bad)


@pytest.mark.parametrize("version", [2, 3])
def test_older_versions_still_load(tmp_path, recorded, version):
    """Versions 2 (no index) and 3 (the index): steps as rows, eagerly and lazily."""
    text = _layout.json_text(recorded, RECORD_TYPES, version)
    data = json.loads(text)
    assert ("lazy_at" in data) == (version == 3)
    assert not {"Step", "tuple[Level, ...]"} & set(data["tables"])  # version 4's tables
    old = tmp_path / "old.json"
    old.write_text(text)
    for lazy in (False, True):
        loaded = T.load(old, lazy=lazy)
        assert loaded.schema_version == version and loaded.calls == recorded.calls


def test_a_version_4_dump_labelled_3_is_refused(tmp_path, recorded):
    """Its steps are numbers, not rows: read as version 3, they are malformed."""
    data = recorded.to_json_dict()
    data["schema_version"] = 3
    del data["tables"]["Step"]
    bad = tmp_path / "relabelled.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(SessionLoadError, match=r"expected a Step row"):
        T.load(bad)


def test_a_huge_session_opens_with_its_calls_folded_and_undecoded(dump, monkeypatch):
    monkeypatch.setattr("workbench.tui.navigation.COLLAPSED_OPEN_STEPS", 10)
    session = T.load(dump, lazy=True)
    outline = Outline(session)
    assert not any(c.steps.decoded for c in session.calls[1:])
    assert session.calls[0].steps.decoded
    assert len(outline) == len(session.calls) + sum(1 for _ in outline.index(0).order) + len(
        session.calls[0].steps)
    outline.toggle(outline.find(outline.rows[len(outline) - 1]))  # unfold the last call
    assert session.calls[-1].steps.decoded


@sync
async def test_the_open_app_decodes_only_the_call_it_shows(dump, monkeypatch):
    """The navigator's key bar asks whether `x` (next failure) applies: answered without
    decoding every call (a million-step dump took 10 s to show when it did)."""
    from workbench.tui import build_app
    monkeypatch.setattr("workbench.tui.navigation.COLLAPSED_OPEN_STEPS", 10)
    session = T.load(dump, lazy=True)
    app = build_app(session)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("down")
        await pilot.pause()
        assert session.calls[0].steps.decoded
        assert not any(c.steps.decoded for c in session.calls[1:])


def test_saving_and_journaling_leave_a_recorded_calls_steps_as_rows(tmp_path):
    from transforms.model._journal import Journal

    with T.record() as session:
        T.grad(loss)(jnp.ones(3), jnp.ones(3))
    (call,) = session.calls
    journal = Journal.open(str(tmp_path / "j"), {})
    journal.call(call)
    journal.close()
    session.save(tmp_path / "t.json")
    # NB: decoded for the writer, not kept: a long run's steps stay compact rows
    assert not call.steps.decoded
    assert T.model.load(tmp_path / "t.json").calls[0].steps == call.steps.peek()
