"""The user's source line: where on the stack (or in a traceback) the user's code is.

A frame is JAX's or ours (skipped), an installed library's (skipped, the innermost kept as
the location's `via`), or the user's (the location); `set_user_code` says which files are
which. The C step core walks frames with the same tables (CODE_KINDS, LOCATIONS).
"""
from __future__ import annotations

import dis
import os
import site
import sys
import sysconfig
from types import FrameType
from typing import Any, Sequence

from .._common import BoundedCache
from .._jax import JAX_DIR, PACKAGE_DIR, context_traceback, traceback_frames
from ..model import SourceLocation

__all__ = ["CODE_KINDS", "LOCATIONS", "code_kind_numbers", "is_internal_file", "library_closure_of",
           "location_of",
           "location_via",
           "returned_location", "set_user_code", "staged_location", "traceback_location",
           "user_location"]

_INTERNAL, _LIBRARY, _USER = 1, 2, 0
_EXCLUDED_PREFIXES = (JAX_DIR, PACKAGE_DIR, "<frozen ", sys.base_prefix + "/lib/python3")
_EXCLUDED_NAMES = ("contextlib.py", "functools.py")


def _installed_prefixes() -> tuple[str, ...]:
    """Where installed libraries live: site-packages and the interpreters' prefixes."""
    found = set(site.getsitepackages()) | {site.getusersitepackages()}
    found |= {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    found |= {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}
    return tuple(sorted(os.path.join(os.path.abspath(p), "") for p in found if p))


_INSTALLED = _installed_prefixes()
_library_prefixes: tuple[str, ...] = _INSTALLED
_user_prefixes: tuple[str, ...] = ()
_setting: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
# Keyed by id(code), with the code kept to rule out a reused id: hashing a
# code object rehashes its bytecode (about 3 us), once per frame walked.
_code_kinds: BoundedCache = BoundedCache(100_000)  # id(code) -> (code, kind)
_locations: dict[tuple, tuple[Any, Any, SourceLocation]] = {}
# The same tables for the C step core, which walks frames known here without calling in.
CODE_KINDS, LOCATIONS = _code_kinds, _locations


def code_kind_numbers() -> dict[str, int]:
    """The numbers CODE_KINDS gives each kind of code."""
    return {"user": _USER, "internal": _INTERNAL, "library": _LIBRARY}


def set_user_code(user: Sequence[str] = (), library: Sequence[str] = ()) -> tuple:
    """Say what counts as user code in recorded locations; returns the previous setting.

    By default a file under site-packages or the interpreter's prefix is an
    installed library's, anything else (the script's folder, a checkout) the
    user's. Files under a `user` path are the user's even when installed (a
    package being worked on); files under a `library` path are a library's
    (a vendored framework). `set_user_code(*previous)` restores a setting.
    """
    global _user_prefixes, _library_prefixes, _setting
    previous = _setting
    _setting = (tuple(user), tuple(library))
    _user_prefixes = tuple(os.path.join(os.path.abspath(p), "") for p in user)
    _library_prefixes = tuple(os.path.join(os.path.abspath(p), "") for p in library) + _INSTALLED
    _code_kinds.clear()
    _file_kinds.clear()
    _staged.clear()
    return previous


def _kind_of_file(filename: str) -> int:
    if filename.startswith(_EXCLUDED_PREFIXES) or filename.endswith(_EXCLUDED_NAMES) \
            or "/jaxlib/" in filename or "/site-packages/jax/" in filename:
        return _INTERNAL
    if _user_prefixes and filename.startswith(_user_prefixes):
        return _USER
    if filename.startswith(_library_prefixes):
        return _LIBRARY
    return _USER


def is_internal_file(filename: str) -> bool:
    """A file of JAX's, ours or Python's own (whatever set_user_code says)."""
    return _kind_of_file(filename) == _INTERNAL


def library_closure_of(fun: Any) -> Any:
    """The user's function a library's closure stands for, else None: equinox's
    filter_value_and_grad differentiates a closure of its wrapper's `__call__`, whose `self`
    wraps the user's function (`__wrapped__`, as functools.wraps and equinox's
    module_update_wrapper set it)."""
    code = getattr(fun, "__code__", None)
    closure = getattr(fun, "__closure__", None)
    if code is None or not closure or "self" not in code.co_freevars or \
            _kind_of_file(code.co_filename) != _LIBRARY:
        return None
    try:
        owner = closure[code.co_freevars.index("self")].cell_contents
        # NB: a library's property: what it raises means only that it wraps nothing
        wrapped = getattr(owner, "__wrapped__", None)
    except Exception:
        return None
    return wrapped if callable(wrapped) and wrapped is not fun else None


def _kind(code) -> int:
    kind = _kind_of_file(code.co_filename)
    _code_kinds.put(id(code), (code, kind))
    return kind


def _internal(code) -> bool:
    """JAX's, ours or an installed library's: not a line the user wrote."""
    hit = _code_kinds.get(id(code))
    return (hit[1] if hit is not None and hit[0] is code else _kind(code)) != _USER


def user_location(skip: int = 1) -> SourceLocation | None:
    """The innermost frame of user code on the current stack, with the innermost
    library frame on the way there as its `via` (a library-only stack: that frame)."""
    frame: FrameType | None = sys._getframe(skip)
    known = _code_kinds
    via: FrameType | None = None
    while frame is not None:
        code = frame.f_code
        hit = known.get(id(code))
        kind = hit[1] if hit is not None and hit[0] is code else _kind(code)
        if kind == _USER:
            break
        if kind == _LIBRARY and via is None:
            via = frame
        frame = frame.f_back
    if via is None:
        return location_of(frame.f_code, frame.f_lineno) if frame is not None else None
    # Reached through a library: it may be evaluating a jaxpr staged earlier (equinox's
    # closure conversion, diffrax's solver loop), whose equations JAX binds under the
    # traceback of where the user wrote them.
    tb = context_traceback()
    if tb is not None:
        staged = staged_location(tb)
        if staged is not None:
            return staged
    if frame is None:
        return location_of(via.f_code, via.f_lineno)
    return location_via(frame.f_code, frame.f_lineno, via.f_code, via.f_lineno)


_file_kinds: BoundedCache = BoundedCache(10_000)
_staged: BoundedCache = BoundedCache(10_000)  # id(traceback) -> (traceback, location)


def _file_kind(filename: str) -> int:
    kind = _file_kinds.get(filename)
    if kind is None:
        kind = _file_kinds.put(filename, _kind_of_file(filename))
    return kind


def staged_location(tb: Any) -> SourceLocation | None:
    """The user's line in a JAX traceback (once per traceback object), via its library line."""
    hit = _staged.get(id(tb))
    if hit is not None and hit[0] is tb:
        return hit[1]
    found = via = None
    for file, line, function in traceback_frames(tb):
        kind = _file_kind(file)
        if kind == _USER:
            found = SourceLocation(file, line, function, via)
            break
        if kind == _LIBRARY and via is None:
            via = SourceLocation(file, line, function)
    _staged.put(id(tb), (tb, found))  # the traceback kept: its id is not reused
    return found


def _function(code) -> str:
    """A method with its class (`MLP.__call__`: a model's modules read by type), any other
    function by its name (`loss`, not `test_step.<locals>.loss`)."""
    parts = getattr(code, "co_qualname", code.co_name).split(".")
    if len(parts) >= 2 and parts[-2] != "<locals>":
        return f"{parts[-2]}.{parts[-1]}"
    return code.co_name


def location_of(code, line: int) -> SourceLocation:
    key = (id(code), line)
    hit = _locations.get(key)
    if hit is None or hit[0] is not code:
        hit = _locations[key] = (code, None, SourceLocation(code.co_filename, line, _function(code)))
    return hit[2]


def location_via(code, line: int, via_code, via_line: int) -> SourceLocation:
    """A user line reached through a library's line: both interned, as `location_of`."""
    key = (id(code), line, id(via_code), via_line)
    hit = _locations.get(key)
    if hit is None or hit[0] is not code or hit[1] is not via_code:
        loc = SourceLocation(code.co_filename, line, _function(code), location_of(via_code, via_line))
        hit = _locations[key] = (code, via_code, loc)
    return hit[2]


def traceback_location(tb) -> SourceLocation | None:
    """The innermost user frame of an exception's traceback, via the innermost library
    frame below it; a traceback of library frames only: the innermost of those."""
    found = via = None
    while tb is not None:
        code = tb.tb_frame.f_code
        hit = _code_kinds.get(id(code))
        kind = hit[1] if hit is not None and hit[0] is code else _kind(code)
        if kind == _USER:
            found, via = (code, tb.tb_lineno), None
        elif kind == _LIBRARY:
            via = (code, tb.tb_lineno)
        tb = tb.tb_next
    if found is None:
        return location_of(*via) if via is not None else None
    return location_via(*found, *via) if via is not None else location_of(*found)


_RETURNS = frozenset({"RETURN_VALUE", "RETURN_CONST"})


def returned_location(function: Any, tb: Any) -> SourceLocation | None:
    """Where the user's `function` returned, when an error raised after it returned is about
    what it returned (a custom_jvp rule's primal and tangent trees): the line of its return
    statement (its `def` line where it returns on several lines). None when `function` is not
    the user's or is on the traceback (it raised itself: the traceback has the line)."""
    code = getattr(function, "__code__", None)
    if code is None or _kind(code) != _USER:
        return None
    while tb is not None:
        if tb.tb_frame.f_code is code:
            return None
        tb = tb.tb_next
    lines = {i.positions.lineno if i.positions else None
             for i in dis.get_instructions(code) if i.opname in _RETURNS}
    line = lines.pop() if len(lines) == 1 else None
    return location_of(code, line if line is not None else code.co_firstlineno)
