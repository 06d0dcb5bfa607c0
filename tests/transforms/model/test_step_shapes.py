"""Schema version 4: a call's steps as numbers into tables["Step"], the step shapes
(transforms/model/_step_shapes.py). Read back into exactly the records a row would have made."""
from __future__ import annotations

import json
import random

import pytest
from repo_paths import DATA
from test_dump_format import _assert_same

import transforms
from transforms.model import (
    RECORD_TYPES,
    Call,
    JaxprRecord,
    Lazy,
    Level,
    Session,
    SourceLocation,
    Step,
    ValueRecord,
    _check,
    _codec,
    _layout,
    _schema as schema,
)
from workbench.cli import _main as cli

LEVELS = (Level(0, "outer", "outer", 0, None, "EvalTrace"),
          Level(1, "vmap", "vmap#1", 1, 0, "BatchTrace"))


def _random_steps(rng: random.Random, count: int, positional: bool, valid: bool) -> tuple:
    """Steps drawn from a few values of each field (so shapes repeat), each value a new
    object now and then (so identity and value differ), indices 0, 1, 2... or not."""
    def pick(options):
        value = rng.choice(options)
        return tuple(value) if isinstance(value, tuple) and rng.random() < 0.3 else value

    values = (ValueRecord("array", "ArrayImpl", "f32[3]"),
              ValueRecord("batched", "BatchTracer", "f32[]", level=1, batch_dim=0,
                          children=(("val", ValueRecord("array", "ArrayImpl", "f32[3]")),)))
    sources = (None, SourceLocation("m.py", 3, "loss"), SourceLocation("m.py", 4, "loss"))
    jaxpr = JaxprRecord("f", "{ lambda ; a. let b = sin a in (b,) }", 1)
    indices = list(range(count))
    if not positional:
        indices = sorted(rng.sample(range(3 * count + 5), count)) if valid else \
            [rng.randrange(-2, count + 3) for _ in range(count)]
        if rng.random() < 0.5:
            rng.shuffle(indices)
    steps = []
    for i in indices:
        earlier = [j for j in indices if j != i]
        cause = rng.choice([None, None, rng.choice(earlier)] if earlier else [None])
        if not valid and rng.random() < 0.2:
            cause = rng.randrange(-3, 3 * count + 3)
        steps.append(Step(
            index=i, level=rng.choice((0, 1)), primitive=rng.choice(("sin", "mul", "pjit")),
            kind=rng.choice(("primitive", "call")), phase=rng.choice(("forward", "backward")),
            params=pick(((), (("name", "'f'"),), (("axes", "(0,)"), ("x", "1")))),
            inputs=pick(((values[0],), (values[1], values[0]), ())),
            outputs=pick(((values[1],), ())), source=rng.choice(sources),
            name_stack=rng.choice(("", "vmap(jvp())")), subjaxprs=pick(((), (jaxpr,))),
            error=rng.choice((None, None, "ValueError: no")), cause=cause,
            inline=rng.random() < 0.5))
    return tuple(steps)


def _session(rng: random.Random, calls: int, valid: bool = True) -> Session:
    return Session(calls=[
        Call(n, "vmap", "loss", SourceLocation("m.py", 1, "loss"), levels=LEVELS,
             steps=_random_steps(rng, rng.randint(0, 12), rng.random() < 0.6, valid))
        for n in range(calls)], jax_version="0.0")


def _through_json(column: list, version: int = transforms.SCHEMA_VERSION) -> list:
    writer = _codec.Writer(RECORD_TYPES, _layout.layouts(version))
    encoded = writer.encode("tuple[Step, ...]", column)  # a column: each call's steps
    doc = json.loads(json.dumps({"fields": writer.fields_json(), "tables": writer.tables,
                                 "column": encoded}))
    reader = _codec.Reader(RECORD_TYPES, doc["fields"], doc["tables"],
                           _layout.layouts(version))
    return reader.decode("tuple[Step, ...]", doc["column"], "column")


@pytest.mark.parametrize("seed", range(40))
def test_any_steps_come_back_exactly_the_same(seed):
    """Any indices (gaps, out of order, twice, negative) and any causes, as version 3's rows
    would bring them back: the codec does not check what _check checks."""
    rng = random.Random(seed)
    column = [_random_steps(rng, rng.randint(0, 30), rng.random() < 0.5, rng.random() < 0.5)
              for _ in range(rng.randint(1, 4))]
    _assert_same(_through_json(column), column)
    _assert_same(_through_json(column), _through_json(column, 3))


@pytest.mark.parametrize("seed", range(8))
def test_a_session_saves_loads_and_saves_the_same_bytes(tmp_path, seed):
    session = _session(random.Random(seed), 6)
    path = tmp_path / "s.json"
    session.save(path)
    data = json.loads(path.read_text())
    assert data["schema_version"] == 4 and "Step" in data["tables"]
    loaded = transforms.load(path)
    _assert_same(loaded.calls, session.calls)
    assert transforms.load(path, lazy=True).calls == session.calls
    again = tmp_path / "again.json"
    loaded.save(again)  # the same values, other objects: the same bytes
    assert again.read_bytes() == path.read_bytes()
    assert schema.schema_problems(data) == []


def test_steps_repeated_across_calls_are_one_shape_each_and_a_number_per_step():
    base = _random_steps(random.Random(1), 8, positional=True, valid=True)
    steps = tuple(s._replace(index=s.index + 8 * k,
                             cause=None if s.cause is None else s.cause + 8 * k)
                  for k in range(5) for s in base)  # a loop's body, five times
    session = Session(calls=[Call(n, "vmap", "loss", None, levels=LEVELS, steps=steps)
                             for n in range(30)])
    data = session.to_json_dict()
    shapes = {(s.level, s.primitive, s.kind, s.phase, s.params, s.inputs, s.outputs, s.source,
               s.name_stack, s.subjaxprs, s.error,
               None if s.cause is None else s.index - s.cause, s.inline) for s in steps}
    assert len(data["tables"]["Step"]) == len(shapes) <= 8
    at = data["fields"]["Call"].index("steps")
    assert all(type(n) is int for call in data["calls"] for n in call[at])
    assert [len(call[at]) for call in data["calls"]] == [40] * 30
    # a cause is written as the offset back from its step
    cause = [n for n in data["fields"]["Step"] if n != "index"].index("cause")
    offsets = {data["tables"]["Step"][n][cause] for n in data["calls"][0][at]}
    assert offsets == {None if s.cause is None else s.index - s.cause for s in steps}


def test_steps_not_numbered_from_zero_write_their_index():
    steps = tuple(Step(i, 0, "sin") for i in (0, 1, 5, 6, 2))
    data = Session(calls=[Call(0, "jit", "f", None, levels=LEVELS[:1], steps=steps)]
                   ).to_json_dict()
    assert data["calls"][0][data["fields"]["Call"].index("steps")] == [0, 0, [5, 0], 0, [2, 0]]


def test_lazy_steps_save_as_the_steps_they_decode_to():
    steps = _random_steps(random.Random(2), 20, positional=True, valid=True)
    plain = Session(calls=[Call(0, "vmap", "loss", None, levels=LEVELS, steps=steps)])
    lazy = Session(calls=[Call(0, "vmap", "loss", None, levels=LEVELS,
                               steps=Lazy(20, lambda: steps))])  # type: ignore[arg-type]
    assert lazy.to_json_text() == plain.to_json_text()


def test_older_layouts_validate_against_their_own_schema(tmp_path):
    session = _session(random.Random(3), 3)
    for version in (2, 3, 4):
        data = json.loads(_layout.json_text(session, RECORD_TYPES, version))
        assert schema.schema_problems(data, schema.session_schema(data["fields"], version)) == []
        if version < 4:  # rows where version 4 has numbers
            assert schema.schema_problems(data) != []
        path = tmp_path / f"v{version}.json"
        path.write_text(json.dumps(data))
        assert cli.main(["schema", "--validate", str(path)]) == 0
        assert transforms.load(path).calls == session.calls


def _saved(session: Session) -> dict:
    return json.loads(session.to_json_text())


def _refused(tmp_path, data: dict) -> str:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data, separators=(",", ":")))
    with pytest.raises(transforms.SessionLoadError) as info:
        transforms.load(path)
    return str(info.value)


def _small() -> Session:
    steps = (Step(0, 1, "sin"), Step(1, 0, "sin", cause=0), Step(2, 1, "cos"))
    return Session(calls=[Call(0, "vmap", "f", None, levels=LEVELS, steps=steps)])


def test_a_cause_offset_pointing_nowhere_is_refused_by_the_checks(tmp_path):
    data = _saved(_small())
    cause = [n for n in data["fields"]["Step"] if n != "index"].index("cause")
    (shape,) = [s for s in data["tables"]["Step"] if s[cause] is not None]
    shape[cause] = 5  # step 1's cause: step -4
    assert "a step's cause -4 is not a step of the call" in _refused(tmp_path, data)
    shape[cause] = "1"
    assert "tables['Step'][1].cause: expected int | None, got '1'" in _refused(tmp_path, data)


@pytest.mark.parametrize("position, item, message", [
    (1, True, "Call.steps[1]: expected a step shape's number or [index, shape number], "
              "got True"),
    (1, [1, True], "got [1, True]"),
    (1, [1, 0, 0], "got [1, 0, 0]"),
    (1, -1, "step shape -1 is outside tables['Step'] (3 entries)"),
    (1, [7, 3], "step shape 3 is outside tables['Step'] (3 entries)"),
    (1, [0, 0], "Step.index 0 appears twice"),
    (0, [-1, 0], "a step index is out of range (-1..1)"),
])
def test_a_bad_step_is_refused_naming_it(tmp_path, position, item, message):
    data = _saved(_small())
    data["calls"][0][data["fields"]["Call"].index("steps")][position] = item
    assert message in _refused(tmp_path, data)


def test_a_step_shape_table_of_the_wrong_shape_is_refused(tmp_path):
    data = _saved(_small())
    data["tables"]["Step"] = {"0": []}
    assert "tables['Step']: expected an array, got an object" in _refused(tmp_path, data)
    data = _saved(_small())
    data["tables"]["Step"][1].append(0)
    assert ("tables['Step'][1]: a step shape has 17 values, fields['Step'] without 'index' "
            "names 16") in _refused(tmp_path, data)


def test_the_checks_still_see_every_step(tmp_path, monkeypatch):
    """What _check refuses in a version 4 dump (a step at a level the call lacks) is
    found when the dump loads, eagerly or when the lazy call is read."""
    data = _saved(_small())
    level = [n for n in data["fields"]["Step"] if n != "index"].index("level")
    data["tables"]["Step"][1][level] = 9
    assert "a step is at level 9, which the call does not have" in _refused(tmp_path, data)
    lazy = transforms.load(tmp_path / "bad.json", lazy=True)
    with pytest.raises(transforms.SessionLoadError, match="level 9"):
        lazy.calls[0].steps[0]
    monkeypatch.setattr(_check, "CHECKS", [])
    assert transforms.load(tmp_path / "bad.json").calls[0].steps[1].level == 9


# --- calls that wrote the same parts (a loop's calls) ----------------------------------

def _loop(calls: int) -> Session:
    steps = (Step(0, 1, "sin"), Step(1, 0, "sin", cause=0), Step(2, 1, "cos"))
    return Session(calls=[Call(n, "vmap", "f", None, levels=LEVELS, steps=steps)
                          for n in range(calls)])


def test_calls_that_wrote_the_same_steps_share_them_once_loaded(tmp_path):
    path = tmp_path / "loop.json"
    _loop(4).save(path)
    for lazy in (False, True):
        calls = transforms.load(path, lazy=lazy).calls
        parts = [tuple(c.steps) for c in calls]
        assert parts == [tuple(_loop(1).calls[0].steps)] * 4
        assert len({id(step) for p in parts for step in p}) == 3


def test_shared_steps_are_still_checked_against_each_calls_levels(tmp_path):
    """The same steps text in two calls, the second without level 1: its steps refer to a
    level it lacks, and the load says so for that call."""
    session = _loop(3)
    session.calls[2] = Call(2, "vmap", "f", None, levels=LEVELS[:1],
                            steps=session.calls[0].steps)
    path = tmp_path / "levels.json"
    session.save(path)
    with pytest.raises(transforms.SessionLoadError,
                       match=r"calls\[2\]\.steps: a step is at level 1, which the call does not"):
        transforms.load(path)
    lazy = transforms.load(path, lazy=True)
    assert len(lazy.calls[1].steps) == 3
    with pytest.raises(transforms.SessionLoadError, match=r"calls\[2\]\.steps: a step is at"):
        lazy.calls[2].steps[0]


def test_a_bad_part_written_twice_is_refused_for_each_call(tmp_path):
    session = _loop(3)
    text = session.to_json_text()
    spans = json.loads(text[text.rindex(',"lazy_at":') + len(',"lazy_at":'):-1])["spans"]
    for call in (0, 2):  # the same length: the index still holds
        start, stop, _ = spans[call][0]
        text = text[:start] + text[start:stop].replace("0", "9", 1) + text[stop:]
    path = tmp_path / "twice.json"
    path.write_text(text)
    lazy = transforms.load(path, lazy=True)
    tuple(lazy.calls[1].steps)
    for call in (0, 2):
        with pytest.raises(transforms.SessionLoadError,
                           match=rf"calls\[{call}\]\.steps: .*step shape 9 is outside"):
            lazy.calls[call].steps[0]
    with pytest.raises(transforms.SessionLoadError, match=r"calls\[0\]\.steps: .*step shape 9"):
        transforms.load(path)


def test_the_calls_levels_are_a_shared_table_from_version_4(tmp_path):
    data = _loop(5).to_json_dict()
    at = data["fields"]["Call"].index("levels")
    (levels,) = data["tables"]["tuple[Level, ...]"]  # written once, a row per level
    assert [list(row[:3]) for row in levels] == [[0, "outer", "outer"], [1, "vmap", "vmap#1"]]
    assert [call[at] for call in data["calls"]] == [0] * 5
    path = tmp_path / "levels.json"
    path.write_text(json.dumps(data))
    calls = transforms.load(path).calls
    assert calls == _loop(5).calls and len({id(c.levels) for c in calls}) == 1
    data = _saved(_loop(5))
    data["calls"][3][at] = 1
    assert ("Call.levels: index 1 is outside tables['tuple[Level, ...]'] (1 entries)"
            in _refused(tmp_path, data))


def test_a_version_3_dump_written_by_the_old_code_still_loads(tmp_path):
    """tests/data/session_v3.json: written by the version-3 writer (make_session_v3.py)."""
    old_path = DATA / "session_v3.json"
    old = transforms.load(old_path)
    assert old.schema_version == 3 and len(old.calls) == 4 and old.step_count > 40
    lazy = transforms.load(old_path, lazy=True)
    assert isinstance(lazy.calls[0].steps, Lazy) and lazy.calls == old.calls
    path = tmp_path / "v4.json"
    old.save(path)
    new = transforms.load(path)
    assert new.schema_version == 4
    _assert_same(new.calls, old.calls)
    # mostly stages, and fields version 3 had not (each step shape's and equation's scope):
    # about as large
    assert path.stat().st_size < old_path.stat().st_size * 1.02
    v1_as_v2 = old_path.with_name("session_v1.as_v2.json")  # its stages inline: older still
    assert cli.main(["schema", "--validate", str(old_path), str(v1_as_v2), str(path)]) == 0


@pytest.mark.parametrize("lazy", [False, True])
def test_a_dump_from_before_scopes_were_recorded_gets_them_once_when_loaded(lazy):
    """tests/data/session_unscoped.json: written before Step.scope, EqnRecord.scope and
    NonFiniteRecord.scope (make_session_unscoped.py); the loader derives each from the name
    stack's text, so readers read the field."""
    (call,) = transforms.load(DATA / "session_unscoped.json", lazy=lazy).calls
    assert [(s.name_stack, s.scope) for s in call.steps if s.primitive != "jit"] == [
        ("", ""), ("transpose(jvp(head))", "head"), ("transpose(jvp(head))", "head"),
        ("transpose(jvp(encoder))/layer_0", "encoder/layer_0")]
    jvp = next(stage for stage in call.stages if stage.name == "jvp(f)")
    assert {(e.primitive, e.scope) for e in jvp.eqns} == {
        ("log", "encoder/layer_0"), ("div", "encoder/layer_0"), ("mul", "head"),
        ("reduce_sum", "head")}
    assert [(f.primitive, f.scope) for f in call.nonfinite] == [("log", "encoder/layer_0")]


@pytest.mark.parametrize("name", ["session_unscoped.json", "session_v3.json"])
def test_a_dump_from_before_module_paths_were_recorded_loads_with_none(name, tmp_path):
    """Dumps written before Step.module (their fields['Step'] lacks it) load with "" for every
    step, and saved again keep it."""
    data = json.loads((DATA / name).read_text())
    assert "module" not in data["fields"]["Step"]
    for lazy in (False, True):
        session = transforms.load(DATA / name, lazy=lazy)
        assert session.step_count > 0
        assert {s.module for call in session.calls for s in call.steps} == {""}
    path = tmp_path / "again.json"
    session.save(path)
    assert {s.module for call in transforms.load(path).calls for s in call.steps} == {""}


def test_a_steps_module_path_is_saved_and_loaded(tmp_path):
    steps = (Step(0, 0, "dot_general", module="NnxMLP/linear1"), Step(1, 0, "add"),
             Step(2, 0, "tanh", scope="encoder", module="CNN/layers[0]"))
    session = Session(calls=[Call(0, "grad", "loss", SourceLocation("m.py", 1, "loss"),
                                  levels=LEVELS[:1], steps=steps)], jax_version="0.0")
    path = tmp_path / "modules.json"
    session.save(path)
    for lazy in (False, True):
        (call,) = transforms.load(path, lazy=lazy).calls
        assert [(s.scope, s.module) for s in call.steps] == [
            ("", "NnxMLP/linear1"), ("", ""), ("encoder", "CNN/layers[0]")]
