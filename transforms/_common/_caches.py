"""The one kind of get-or-make cache the recorder keeps: a dict that forgets everything once
it is full, so a long run's tables stay bounded (texts of avals, params, key paths, literals,
source locations, file kinds, name stacks ...). No JAX.

    _texts = BoundedCache(10_000)
    text = _texts.get(key)
    if text is None:
        text = _texts.put(key, make(key))

A dict subclass: `get` and `in` are the dict's own (the recording path's lookups cost what
a dict's do); only a miss calls `put`. Clearing all at once, rather than evicting one at a
time, is what every table did, and all it needs: a full table is a long run's old entries.
Tables keyed by `id(obj)` store `(obj, value)` and check `hit[0] is obj` (the object kept:
its id is not reused while it is there).
"""
from __future__ import annotations

from typing import Any, TypeVar

__all__ = ["BoundedCache"]

V = TypeVar("V")


class BoundedCache(dict):
    """A dict of at most `limit` entries: a `put` into a full one clears it first."""
    __slots__ = ("limit",)

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def put(self, key: Any, value: V) -> V:
        """Keep value under key (clearing a full table first); return value."""
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value
