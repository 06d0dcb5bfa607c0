"""Schema version 3: a dump ends with an index of where each call's steps, trees and pairs
are, so `load(path, lazy=True)` decodes a call's parts when first read (issue 18, item 2)."""
from __future__ import annotations

import json

import jax.numpy as jnp
import pytest
from test_tui_support import sync

import transforms as T
from transforms.dump import LAZY_FIELDS, SessionLoadError
from transforms.model import Lazy
from workbench.tui.model import Outline


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
    assert eager.schema_version == lazy.schema_version == T.SCHEMA_VERSION == 3


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
    from workbench import cli
    data = json.loads(dump.read_text())
    if mangle == "not an object":
        data["lazy_at"] = 7
    else:
        data["lazy_at"]["spans"][0][0] = list(range(9))
    bad = tmp_path / "odd-index.json"
    bad.write_text(json.dumps(data, separators=(",", ":")))
    assert T.load(bad, lazy=True).calls == recorded.calls
    assert cli.main(["schema", "--validate", str(bad)]) == 0


def test_a_malformed_step_row_is_an_error_when_its_call_is_read(tmp_path, dump):
    text = dump.read_text()
    start, stop, _ = json.loads(text[text.rindex('"lazy_at":') + 10:-1])["spans"][2][0]
    rows = json.loads(text[start:stop])
    rows[0][0] = "not an index"
    bad = tmp_path / "bad-row.json"
    part = json.dumps(rows, separators=(",", ":"))
    assert len(part) == stop - start + len('"not an index"') - len(str(0))
    fixed = text[:start] + part + text[stop:]
    # keep the file's own index true: shift the spans after the edit
    shift = len(part) - (stop - start)
    data = json.loads(fixed[:fixed.rindex(',"lazy_at":')] + "}")
    spans = json.loads(text[text.rindex('"lazy_at":') + 10:-1])
    for row in spans["spans"]:
        for span in row:
            if span[0] > start:
                span[0] += shift
            if span[1] >= stop:
                span[1] += shift
    bad.write_text(fixed[:fixed.rindex(',"lazy_at":')] + ',"lazy_at":'
                   + json.dumps(spans, separators=(",", ":")) + "}")
    assert len(data["calls"]) == 5
    lazy = T.load(bad, lazy=True)
    assert len(lazy.calls[2].steps) == len(rows)
    lazy.calls[1].steps[0]  # the others read fine
    with pytest.raises(SessionLoadError, match=r"calls\[2\]\.steps"):
        lazy.calls[2].steps[0]
    with pytest.raises(SessionLoadError, match=r"calls\[2\]\.steps"):
        T.load(bad)


def test_the_consistency_checks_run_on_a_lazy_part_when_it_is_decoded(tmp_path, dump):
    """A step row that decodes but breaks a load-time check (_check: a step index twice):
    the lazy load opens and reads the other calls, the call raises when read, and the
    whole load refuses the file, with the same message."""
    text = dump.read_text()
    start, stop, _ = json.loads(text[text.rindex('"lazy_at":') + 10:-1])["spans"][2][0]
    rows = json.loads(text[start:stop])
    assert (rows[0][0], rows[1][0]) == (0, 1)
    rows[1][0] = 0  # same length: the index still holds
    part = json.dumps(rows, separators=(",", ":"))
    assert len(part) == stop - start
    bad = tmp_path / "twice.json"
    bad.write_text(text[:start] + part + text[stop:])
    lazy = T.load(bad, lazy=True)
    assert not lazy.calls[2].steps.decoded  # the whole-session checks left it alone
    tuple(lazy.calls[1].steps)
    message = r"calls\[2\]\.steps: Step\.index 0 appears twice"
    with pytest.raises(SessionLoadError, match=message):
        lazy.calls[2].steps[0]
    with pytest.raises(SessionLoadError, match=message):
        T.load(bad)


def test_version_2_dumps_still_load(tmp_path, recorded):
    data = recorded.to_json_dict()
    data["schema_version"] = 2
    old = tmp_path / "v2.json"
    old.write_text(json.dumps(data))
    loaded = T.load(old, lazy=True)
    assert loaded.schema_version == 2 and loaded.calls == recorded.calls


def test_a_huge_session_opens_with_its_calls_folded_and_undecoded(dump, monkeypatch):
    monkeypatch.setattr("workbench.tui.model.COLLAPSED_OPEN_STEPS", 10)
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
    monkeypatch.setattr("workbench.tui.model.COLLAPSED_OPEN_STEPS", 10)
    session = T.load(dump, lazy=True)
    app = build_app(session)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("down")
        await pilot.pause()
        assert session.calls[0].steps.decoded
        assert not any(c.steps.decoded for c in session.calls[1:])
