"""Version-1 dumps (read only): records as objects, tuples as arrays, decoded by the text of
the record classes' field annotations. Kept so that dumps written before schema version 2
still open; transforms.model._load hands it the record classes (this module imports none)."""
from __future__ import annotations

import dataclasses
from typing import Any

from . import _check

__all__ = ["session_v1"]


def session_v1(data: dict[str, Any], session: type, types: dict[str, type]) -> Any:
    """A `session` (the record class) from a version-1 dump's data; `types`: the record
    classes by name (as transforms.model names them), Call among them. Checked as any
    load is (transforms/model/_check.py); raises TypeError, KeyError, ValueError when bad."""
    calls = [_decode(types["Call"], c, types) for c in _as_list(data["calls"])]
    found = session(calls=calls, jax_version=_decode_typed("str", data.get("jax_version", ""), types),
                    python_version=_decode_typed("str", data.get("python_version", ""), types),
                    schema_version=1)
    _check.check_session(found)
    return found


def _decode(cls: type, data: Any, types: dict[str, type]) -> Any:
    if not isinstance(data, dict):
        raise TypeError(f"expected an object for {cls.__name__}, got {type(data).__name__}")
    kwargs = {}
    for name, type_text in _field_types(cls):
        if name in data:
            kwargs[name] = _decode_typed(type_text, data[name], types)
    return cls(**kwargs)


def _field_types(cls: type) -> list[tuple[str, str]]:
    if dataclasses.is_dataclass(cls):
        return [(f.name, str(f.type)) for f in dataclasses.fields(cls)]
    # NamedTuple keeps string annotations as typing.ForwardRef.
    return [(name, _annotation_text(cls.__annotations__[name]))
            for name in cls._fields]  # type: ignore[attr-defined]  # a NamedTuple's


def _annotation_text(annotation: Any) -> str:
    return annotation if isinstance(annotation, str) else annotation.__forward_arg__


def _decode_typed(type_text: str, value: Any, types: dict[str, type]) -> Any:
    """Decode by the field's annotation text (annotations are strings here)."""
    if value is None:
        if "None" in type_text:
            return None
        raise TypeError(f"null where {type_text} is required")
    text = type_text.replace(" | None", "")
    if text in types:
        return _decode(types[text], value, types)
    if text.startswith("tuple[tuple[str, ValueRecord]"):
        return tuple((str(k), _decode(types["ValueRecord"], v, types)) for k, v in value)
    if text.startswith("tuple[tuple[str, str]"):
        return tuple((str(k), str(v)) for k, v in value)
    if text.startswith("tuple[") or text.startswith("list["):
        inner = text[text.index("[") + 1:text.rindex("]")].split(",")[0].strip()
        items = [_decode_typed(inner, v, types) for v in _as_list(value)]
        return items if text.startswith("list[") else tuple(items)
    if text == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"expected an integer, got {value!r}")
        return value
    if text == "str":
        if not isinstance(value, str):
            raise TypeError(f"expected a string, got {type(value).__name__}")
        return value
    return value


def _as_list(value: Any) -> list:
    if not isinstance(value, list):
        raise TypeError(f"expected an array, got {type(value).__name__}")
    return value
