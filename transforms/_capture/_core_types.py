"""Which of the C core's callables record: each the C core's type, when the core is built
from these sources and not refused (WORKBENCH_CORE=python), else its Python twin (which
behaves the same, with a frame or a property of its own)."""
from __future__ import annotations

import os

from .._common import PyBracket
from ._step_core import core_source_sha

__all__ = ["bracket_class", "core_type"]


def core_type(name: str, twin: type) -> type:
    """The C core's type `name`, or `twin` where that cannot or must not be used."""
    if os.environ.get("WORKBENCH_CORE") == "python":
        return twin
    try:
        from . import _core
    except ImportError:  # step_core_class() warns about the missing core
        return twin
    sha = core_source_sha()
    if sha is not None and sha != _core.SOURCE_SHA:
        return twin
    return getattr(_core, name)


def bracket_class() -> type:
    """Which Bracket (`_common._bracket`) records."""
    return core_type("Bracket", PyBracket)
