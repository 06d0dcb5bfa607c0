"""A cache keyed by the identity of live objects, which holds them weakly.

The recorder remembers what it worked out for a jaxpr object (JAX reuses the
jaxprs of jnp functions across calls). Holding the jaxpr to keep its id from
being reused would keep its constants alive, the user's arrays among them,
until the block ends, where JAX frees them as soon as the program drops them.
An entry here goes when its object dies; its id cannot be reused before that.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable, Generic, Hashable, TypeVar

from ._caches import BoundedCache

__all__ = ["ByObject"]

V = TypeVar("V")


class ByObject(Generic[V]):
    """`get(obj, extra)` / `put(obj, extra, value)`: values per (live object, extra key)."""

    def __init__(self, limit: int) -> None:
        # (id(obj), extra) -> (weakref to obj, value); the most entries, then it starts again.
        # Public: the C step core looks jit summaries up here (_step_core).
        self.entries: BoundedCache = BoundedCache(limit)

    def _dropper(self, key: tuple) -> Callable[[weakref.ref], None]:
        # NB: the callback holds the cache weakly: the objects do not keep it alive.
        cache = weakref.ref(self)

        def dropped(_ref: weakref.ref) -> None:
            alive = cache()
            if alive is not None:
                alive.entries.pop(key, None)
        return dropped

    def get(self, obj: Any, extra: Hashable = None) -> V | None:
        hit = self.entries.get((id(obj), extra))
        if hit is None or hit[0]() is not obj:
            return None
        return hit[1]

    def put(self, obj: Any, extra: Hashable, value: V) -> None:
        """Keep value while obj lives; objects that cannot be weakly referenced are not kept."""
        key = (id(obj), extra)
        try:
            ref = weakref.ref(obj, self._dropper(key))
        except TypeError:
            return
        self.entries.put(key, (ref, value))

    def __len__(self) -> int:
        return len(self.entries)
