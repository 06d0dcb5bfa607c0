"""Text of objects that are not ours (user values, JAX's objects, exceptions), made safely:
a `repr` or `str` that raises, or returns something else than a str, becomes a placeholder
naming the type, and long texts are cut. One helper per need, used by every module of
transforms (the workbench's per-destination escaping is workbench/_safe_text.py). No JAX."""
from __future__ import annotations

from typing import Any

__all__ = ["MAX_TEXT", "cut", "first_line", "message", "safe_repr", "safe_str"]

MAX_TEXT = 120  # a value's text in a record: a static aux value, a Python scalar


def cut(text: str, limit: int = MAX_TEXT) -> str:
    """`text`, or its first `limit - 1` characters and an ellipsis."""
    return text if len(text) <= limit else text[:limit - 1] + "…"


def safe_repr(x: Any, limit: int | None = MAX_TEXT) -> str:
    """repr(x), or `<repr-error Type>` when it raises (or is not a str); cut to `limit`."""
    return _safe(repr, x, limit)


def safe_str(x: Any, limit: int | None = MAX_TEXT) -> str:
    """str(x), or `<repr-error Type>` when it raises (or is not a str); cut to `limit`."""
    return _safe(str, x, limit)


def _safe(show: Any, x: Any, limit: int | None) -> str:
    try:
        text = show(x)
    except Exception as e:  # a user object whose repr raises
        return f"<repr-error {type(e).__name__}>"
    if not isinstance(text, str):
        return f"<repr-error {type(text).__name__}>"
    return text if limit is None else cut(text, limit)


def message(error: BaseException) -> str:
    """str(error), or `<message unavailable: Type>` when that raises."""
    try:
        text = str(error)
    except Exception as e:  # a message that cannot be printed still names its type
        return f"<message unavailable: {type(e).__name__}>"
    return text if isinstance(text, str) else f"<message unavailable: {type(text).__name__}>"


def first_line(error: BaseException, limit: int | None = None) -> str:
    """The first line of an error's message ("" for none), cut to `limit`."""
    text = message(error)
    line = text.splitlines()[0] if text else ""
    return line if limit is None else cut(line, limit)
