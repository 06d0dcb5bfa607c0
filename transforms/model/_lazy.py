"""A part of a call (its steps, trees or pairs) decoded from a dump when first read: what
`load(path, lazy=True)` gives (no JAX). Re-exported by transforms.model."""
from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence


class Lazy(Sequence[Any]):
    """A call's steps (or trees, pairs), decoded from the dump when first read
    (`load(path, lazy=True)`).

    Behaves as the tuple of records it decodes to; its len is known without decoding. A
    million-step dump opens without decoding every call: only the calls looked at.
    Decoding raises SessionLoadError for a malformed part, naming the file and the call.
    """
    __slots__ = ("_count", "_decode", "_items", "_what")

    def __init__(self, count: int, decode: Callable[[], tuple], what: str = "steps"):
        self._count = count
        self._decode: Callable[[], tuple] | None = decode
        self._items: tuple | None = None
        self._what = what

    @property
    def decoded(self) -> bool:
        return self._items is not None

    def all(self) -> tuple:
        """The records as a tuple (decoded on the first call)."""
        items = self._items
        if items is None:
            assert self._decode is not None
            items = self._items = self._decode()
            self._decode = None  # what it held (the dump's text) may go
        return items

    def peek(self) -> tuple:
        """The records, decoded again if not decoded yet, and not kept: a writer reading a
        recorded call's steps (the journal's, a save) leaves them as compact as they were."""
        items = self._items
        if items is not None:
            return items
        assert self._decode is not None
        return self._decode()

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i: Any) -> Any:
        return self.all()[i]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.all())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Lazy, tuple)):
            return self.all() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.all())

    def __repr__(self) -> str:
        state = "decoded" if self.decoded else "not decoded yet"
        return f"Lazy({self._count} {self._what}, {state})"


def is_decoded(part: Sequence[Any]) -> bool:
    """Whether a call's steps (trees, pairs) are in memory: not a Lazy part left undecoded."""
    return not isinstance(part, Lazy) or part.decoded
