"""The dump's layout (schema version 2): every record type round-trips, version 1 still reads."""
from __future__ import annotations

import dataclasses
import json
import os

import pytest
from repo_paths import DATA

import transforms
from transforms.model import (
    RECORD_TYPES,
    Call,
    Session,
    SourceLocation,
    ValueRecord,
    _annotations,
    _check,
    _codec,
    _schema as schema,
)
from workbench.cli import main

# --- values with every field set, built from the annotations -------------------------

def _sample(expr: _annotations.TypeExpr, depth: int, salt: int):
    """A value of the annotation; tuples get two items until records nest 3 deep."""
    optional = expr.optional_part
    if optional is not None:  # None once records nest 3 deep (a record nested in itself)
        return _sample(optional, depth, salt) if depth < 3 else None
    if expr.name == "|":  # int | float
        return 2.5 + salt
    simple = {"str": f"s{salt}", "int": 7 + salt, "float": 0.5 + salt, "bool": True}
    if expr.name in simple:
        return simple[expr.name]
    if expr.name in RECORD_TYPES:
        return _filled(RECORD_TYPES[expr.name], depth + 1, salt)
    if expr.is_variadic:
        items = [_sample(expr.args[0], depth, salt * 10 + k) for k in (1, 2)] if depth < 3 else []
        return items if expr.name == "list" else tuple(items)
    if expr.name == "tuple":
        return tuple(_sample(a, depth, salt + k) for k, a in enumerate(expr.args))
    if expr.name == "dict":
        return {f"k{salt}": f"v{salt}"}
    raise AssertionError(f"no sample for {expr}")


def _filled(cls: type, depth: int = 0, salt: int = 1):
    """An instance of cls whose every field differs from its default."""
    values = {}
    for f in _annotations.record_fields(cls):
        value = _sample(_annotations.parse(f.annotation), depth, salt)
        if f.has_default and value == f.default() and isinstance(value, bool):
            value = not value
        if depth == 0 and f.has_default:
            assert value != f.default(), (cls.__name__, f.name)
        values[f.name] = value
    return cls(**values)


def _assert_same(a, b, where="value"):
    """Equal and of the same types all the way down (a NamedTuple equals a plain tuple)."""
    assert type(a) is type(b), (where, type(a), type(b))
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b), where
        names = getattr(type(a), "_fields", None) or range(len(a))
        for name, x, y in zip(names, a, b):
            _assert_same(x, y, f"{where}.{name}")
    elif dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            _assert_same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _assert_same(a[k], b[k], f"{where}[{k}]")
    else:
        assert a == b, where


def _through_json(cls_name: str, values: list, registry=RECORD_TYPES) -> list:
    writer = _codec.Writer(registry)
    column = writer.encode(cls_name, values)
    doc = json.loads(json.dumps({"fields": writer.fields_json(), "tables": writer.tables,
                                 "column": column}))
    reader = _codec.Reader(registry, doc["fields"], doc["tables"])
    return reader.decode(cls_name, doc["column"], cls_name)


@pytest.mark.parametrize("name", sorted(RECORD_TYPES))
def test_every_record_type_round_trips_with_every_field_set(name):
    record = _filled(RECORD_TYPES[name])
    _assert_same(_through_json(name, [record, record]), [record, record])


def test_a_session_of_filled_records_saves_and_loads_the_same(tmp_path, monkeypatch):
    session = Session(calls=[_filled(Call), _filled(Call, salt=3)], jax_version="0.0.1",
                      python_version="3.0", title="a title", metadata={"script": "x.py"})
    path = tmp_path / "filled.json"
    session.save(path)
    # Filled with arbitrary values, its references point nowhere: the load-time checks
    # (transforms/model/_check.py) refuse it; the codec alone reads it back exactly.
    with pytest.raises(transforms.SessionLoadError, match="is not a level listed before it"):
        transforms.load(path)
    monkeypatch.setattr(_check, "CHECKS", [])
    loaded = transforms.load(path)
    _assert_same(loaded, session)
    assert schema.schema_problems(json.loads(path.read_text())) == []


def test_repeated_values_are_stored_once_and_shared_after_loading(tmp_path):
    where = SourceLocation("model.py", 3, "loss")
    value = ValueRecord("batched", "BatchTracer", "float32[]", level=1, batch_dim=0,
                        children=(("val", ValueRecord("array", "ArrayImpl", "float32[3]")),))
    steps = tuple(transforms.Step(i, 0, "sin", inputs=(value,), outputs=(value,),
                                  source=SourceLocation("model.py", 3, "loss"))
                  for i in range(50))
    level = transforms.Level(0, "vmap", "vmap#1", 1, None, "BatchTrace")
    session = Session(calls=[Call(0, "vmap", "loss", where, levels=(level,), steps=steps)])
    data = session.to_json_dict()
    assert data["tables"]["SourceLocation"] == [("model.py", 3, "loss", None)]
    assert len(data["tables"]["ValueRecord"]) == 1
    assert data["tables"]["tuple[ValueRecord, ...]"] == [[0], []]  # the steps', the call's
    path = tmp_path / "s.json"
    session.save(path)
    loaded = transforms.load(path).calls[0]
    assert loaded.steps == steps
    assert len({id(s.source) for s in loaded.steps} | {id(loaded.source)}) == 1
    assert len({id(s.inputs) for s in loaded.steps}) == 1


@dataclasses.dataclass(frozen=True, slots=True)
class NewRecord:
    """Stands for a record type added later (as ShardingRecord is): no codec change needed."""
    mesh: str
    values: tuple[ValueRecord, ...] = ()
    where: SourceLocation | None = None
    added_later: int = 0


def test_a_new_record_type_and_a_field_added_with_a_default_need_no_codec_change():
    registry = {**RECORD_TYPES, "NewRecord": NewRecord}
    record = NewRecord("mesh", (ValueRecord("array", "ArrayImpl", "f32[]"),),
                       SourceLocation("a.py", 1, "f"), 5)
    assert _through_json("NewRecord", [record], registry) == [record]
    # A dump written before `added_later` existed: its rows lack it; the default fills in.
    writer = _codec.Writer(registry)
    column = json.loads(json.dumps([row[:3] for row in writer.encode("NewRecord", [record])]))
    fields = {**writer.fields_json(), "NewRecord": ["mesh", "values", "where"]}
    reader = _codec.Reader(registry, fields, json.loads(json.dumps(writer.tables)))
    assert reader.decode("NewRecord", column, "x") == [dataclasses.replace(record, added_later=0)]


def test_fields_may_come_in_any_order_the_header_names():
    record = dataclasses.replace(_filled(SourceLocation), via=None)  # a dump from before `via`
    writer = _codec.Writer(RECORD_TYPES)
    writer.encode("SourceLocation", [record])
    (row,) = writer.tables["SourceLocation"]
    fields = {**writer.fields_json(), "SourceLocation": ["function", "file", "line"]}
    reader = _codec.Reader(RECORD_TYPES, fields, {"SourceLocation": [[row[2], row[0], row[1]]]})
    assert reader.tables["SourceLocation"] == [record]


# --- version 1 -------------------------------------------------------------------------

def test_a_version_1_dump_written_by_the_old_code_still_loads():
    """session_v1.json was written by the version-1 Session.save (tests/data/make_session_v1.py);
    session_v1.as_v2.json is the same recording saved by this version."""
    old = transforms.load(DATA / "session_v1.json")
    new = transforms.load(DATA / "session_v1.as_v2.json")
    assert (old.schema_version, new.schema_version) == (1, 2)
    assert old.calls == new.calls and old.jax_version == new.jax_version
    _assert_same(old.calls, new.calls)
    assert [c.transform for c in old.calls] == ["vmap", "vmap"] and not old.calls[1].ok
    assert old.calls[0].stages and old.calls[0].stages[0].eqns


def test_a_loaded_version_1_dump_saves_as_version_2(tmp_path):
    old = transforms.load(DATA / "session_v1.json")
    path = tmp_path / "upgraded.json"
    old.save(path)
    assert json.loads(path.read_text())["schema_version"] == transforms.SCHEMA_VERSION == 4
    assert transforms.load(path).calls == old.calls


def test_a_malformed_version_1_dump_is_still_refused(tmp_path):
    data = json.loads((DATA / "session_v1.json").read_text())
    data["calls"][0]["steps"][0]["inputs"] = [5]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(transforms.SessionLoadError, match="malformed session data"):
        transforms.load(path)


# --- title and metadata ---------------------------------------------------------------

def test_title_and_metadata_round_trip_and_show_prints_the_title(tmp_path, capsys):
    session = transforms.load(DATA / "session_v1.as_v2.json")
    session.title = "train.py --epochs 3"
    session.metadata = {"script": "/tmp/train.py", "argv": "--epochs 3"}
    path = tmp_path / "t.json"
    session.save(path)
    loaded = transforms.load(path)
    assert (loaded.title, loaded.metadata) == (session.title, session.metadata)
    assert main(["show", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "title: train.py --epochs 3"


def test_the_dump_is_smaller_than_version_1():
    assert (os.path.getsize(DATA / "session_v1.as_v2.json")
            < 0.6 * os.path.getsize(DATA / "session_v1.json"))


def _node_by_node(nodes: tuple) -> bool:
    """The tree check's rules, one node at a time, as written before it read columns."""
    count = len(nodes)
    for position, node in enumerate(nodes):
        if node.index != position:
            return False
        if position == 0:
            if node.parent is not None:
                return False
        elif node.parent is None or not 0 <= node.parent < position \
                or position not in nodes[node.parent].children:
            return False
        if not 0 <= node.depth <= min(position, _check.MAX_TREE_DEPTH):
            return False
        if any(not position < c < count or nodes[c].parent != position for c in node.children):
            return False
    return True


def test_the_tree_check_reading_columns_agrees_with_the_node_by_node_rules():
    import random

    from transforms.model import TreeNode
    rng = random.Random(7)
    verdicts = set()
    for _ in range(3000):
        count = rng.randint(1, 7)
        parents = [None] + [rng.randrange(i) for i in range(1, count)]
        children = [[i for i in range(count) if parents[i] == p] for p in range(count)]
        depth = [0] * count
        for i in range(1, count):
            depth[i] = depth[parents[i]] + 1
        fields = {"index": list(range(count)), "parent": parents, "depth": depth,
                  "children": children}
        for _ in range(rng.randint(0, 2)):  # break a field of a node, or not
            name, i = rng.choice(sorted(fields)), rng.randrange(count)
            if name == "children":
                fields[name][i] = fields[name][i] + [rng.randint(-1, count)]
            elif name == "parent":
                fields[name][i] = rng.choice([None, -1, rng.randint(0, count)])
            else:
                fields[name][i] = rng.randint(-1, count)
        nodes = tuple(TreeNode(fields["index"][i], fields["parent"][i], fields["depth"][i],
                               "", "", "leaf", "int", children=tuple(fields["children"][i]))
                      for i in range(count))
        expected = _node_by_node(nodes)
        verdicts.add(expected)
        tree = dataclasses.make_dataclass("T", ["nodes"])(nodes)
        if expected:
            _check._tree(tree, "t")
        else:
            with pytest.raises(_codec.DumpFormatError):
                _check._tree(tree, "t")
    assert verdicts == {True, False}
