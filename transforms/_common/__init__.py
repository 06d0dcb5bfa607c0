"""Small helpers every layer uses, JAX-free: bounded get-or-make tables (BoundedCache),
values held per live object (ByObject), and safe text of any object (safe_repr, message...)."""
from __future__ import annotations

from ._by_object import ByObject as ByObject
from ._caches import BoundedCache as BoundedCache
from ._text import (
    MAX_TEXT as MAX_TEXT,
    cut as cut,
    first_line as first_line,
    message as message,
    safe_repr as safe_repr,
    safe_str as safe_str,
)
