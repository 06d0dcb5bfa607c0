"""The JSON Schema of a session dump, generated from the record classes, and a small validator.

    session_schema()      # a dict: JSON Schema (draft 2020-12) for Session.save()'s output
    schema_problems(data) # [] or a list of "path: problem" strings

The schema is built from the field annotations of the records (`_records.py`,
`_tree_records.py`, `_device_records.py`, `_session.py`) and
the layout rules of the codec (`_codec.py`) (rows, shared tables), so it follows
the data model and the encoder; `session.schema.json` beside this file is the checked-in
copy (a test keeps it equal to the generated one). Regenerate it with
`python -m workbench schema -o transforms/model/session.schema.json`.
"""
from __future__ import annotations

import dataclasses
import inspect
import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any, Iterable

from . import (
    _annotations,
    _codec,
    _compile_records,
    _device_records,
    _layout,
    _records,
    _session,
    _source_location,
    _step_shapes,
    _tree_records,
)

SCHEMA_FILE = Path(__file__).with_name("session.schema.json")
DRAFT = "https://json-schema.org/draft/2020-12/schema"

_SCALARS = {"str": {"type": "string"}, "int": {"type": "integer"},
            "float": {"type": "number"}, "bool": {"type": "boolean"}, "None": {"type": "null"}}


# The modules defining the record classes, in the order their classes are listed.
RECORD_MODULES = (_source_location, _records, _tree_records, _device_records, _compile_records,
                  _session)


def record_classes() -> dict[str, type]:
    """Every record type of transforms.model that a dump can hold, by name (Session excluded)."""
    return {name: obj for module in RECORD_MODULES for name, obj in vars(module).items()
            if _defines_record(module, obj)}


def _defines_record(module: ModuleType, obj: Any) -> bool:
    """A dataclass or NamedTuple defined in `module` (not imported into it), Session aside."""
    if not inspect.isclass(obj) or obj.__module__ != module.__name__ or obj is _session.Session:
        return False
    return dataclasses.is_dataclass(obj) or (issubclass(obj, tuple) and hasattr(obj, "_fields"))


def session_schema(header: dict[str, list[str]] | None = None,
                   version: int | None = None,
                   tables: Iterable[str] | None = None) -> dict[str, Any]:
    """The schema for this version's dumps, built from the record classes and the codec's rules.

    `header`: a dump's own `fields` (its rows' field order), for a dump written by an
    older workbench whose records had fewer fields: the loader reads those too (missing
    fields take their defaults), so `schema --validate` checks them against the schema
    of their own layout. `version`: a dump's schema_version (2 to this workbench's; 2 and 3
    write steps as rows, 4 as step shapes). `tables`: the names of a dump's tables, for one
    written before a table of _codec.SHARED_LATER existed (its values inline, as the loader
    reads them). Default: this workbench's layout (the checked-in schema)."""
    version = _layout.SCHEMA_VERSION if version is None else version
    if not 2 <= version <= _layout.SCHEMA_VERSION:
        raise ValueError(f"transforms.model._schema: no schema for version {version} (2 to "
                         f"{_layout.SCHEMA_VERSION})")
    layouts = _layout.layouts(version)
    inline = _layout.inline_tables(version)
    if tables is not None:
        inline |= _codec.SHARED_LATER - set(tables)
    builder = _SchemaBuilder(record_classes(), header,
                             {layout.annotation for layout in layouts}, inline)
    session_fields = {
        "schema": {"const": _layout.SCHEMA_NAME,
                   "description": "identifies a workbench session dump"},
        "schema_version": {"type": "integer", "minimum": version, "maximum": version,
                           "description": "the layout's version; readers refuse newer ones "
                                          "(transforms.load also reads versions 1 to 3)"},
    }
    comments = _field_comments(_session.Session)
    for f in dataclasses.fields(_session.Session):
        if f.name in ("schema_version", "calls"):
            continue
        session_fields[f.name] = _described(builder.type_schema(str(f.type), None),
                                            comments.get(f.name, ""))
    session_fields["fields"] = {
        "type": "object", "additionalProperties": False,
        "description": "per record class, its field names in the order of its rows",
        "properties": {name: {"const": builder.field_order(name)}
                       for name in sorted(builder.classes) if builder.field_order(name)
                       or header is None}}
    tables = {name: {"type": "array", "items": builder.type_schema(name, name)}
              for name in _codec.SHARED if name not in inline}
    for layout in layouts:  # version 4's step shapes
        tables[layout.table] = builder.layout_table(layout.table)
    session_fields["tables"] = {
        "type": "object", "additionalProperties": False,
        "description": "values stored once and referenced by index: tables[annotation][i]",
        "properties": tables}
    session_fields["calls"] = _described(builder.type_schema("list[Call]", None),
                                          "one Call row per outermost transformed invocation")
    # NB: not enforced: a reader that finds the index does not hold reads the text whole
    # (transforms.model._load), so any lazy_at leaves a dump readable; its shape is described.
    session_fields["lazy_at"] = {
        "description": "where each call's big parts are in the text, so a reader can decode "
                       "them when it needs them; written last. An object {\"fields\": "
                       f"{list(_layout.LAZY_FIELDS)}, \"spans\": per call, per field, [start, "
                       "end, count]: the array's character offsets and its length}. Advisory: "
                       "a reader that finds it does not hold reads the text whole."}
    if version < 3:
        del session_fields["lazy_at"]
    return {
        "$schema": DRAFT,
        "$id": f"https://jax-transform-workbench/schema/session/v{version}.json",
        "title": f"{_layout.SCHEMA_NAME} (schema version {version})",
        "description": _doc(_session.Session) + " " + _LAYOUT
                       + (" " + _STEP_SHAPES if layouts else "") + " Generated from "
                       "transforms/model/ (_records.py, _codec.py, _step_shapes.py).",
        "type": "object",
        "properties": session_fields,
        "required": ["schema", "schema_version", "fields", "tables", "calls"],
        "additionalProperties": False,
        "$defs": dict(sorted(builder.defs.items())),
    }


_LAYOUT = ("Layout: a record is a row, an array of its field values in the order "
           "`fields[class]` lists; tuples are arrays; the annotations listed under `tables` "
           "are stored once per file and written as an index into their table (inside a "
           "table's entries, only tables listed before it are referenced; the rest is inline).")


_STEP_SHAPES = ("A call's steps (version 4) are an array with one item per step: a number "
                "into tables['Step'], whose entries are step shapes (a Step row without its "
                "`index`, its `cause` written as the offset `index - cause`), the step's "
                "index being the previous step's plus one (the first's 0); or, for a step "
                "whose index is not that, [index, shape number].")


def schema_text() -> str:
    return json.dumps(session_schema(), indent=2, sort_keys=False) + "\n"


class _SchemaBuilder:
    """Walks the annotations as the codec encodes them, one $defs row schema per record."""

    def __init__(self, classes: dict[str, type], header: dict[str, list[str]] | None = None,
                 layouts: set[str] | frozenset[str] = frozenset(),
                 inline: frozenset[str] = frozenset()):
        self.classes = classes
        self.header = header
        self.layouts = layouts  # annotations not written as rows (version 4's steps)
        self.inline = inline    # shared annotations an older version writes inline
        self.defs: dict[str, Any] = {}

    def field_order(self, name: str) -> list[str]:
        """The order of a class's fields in its rows: the dump's header, else the class's."""
        if self.header is None:
            return [f.name for f in _annotations.record_fields(self.classes[name])]
        return list(self.header.get(name, []))

    def type_schema(self, text: str, within: str | None) -> dict[str, Any]:
        return self._schema(_annotations.parse(text), within)

    def layout_table(self, table: str) -> dict[str, Any]:
        """The schema of a layout's own table: version 4's step shapes."""
        assert table == _step_shapes.TABLE, table
        order = [n for n in self.field_order("Step") if n != "index"]
        key = "Step shape"
        self.defs[key] = self._row_schema("Step", order, None, {
            "cause": "the step whose processing bound this one, as the offset back from the "
                     "step's index (index - cause); null for none"}, implied=("index",))
        self.defs[key]["description"] = (
            "A step shape: the fields of a Step row but `index`, in the order of "
            "fields['Step'] without it; a call's steps are numbers into tables['Step'].")
        return {"type": "array", "items": {"$ref": f"#/$defs/{key}"},
                "description": "step shapes, shared by the steps of every call"}

    def _steps_schema(self) -> dict[str, Any]:
        return {"type": "array", "description": _STEP_SHAPES, "items": {"anyOf": [
            {"type": "integer", "minimum": 0,
             "description": "a step shape's number; the index follows the previous step's"},
            {"type": "array", "prefixItems": [
                {"title": "index", "type": "integer", "minimum": 0},
                {"title": "shape", "type": "integer", "minimum": 0}],
             "minItems": 2, "maxItems": 2, "description": "[index, shape number]"}]}}

    def _schema(self, expr: Any, within: str | None) -> dict[str, Any]:
        if within is None and str(expr) in self.layouts:
            assert str(expr) == _step_shapes.ANNOTATION, expr
            return self._steps_schema()
        if _codec.is_reference(expr, within) and str(expr) not in self.inline:
            return {"type": "integer", "minimum": 0,
                    "description": f"an index into tables[{str(expr)!r}]"}
        if expr.name == "|":
            if {a.name for a in expr.args} == {"int", "float"}:
                return {"type": "number"}
            return {"anyOf": [self._schema(a, within) for a in expr.args]}
        if expr.name in _SCALARS:
            return dict(_SCALARS[expr.name])
        if expr.name in self.classes:
            return {"$ref": f"#/$defs/{self._row_def(expr.name, within)}"}
        if expr.is_variadic:
            return {"type": "array", "items": self._schema(expr.args[0], within)}
        if expr.name == "tuple":
            return {"type": "array", "prefixItems": [self._schema(a, within) for a in expr.args],
                    "minItems": len(expr.args), "maxItems": len(expr.args)}
        if expr.name == "dict":
            return {"type": "object", "additionalProperties": self._schema(expr.args[1], within)}
        raise ValueError(f"transforms.model._schema: cannot express the annotation {expr} in JSON "
                         f"Schema; teach _SchemaBuilder about it")

    def _row_def(self, name: str, within: str | None) -> str:
        # A record inside a table's entries may write some shared values inline.
        key = name if within is None else f"{name} in tables[{within}]"
        if key not in self.defs:
            self.defs[key] = {}  # placeholder: records nest in themselves
            self.defs[key] = self._row_schema(name, self.field_order(name), within)
        return key


    def _row_schema(self, name: str, order: list[str], within: str | None,
                    meanings: dict[str, str] | None = None,
                    implied: tuple[str, ...] = ()) -> dict[str, Any]:
        """A row of the class: its fields in `order`, described by their comments (or
        `meanings`); `implied`: fields the row leaves out that are not missing (a step
        shape's index)."""
        cls = self.classes[name]
        comments = {**_field_comments(cls), **(meanings or {})}
        by_name = {f.name: f for f in _annotations.record_fields(cls)}
        items = []
        for field_name in order:
            item = self._schema(_annotations.parse(by_name[field_name].annotation), within)
            items.append({"title": field_name,
                          **_described(item, comments.get(field_name, ""))})
        # A field the rows lack must have a default (the loader refuses the file
        # otherwise): no row of such a class can be valid.
        required_missing = any(not f.has_default and f.name not in (*order, *implied)
                               for f in by_name.values())
        return {
            "type": "array", "description": f"{_doc(cls)} A row: the fields in the order "
                                            f"of fields[{name!r}].",
            "prefixItems": items, "minItems": len(items) + required_missing,
            "maxItems": len(items)}


def _described(schema: dict[str, Any], description: str) -> dict[str, Any]:
    if not description:
        return schema
    if "description" in schema:  # keep both: what the field means and how it is written
        return {**schema, "description": f"{description} ({schema['description']})"}
    return {**schema, "description": description}


def _doc(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    return " ".join(doc.split("\n\n")[0].split())


def _field_comments(cls: type) -> dict[str, str]:
    """The `# ...` comments of the field lines of the class body: the field's meaning. A
    comment trails its field (and goes on, indented deeper, on the lines below it), or
    stands on the lines above it, at the field's indentation."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    comments: dict[str, str] = {}
    last = None
    above: list[str | None] = []  # comment lines at the fields' indentation: the next
    # field's ([None] while in an "NB:" note)
    for line in source.splitlines()[1:]:
        m = re.match(r"\s{4}(\w+)\s*:\s*[^#]*?(?:#\s*(.*))?$", line)
        if m and not line.strip().startswith(("def ", "@", "return")):
            last = m.group(1)
            text = re.sub(r"^type:\s*ignore(\[[^\]]*\])?\s*", "", m.group(2) or "").strip()
            # a type checker's pragma is not the field's meaning
            text = " ".join([a for a in above if a is not None] + ([text] if text else []))
            above = []
            if text:
                comments[last] = text
            continue
        leading = re.match(r"\s{4}#\s*(.*)$", line)
        if leading:  # an "NB:" note (to the reader of the code, to its end) is not a meaning
            text = leading.group(1).strip()
            note = text.startswith("NB:") or (above[:1] == [None])
            above = [None] if note else above + [text]
            last = None
            continue
        cont = re.match(r"\s+#\s*(.*)$", line)
        if cont and last in comments:  # a trailing comment continued on the next line
            comments[last] += " " + cont.group(1).strip()
        else:
            last, above = None, []
    return comments


# --- a validator for the subset of JSON Schema that session_schema() uses -----

def schema_problems(data: Any, schema: dict[str, Any] | None = None, limit: int = 20) -> list[str]:
    """Problems found in data against schema (default: the session schema), at most limit."""
    schema = schema if schema is not None else session_schema()
    problems: list[str] = []
    _check(data, schema, schema, "$", problems, limit)
    return problems


_JSON_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def _check(v: Any, s: dict[str, Any], root: dict[str, Any], path: str, out: list[str],
           limit: int) -> None:
    if len(out) >= limit:
        return
    if "$ref" in s:
        ref = s["$ref"]
        assert ref.startswith("#/$defs/"), f"only local $refs are supported, not {ref}"
        _check(v, root["$defs"][ref[len("#/$defs/"):]], root, path, out, limit)
        return
    if "anyOf" in s:
        for option in s["anyOf"]:
            trial: list[str] = []
            _check(v, option, root, path, trial, 1)
            if not trial:
                return
        out.append(f"{path}: {_short(v)} matches none of {_describe_any(s['anyOf'])}")
        return
    if "const" in s and v != s["const"]:
        out.append(f"{path}: expected {s['const']!r}, got {_short(v)}")
        return
    t = s.get("type")
    if t is not None and not _JSON_TYPES[t](v):
        out.append(f"{path}: expected {t}, got {_short(v)}")
        return
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if "minimum" in s and v < s["minimum"]:
            out.append(f"{path}: {v} is below the minimum {s['minimum']}")
        if "maximum" in s and v > s["maximum"]:
            out.append(f"{path}: {v} is above the maximum {s['maximum']}")
    if isinstance(v, dict):
        props = s.get("properties", {})
        for name in s.get("required", ()):
            if name not in v:
                out.append(f"{path}: missing required field {name!r}")
        for name, item in v.items():
            extra = s.get("additionalProperties")
            if name in props:
                _check(item, props[name], root, f"{path}.{name}", out, limit)
            elif extra is False:
                out.append(f"{path}: unexpected field {name!r}")
            elif isinstance(extra, dict):
                _check(item, extra, root, f"{path}.{name}", out, limit)
    if isinstance(v, list):
        prefix = s.get("prefixItems", [])
        if "minItems" in s and len(v) < s["minItems"]:
            out.append(f"{path}: expected at least {s['minItems']} items, got {len(v)}")
        if "maxItems" in s and len(v) > s["maxItems"]:
            out.append(f"{path}: expected at most {s['maxItems']} items, got {len(v)}")
        for i, item in enumerate(v):
            sub = prefix[i] if i < len(prefix) else s.get("items")
            if sub is not None:
                _check(item, sub, root, f"{path}[{i}]", out, limit)


def _describe_any(options: list[dict[str, Any]]) -> str:
    names = [o.get("type") or o.get("$ref", "?").rsplit("/", 1)[-1] for o in options]
    return " | ".join(str(n) for n in names)


def _short(v: Any) -> str:
    text = json.dumps(v) if not isinstance(v, (dict, list)) else type(v).__name__
    return text if len(text) <= 40 else text[:37] + "..."


__all__ = ["SCHEMA_FILE", "record_classes", "schema_text", "schema_problems", "session_schema"]
