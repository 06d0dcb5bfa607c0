"""Counted words, one rule for every reader: `1 call`, `2 calls`, `1,024 steps`,
`2 processes`."""
from __future__ import annotations


def plural(n: int, word: str, many: str = "") -> str:
    """`n` and the word for that many: `many` where adding an s is wrong (`processes`)."""
    if n == 1:
        return f"{n:,} {word}"
    return f"{n:,} {many or word + 's'}"
