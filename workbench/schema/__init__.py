"""The JSON Schema of a session dump, generated from the record classes, and a small validator.

    session_schema()      # a dict: JSON Schema (draft 2020-12) for Session.save()'s output
    validate(data)        # [] or a list of "path: problem" strings

The schema is built from the field annotations of `transforms/record.py`, so it
follows the data model; `session.schema.json` beside this file is the checked-in
copy (a test keeps it equal to the generated one). Regenerate it with
`python -m workbench schema -o workbench/schema/session.schema.json`.
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import re
from pathlib import Path
from typing import Any

# NB: `transforms.record` the attribute is the record() function; the module by its name.
record = importlib.import_module("transforms.record")

SCHEMA_FILE = Path(__file__).with_name("session.schema.json")
DRAFT = "https://json-schema.org/draft/2020-12/schema"

_SCALARS = {"str": {"type": "string"}, "int": {"type": "integer"},
            "float": {"type": "number"}, "bool": {"type": "boolean"}, "None": {"type": "null"}}


def record_classes() -> dict[str, type]:
    """Every record type of transforms.record that a dump can hold, by name (Session excluded)."""
    found = {}
    for name, obj in vars(record).items():
        if not inspect.isclass(obj) or obj.__module__ != record.__name__ or obj is record.Session:
            continue
        if dataclasses.is_dataclass(obj) or (issubclass(obj, tuple) and hasattr(obj, "_fields")):
            found[name] = obj
    return found


def session_schema() -> dict[str, Any]:
    """The schema for this version's dumps, built from the record classes."""
    classes = record_classes()
    defs = {name: _object_schema(cls, classes) for name, cls in sorted(classes.items())}
    used = _reachable("Call", defs)
    session_fields = {
        "schema": {"const": record.SCHEMA_NAME,
                   "description": "identifies a workbench session dump"},
        "schema_version": {"type": "integer", "minimum": 1, "maximum": record.SCHEMA_VERSION,
                           "description": "the data model's version; readers refuse newer ones"},
        "jax_version": {"type": "string"},
        "python_version": {"type": "string"},
        "calls": {"type": "array", "items": {"$ref": "#/$defs/Call"},
                  "description": "one per outermost transformed invocation"},
    }
    return {
        "$schema": DRAFT,
        "$id": f"https://jax-transform-workbench/schema/session/v{record.SCHEMA_VERSION}.json",
        "title": f"{record.SCHEMA_NAME} (schema version {record.SCHEMA_VERSION})",
        "description": _doc(record.Session) + " Generated from transforms/record.py.",
        "type": "object",
        "properties": session_fields,
        "required": ["schema", "schema_version", "calls"],
        "additionalProperties": False,
        "$defs": {name: defs[name] for name in sorted(used)},
    }


def schema_text() -> str:
    return json.dumps(session_schema(), indent=2, sort_keys=False) + "\n"


def _object_schema(cls: type, classes: dict[str, type]) -> dict[str, Any]:
    comments = _field_comments(cls)
    props: dict[str, Any] = {}
    required = []
    for name, annotation, has_default in _fields(cls):
        prop = _type_schema(annotation, classes)
        if comments.get(name):
            prop = {**prop, "description": comments[name]}
        props[name] = prop
        if not has_default:
            required.append(name)
    out: dict[str, Any] = {"type": "object", "description": _doc(cls), "properties": props}
    if required:
        out["required"] = required
    out["additionalProperties"] = False
    return out


def _fields(cls: type) -> list[tuple[str, str, bool]]:
    if dataclasses.is_dataclass(cls):
        return [(f.name, str(f.type),
                 f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING)
                for f in dataclasses.fields(cls)]
    defaults = getattr(cls, "_field_defaults", {})
    return [(name, _annotation_text(cls.__annotations__[name]), name in defaults)
            for name in cls._fields]


def _annotation_text(annotation: Any) -> str:
    if isinstance(annotation, str):
        return annotation
    return getattr(annotation, "__forward_arg__", None) or getattr(annotation, "__name__",
                                                                   str(annotation))


def _split_top(text: str, sep: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def _type_schema(text: str, classes: dict[str, type]) -> dict[str, Any]:
    """JSON Schema for one annotation, as the dump encodes it (tuples and lists are arrays)."""
    options = _split_top(text, "|")
    if len(options) > 1:
        if set(options) == {"int", "float"}:
            return {"type": "number"}
        if "float" in options and "int" in options:
            options = [o for o in options if o != "int"]
        return {"anyOf": [_type_schema(o, classes) for o in options]}
    text = options[0]
    if text in _SCALARS:
        return dict(_SCALARS[text])
    if text in classes:
        return {"$ref": f"#/$defs/{text}"}
    m = re.fullmatch(r"(tuple|list)\[(.*)\]", text)
    if m:
        args = _split_top(m.group(2), ",")
        if m.group(1) == "list" or (len(args) == 2 and args[1] == "..."):
            return {"type": "array", "items": _type_schema(args[0], classes)}
        return {"type": "array", "prefixItems": [_type_schema(a, classes) for a in args],
                "minItems": len(args), "maxItems": len(args)}
    raise ValueError(f"workbench.schema: cannot express the annotation {text!r} in JSON Schema; "
                     f"teach _type_schema about it")


def _reachable(root: str, defs: dict[str, Any]) -> set[str]:
    seen: set[str] = set()
    todo = [root]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(re.findall(r'"#/\$defs/(\w+)"', json.dumps(defs[name])))
    return seen


def _doc(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    return " ".join(doc.split("\n\n")[0].split())


def _field_comments(cls: type) -> dict[str, str]:
    """Trailing `# ...` comments on the field lines of the class body: the field's meaning."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    comments: dict[str, str] = {}
    last = None
    for line in source.splitlines()[1:]:
        m = re.match(r"\s{4}(\w+)\s*:\s*[^#]*?(?:#\s*(.*))?$", line)
        if m and not line.strip().startswith(("def ", "@", "return")):
            last = m.group(1)
            if m.group(2):
                comments[last] = m.group(2).strip()
            continue
        cont = re.match(r"\s+#\s*(.*)$", line)
        if cont and last in comments:  # a comment continued on the next line
            comments[last] += " " + cont.group(1).strip()
        else:
            last = None
    return comments


# --- a validator for the subset of JSON Schema that session_schema() uses -----

def validate(data: Any, schema: dict[str, Any] | None = None, limit: int = 20) -> list[str]:
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
            if name in props:
                _check(item, props[name], root, f"{path}.{name}", out, limit)
            elif s.get("additionalProperties") is False:
                out.append(f"{path}: unexpected field {name!r}")
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


__all__ = ["SCHEMA_FILE", "record_classes", "schema_text", "session_schema", "validate"]
