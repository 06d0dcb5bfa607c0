"""Writing files safely, for every writer of the project (dumps, images, indexes): a regular
file replaced atomically, a FIFO or device streamed into, and new files given the mode open()
would give them."""
from __future__ import annotations

import errno
import os
import stat
import tempfile

__all__ = ["new_file_mode", "special_file_kind", "write_atomically"]


def new_file_mode() -> int:
    """The mode open() would give a new file (0o666 less the umask): mkstemp's temp files
    are 0o600, and a dump or image should not end up private to its writer."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_atomically(path: str | os.PathLike, text: str | bytes) -> None:
    """Write `text` to what `path` names: a regular file atomically, a FIFO or device by streaming.

    A symlink is followed (its target is written, the link stays); a regular file (or
    a new one) is replaced by a temp file beside it, so it appears complete or not at
    all; a FIFO, a terminal or another device is written into, never replaced (as
    root, replacing /dev/null would break the machine); a folder raises
    IsADirectoryError. An OSError (disk full, read-only) leaves no temp file behind.
    Text is written as UTF-8 (bytes as they are).
    """
    # NB: encoded at once and written unbuffered: a text stream encodes a 100 MB dump in
    # small chunks, a fifth of a big save.
    data = text.encode("utf-8") if isinstance(text, str) else text
    path = os.path.realpath(os.fspath(path))
    kind = special_file_kind(path)
    if kind == "directory":
        raise IsADirectoryError(errno.EISDIR, "is a directory", path)
    if kind:
        with open(path, "wb") as f:
            f.write(data)
        return
    folder = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=folder)
    try:
        os.fchmod(fd, new_file_mode())
        with os.fdopen(fd, "wb", buffering=0) as f:
            view = memoryview(data)
            while view:  # NB: a raw write may write less than asked
                view = view[f.write(view):]
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def special_file_kind(path: str | os.PathLike) -> str:
    """"" for a regular file or nothing at all; else "directory", "fifo", "device", "socket"."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return ""
    if stat.S_ISREG(mode):
        return ""
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "device"


