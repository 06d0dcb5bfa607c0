"""Where a record points in the user's code: SourceLocation, the lowest of the records (the
call records, the tree records and the loader all refer to it)."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SourceLocation"]


@dataclass(frozen=True, slots=True)
class SourceLocation:
    """A line of the user's code: where a step was bound or a call was made.

    `via` is the innermost line of an installed library (equinox, flax, diffrax...)
    between that user line and JAX, when there is one: `eqx.filter_jit`'s own call.
    """
    file: str
    line: int
    function: str
    via: SourceLocation | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line} ({self.function})"
