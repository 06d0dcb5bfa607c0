"""The record classes' field annotations as data: annotation text parsed into small trees
(`TypeExpr`), each record's fields in declaration order with their defaults (`FieldSpec`),
and the scalar types a field accepts. What the codec (`_codec.py`) and the schema
(`_schema.py`) walk; it knows nothing of rows or tables."""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, NamedTuple

SCALARS: dict[str, type] = {"str": str, "int": int, "float": float, "bool": bool,
                            "None": type(None)}


class TypeExpr(NamedTuple):
    """A parsed annotation: `name[args]`; unions are named "|", `...` is its own name."""
    name: str
    args: tuple[TypeExpr, ...] = ()

    def __str__(self) -> str:
        if self.name == "|":
            return " | ".join(map(str, self.args))
        if not self.args:
            return self.name
        return f"{self.name}[{', '.join(map(str, self.args))}]"

    @property
    def optional_part(self) -> TypeExpr | None:
        """X for `X | None`; None for anything else."""
        if self.name == "|" and TypeExpr("None") in self.args:
            rest = tuple(a for a in self.args if a.name != "None")
            return rest[0] if len(rest) == 1 else TypeExpr("|", rest)
        return None

    @property
    def is_variadic(self) -> bool:
        """tuple[X, ...] or list[X]."""
        return self.name == "list" or (self.name == "tuple" and len(self.args) == 2
                                       and self.args[1].name == "...")


@functools.lru_cache(maxsize=512)
def parse(text: str) -> TypeExpr:
    """(Cached: a lazy load decodes each call's parts on their own, parsing the same few
    annotations again and again.)"""
    return _parse(text)


def _parse(text: str) -> TypeExpr:
    """`tuple[tuple[str, ValueRecord], ...] | None` -> a TypeExpr tree."""
    options = _split_top(text, "|")
    if len(options) > 1:
        return TypeExpr("|", tuple(_parse(o) for o in options))
    text = options[0]
    if "[" not in text:
        return TypeExpr(text)
    head, inner = text[:text.index("[")], text[text.index("[") + 1:text.rindex("]")]
    return TypeExpr(head.strip(), tuple(_parse(a) for a in _split_top(inner, ",")))


def _split_top(text: str, sep: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "[") - (ch == "]")
        if ch == sep and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def annotation_text(annotation: Any) -> str:
    """Annotations are strings here (`from __future__ import annotations`); NamedTuple
    keeps them as typing.ForwardRef."""
    return annotation if isinstance(annotation, str) else annotation.__forward_arg__


class FieldSpec(NamedTuple):
    name: str
    annotation: str
    has_default: bool
    default: Callable[[], Any] | None  # makes the default value


def record_fields(cls: type) -> list[FieldSpec]:
    """The fields of a record dataclass or NamedTuple, in declaration order."""
    if dataclasses.is_dataclass(cls):
        specs = []
        for f in dataclasses.fields(cls):
            if f.default is not dataclasses.MISSING:
                make = (lambda v: lambda: v)(f.default)
            elif f.default_factory is not dataclasses.MISSING:
                make = f.default_factory
            else:
                make = None
            specs.append(FieldSpec(f.name, annotation_text(f.type), make is not None, make))
        return specs
    defaults = cls._field_defaults  # type: ignore[attr-defined]  # a NamedTuple's
    return [FieldSpec(name, annotation_text(cls.__annotations__[name]), name in defaults,
                      (lambda v: lambda: v)(defaults[name]) if name in defaults else None)
            for name in cls._fields]  # type: ignore[attr-defined]


def is_namedtuple(cls: type) -> bool:
    return issubclass(cls, tuple) and hasattr(cls, "_fields")


def scalar_types(expr: TypeExpr) -> set[type] | None:
    """The Python types a scalar annotation accepts (`int | None`), or None if not scalar.

    NB: a float field accepts JSON integers too (json writes 2.0 as 2.0, but
    other writers may not)."""
    names = [a.name for a in expr.args] if expr.name == "|" else [expr.name]
    if not all(n in SCALARS for n in names):
        return None
    types = {SCALARS[n] for n in names}
    return types | {int} if float in types else types
