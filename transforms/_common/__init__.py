"""Small helpers every layer uses, JAX-free: bounded get-or-make tables (BoundedCache),
values held per live object (ByObject), safe text of any object (safe_repr, message...), and
the Bracket: a call with hooks around it and no frame of ours while it runs."""
from __future__ import annotations

from ._bracket import (
    PyBracket as PyBracket,
    bracket as bracket,
    raised_as_is as raised_as_is,
    returned_as_is as returned_as_is,
    use_bracket_class as use_bracket_class,
)
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
