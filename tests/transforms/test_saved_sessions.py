"""What a record() block records, saved and loaded: the file, its atomic save, its mode, and the
clear refusal of a bad file (what is recorded: test_recorded_content.py)."""
from __future__ import annotations

import functools
import json
import os

import jax
import jax.numpy as jnp
import pytest
from corpus import (
    VEC,
    cond_fn,
    log1pexp,
    uncached,
)

import transforms


def sin_mul(x):
    y = jnp.sin(x)
    return y * x


def poly(x):
    return jnp.sin(x) * x + 1.0


# --- save and load -----------------------------------------------------------------

@functools.cache
def _rich_session():
    """One recording shared by the save/load tests (a session is frozen data; recording it
    with stages costs about 2 s, and about 40 tests read it)."""
    return _record_rich_session()


def _record_rich_session():
    with transforms.record() as session:
        transforms.vmap(transforms.grad(sin_mul))(VEC)
        transforms.grad(cond_fn)(0.3)
        transforms.grad(log1pexp)(3.0)
        uncached(transforms.jit(poly))(jnp.ones(2))
        try:
            transforms.vmap(lambda x: x if x > 0 else -x)(VEC)
        except jax.errors.TracerBoolConversionError:
            pass
    assert len(session.calls) == 5 and not session.calls[-1].ok
    return session


def test_save_then_load_gives_an_equal_session(tmp_path):
    session = _record_rich_session()
    path = tmp_path / "session.json"
    session.save(path)
    loaded = transforms.load(path)
    assert isinstance(loaded, transforms.Session)
    assert loaded.calls == session.calls
    assert loaded == session
    # Records come back as the record types, not as dicts or lists.
    step = loaded.calls[0].steps[0]
    assert isinstance(step, transforms.Step)
    assert isinstance(step.inputs[0], transforms.ValueRecord)
    assert isinstance(loaded.calls[0].levels[0], transforms.Level)
    assert isinstance(loaded.calls[-1].errors[0], transforms.ErrorRecord)
    assert isinstance(loaded.calls[0].source, transforms.SourceLocation)
    # And saving the loaded session writes the same bytes.
    again = tmp_path / "again.json"
    loaded.save(again)
    assert again.read_bytes() == path.read_bytes()


def test_saved_file_is_tagged_json(tmp_path):
    path = tmp_path / "s.json"
    _rich_session().save(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["schema"] == "jax-transform-workbench/session"
    assert data["schema_version"] == transforms.SCHEMA_VERSION
    assert data["jax_version"] == jax.__version__
    assert len(data["calls"]) == 5


def test_save_is_atomic_and_leaves_no_temp_files(tmp_path):
    session = _rich_session()
    path = tmp_path / "s.json"
    session.save(path)
    session.save(path)  # overwrite in place
    assert sorted(os.listdir(tmp_path)) == ["s.json"]
    assert transforms.load(path) == session


def test_a_failed_save_keeps_the_old_file_and_no_temp_files(tmp_path, monkeypatch):
    path = tmp_path / "s.json"
    with transforms.record() as small:
        transforms.grad(sin_mul)(0.3)
    small.save(path)
    before = path.read_bytes()

    def no_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_disk)
    with pytest.raises(OSError, match="No space left"):
        _rich_session().save(path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["s.json"]


def _saved_text(tmp_path) -> str:
    path = tmp_path / "good.json"
    _rich_session().save(path)
    return path.read_text(encoding="utf-8")


_BAD_FILES = [
    ("missing", ["no such file"]),
    ("directory", ["is a directory"]),
    ("empty", ["empty"]),
    ("whitespace", ["empty"]),
    ("truncated", ["truncated", "JSON"]),
    ("truncated_in_a_string", ["truncated", "JSON"]),
    ("truncated_before_last_brace", ["truncated", "JSON"]),
    ("not_json", ["not a workbench session dump: it is not JSON"]),
    ("not_utf8", ["not a text file"]),
    ("no_schema_tag", ["not a workbench session", "jax-transform-workbench/session"]),
    ("wrong_schema_tag", ["not a workbench session"]),
    ("json_list", ["not a workbench session"]),
    ("newer_version", ["schema version 99", "upgrade"]),
    ("version_zero", ["schema version 0 does not exist"]),
    ("version_not_int", ["schema_version"]),
    ("calls_not_a_list", ["malformed", "calls: expected an array"]),
    ("step_field_wrong_type", ["malformed", "tables['Step'][0].level: expected int, got 'zero'"]),
    ("step_index_wrong_type", ["malformed", "Call.steps[0] (call 0): expected a step shape's number "
                                            "or [index, shape number], got ['zero', 0]"]),
    ("missing_calls", ["malformed", "no 'calls'"]),
    ("missing_tables", ["malformed", "no 'tables'"]),
    ("step_row_too_short", ["malformed", "tables['Step'][0]: a step shape has 15 values, "
                                         "fields['Step'] without 'index' names 16"]),
    ("step_row_not_an_array", ["malformed", "Call.steps[0] (call 0): expected a step shape's number "
                                            "or [index, shape number], got {'index': 0}"]),
    ("step_shape_not_an_array", ["malformed", "tables['Step'][0]: expected a step shape (an "
                                              "array), got 5"]),
    ("step_shape_out_of_range", ["malformed", "Call.steps (call 0): step shape 999 is outside "
                                              "tables['Step']"]),
    ("required_field_not_listed", ["malformed", "fields['Step'] lacks 'index'"]),
    ("unknown_field_listed", ["malformed", "Step has no field 'colour'"]),
    ("unknown_record_type", ["malformed", "unknown record type 'Sharding9'"]),
    ("unknown_table", ["malformed", "unknown table 'tuple[int, ...]'"]),
    ("unknown_top_level_key", ["malformed", "unexpected top-level key 'extra'"]),
    ("table_not_an_array", ["malformed", "tables['ValueRecord']: expected an array"]),
    ("value_record_not_a_row", ["malformed", "ValueRecord: expected a ValueRecord row"]),
    ("index_out_of_range", ["malformed", "tables['Step'][0].inputs: index 9999 is outside "
                                         "tables['tuple[ValueRecord, ...]']"]),
    ("index_negative", ["malformed", "tables['Step'][0].inputs: index -1 is outside"]),
    ("index_a_string", ["malformed", "tables['Step'][0].inputs: expected an index into "
                                     "tables['tuple[ValueRecord, ...]'], got '0'"]),
    ("index_a_bool", ["malformed", "tables['Step'][0].source: expected an index into "
                                   "tables['SourceLocation'] or null, got True"]),
    ("index_in_a_table_out_of_range", ["malformed", "index 555 is outside tables['ValueRecord']"]),
    ("version_bool", ["schema_version"]),
    ("required_string_null", ["malformed", "Call.transform: expected str, got None"]),
    ("metadata_not_strings", ["malformed", "metadata: expected str, got 3"]),
    ("nested_too_deeply", ["malformed", "nested too deeply"]),
]


def _position(data: dict, cls: str, field: str) -> int:
    """Where a field sits in the rows of `cls` (the dump's `fields` header says)."""
    return data["fields"][cls].index(field)


def _steps(data: dict) -> list:
    """The first call's steps: numbers into tables["Step"] (schema version 4)."""
    return data["calls"][0][_position(data, "Call", "steps")]


def _first_step(data: dict) -> list:
    """The first step's shape: its row in tables["Step"], the Step's fields but `index`."""
    return data["tables"]["Step"][_steps(data)[0]]


def _shape_position(data: dict, field: str) -> int:
    return [n for n in data["fields"]["Step"] if n != "index"].index(field)


@pytest.mark.parametrize("problem, fragments", _BAD_FILES, ids=[p for p, _ in _BAD_FILES])
def test_load_rejects_bad_files_with_a_clear_message(tmp_path, problem, fragments):
    path = tmp_path / "bad.json"
    good = json.loads(_saved_text(tmp_path)) if problem not in (
        "missing", "directory", "empty", "whitespace", "not_json", "not_utf8") else None
    step = _first_step(good) if good is not None else None
    if problem == "missing":
        pass
    elif problem == "directory":
        path.mkdir()
    elif problem == "empty":
        path.write_text("")
    elif problem == "whitespace":
        path.write_text("  \n\n")
    elif problem == "truncated":
        text = json.dumps(good)
        path.write_text(text[: len(text) // 2])
    elif problem == "truncated_in_a_string":
        text = json.dumps(good)
        cut = text.index('"python_version": "') + len('"python_version": "') + 2
        path.write_text(text[:cut])
    elif problem == "truncated_before_last_brace":
        path.write_text(json.dumps(good)[:-1])
    elif problem == "not_json":
        path.write_text("this is not json {")
    elif problem == "not_utf8":
        path.write_bytes(b"\xff\xfe\x00garbage\x80")
    elif problem == "no_schema_tag":
        del good["schema"]
    elif problem == "wrong_schema_tag":
        good["schema"] = "something-else"
    elif problem == "json_list":
        good = [good]
    elif problem == "newer_version":
        good["schema_version"] = 99
    elif problem == "version_zero":
        good["schema_version"] = 0
    elif problem == "version_not_int":
        good["schema_version"] = "1"
    elif problem == "calls_not_a_list":
        good["calls"] = {"a": 1}
    elif problem == "step_field_wrong_type":
        step[_shape_position(good, "level")] = "zero"
    elif problem == "step_index_wrong_type":
        _steps(good)[0] = ["zero", _steps(good)[0]]
    elif problem == "missing_calls":
        del good["calls"]
    elif problem == "missing_tables":
        del good["tables"]
    elif problem == "step_row_too_short":
        del step[_shape_position(good, "level")]
    elif problem == "step_row_not_an_array":
        _steps(good)[0] = {"index": 0}
    elif problem == "step_shape_not_an_array":
        good["tables"]["Step"][_steps(good)[0]] = 5
    elif problem == "step_shape_out_of_range":
        _steps(good)[0] = 999
    elif problem == "required_field_not_listed":
        good["fields"]["Step"].remove("index")
    elif problem == "unknown_field_listed":
        good["fields"]["Step"].append("colour")
    elif problem == "unknown_record_type":
        good["fields"]["Sharding9"] = ["mesh"]
    elif problem == "unknown_table":
        good["tables"]["tuple[int, ...]"] = [[1, 2]]
    elif problem == "unknown_top_level_key":
        good["extra"] = 1
    elif problem == "table_not_an_array":
        good["tables"]["ValueRecord"] = {"0": []}
    elif problem == "value_record_not_a_row":
        good["tables"]["ValueRecord"][0] = 5
    elif problem == "index_out_of_range":
        step[_shape_position(good, "inputs")] = 9999
    elif problem == "index_negative":
        step[_shape_position(good, "inputs")] = -1
    elif problem == "index_a_string":
        step[_shape_position(good, "inputs")] = "0"
    elif problem == "index_a_bool":
        step[_shape_position(good, "source")] = True
    elif problem == "index_in_a_table_out_of_range":
        good["tables"]["tuple[ValueRecord, ...]"][0] = [555]
    elif problem == "version_bool":
        good["schema_version"] = True  # JSON `true` is not the integer 1
    elif problem == "required_string_null":
        good["calls"][0][_position(good, "Call", "transform")] = None  # a str, never None
    elif problem == "metadata_not_strings":
        good["metadata"] = {"argv": 3}
    elif problem == "nested_too_deeply":  # json.dumps cannot write it: spliced in as text
        text = json.dumps({**good, "title": "DEEP"})
        path.write_text(text.replace('"DEEP"', "[" * 100_000 + "]" * 100_000))
        good = None
    if good is not None and problem not in ("truncated", "truncated_in_a_string",
                                            "truncated_before_last_brace"):
        path.write_text(json.dumps(good))
    with pytest.raises(transforms.SessionLoadError) as info:
        transforms.load(path)
    message = str(info.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert isinstance(info.value, ValueError)


# Version 3 wrote each step as a row (what the loader still reads): its rows' problems.
_BAD_V3_STEP_ROWS = [
    ("step_field_wrong_type", ["malformed", "Step.index: expected int, got 'zero'"]),
    ("step_row_too_short", ["malformed", "Step: a row has 16 values, fields['Step'] names 17"]),
    ("step_row_not_an_array", ["malformed", "Step: expected a Step row (an array)"]),
    ("index_out_of_range", ["malformed", "Step.inputs: index 9999 is outside "
                                         "tables['tuple[ValueRecord, ...]']"]),
    ("index_a_bool", ["malformed", "Step.source: expected an index into "
                                   "tables['SourceLocation'] or null, got True"]),
    ("a_step_table", ["malformed", "unknown table 'Step'"]),
]


@pytest.mark.parametrize("problem, fragments", _BAD_V3_STEP_ROWS,
                         ids=[p for p, _ in _BAD_V3_STEP_ROWS])
def test_a_version_3_dump_with_a_bad_step_row_is_refused(tmp_path, problem, fragments):
    from transforms.model import RECORD_TYPES, _layout
    good = json.loads(_layout.json_text(_rich_session(), RECORD_TYPES, 3))
    path = tmp_path / "v3.json"
    path.write_text(json.dumps(good))
    assert transforms.load(path).schema_version == 3
    step = _steps(good)[0]
    if problem == "step_field_wrong_type":
        step[_position(good, "Step", "index")] = "zero"
    elif problem == "step_row_too_short":
        del step[_position(good, "Step", "index")]
    elif problem == "step_row_not_an_array":
        _steps(good)[0] = {"index": 0}
    elif problem == "index_out_of_range":
        step[_position(good, "Step", "inputs")] = 9999
    elif problem == "index_a_bool":
        step[_position(good, "Step", "source")] = True
    elif problem == "a_step_table":  # version 4's
        good["tables"]["Step"] = []
    path.write_text(json.dumps(good))
    with pytest.raises(transforms.SessionLoadError) as info:
        transforms.load(path)
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))



def test_saved_file_gets_the_mode_a_new_file_would_have(tmp_path):
    old = os.umask(0o022)
    try:
        path = tmp_path / "s.json"
        _rich_session().save(path)
        assert path.stat().st_mode & 0o777 == 0o644  # not mkstemp's private 0o600
    finally:
        os.umask(old)
