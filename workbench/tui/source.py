"""Source lines a dump names, read safely: only Python files under the session's folders."""
from __future__ import annotations

import functools
import os
import stat
import sys

from transforms.model import Session, SourceLocation

__all__ = ["MAX_SOURCE_BYTES", "SOURCE_SUFFIXES", "readable_source", "source_context",
           "source_roots"]


MAX_SOURCE_BYTES = 4_000_000


# A dump names its source files, and a dump is untrusted: lines are read only from
# Python files (never /etc/passwd, whatever a step says) under the folder of the script
# the session ran, the current folder, or a folder on sys.path (where its modules come from).
SOURCE_SUFFIXES = (".py", ".pyw")


def source_roots(session: Session) -> tuple[str, ...]:
    """The folders a session's source lines may be read from."""
    roots = [os.getcwd(), *(p for p in sys.path if p)]
    script = session.metadata.get("script", "") if isinstance(session.metadata, dict) else ""
    if isinstance(script, str) and script.endswith(SOURCE_SUFFIXES):
        roots.insert(0, os.path.dirname(script))
    return tuple(dict.fromkeys(os.path.realpath(r) for r in roots if isinstance(r, str)))


def readable_source(path: str, roots: tuple[str, ...]) -> str | None:
    """The real path of a source file the TUI may show, or None (see SOURCE_SUFFIXES)."""
    if "\x00" in path or not path.endswith(SOURCE_SUFFIXES):
        return None
    real = os.path.realpath(path)
    if not real.endswith(SOURCE_SUFFIXES):
        return None
    if not any(real.startswith(root.rstrip(os.sep) + os.sep) for root in roots):
        return None
    return real


def _file_lines(path: str) -> tuple[str, ...] | None:
    """A source file's lines as the file is now: read again once it changed (a script edited
    under `run --watch`, whose new recording names new line numbers)."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return _read_lines(path, info.st_mtime_ns, info.st_size)


@functools.lru_cache(maxsize=64)
def _read_lines(path: str, mtime_ns: int, size: int) -> tuple[str, ...] | None:
    """A source file's lines, read once per version of it (steps share a few files)."""
    try:
        # NB: O_NONBLOCK, so that a FIFO named as a source does not block the open.
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_SOURCE_BYTES:
                return None
            data = f.read(MAX_SOURCE_BYTES + 1)
        return tuple(data.decode("utf-8", errors="replace").split("\n"))
    except (OSError, ValueError):
        return None


def source_context(src: SourceLocation | None, context: int = 2,
                   roots: tuple[str, ...] = ()) -> tuple[int, list[str]] | None:
    """(first line number, lines) around a source line, read safely; None if it cannot be read.

    Only from a Python file under one of `roots` (readable_source)."""
    if src is None or src.line < 1:
        return None
    path = readable_source(src.file, roots)
    lines = _file_lines(path) if path is not None else None
    if lines is None or src.line > len(lines):
        return None
    first = max(1, src.line - context)
    last = min(len(lines), src.line + context)
    return first, [ln.expandtabs(4) for ln in lines[first - 1:last]]
