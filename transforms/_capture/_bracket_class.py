"""Which Bracket (`_common._bracket`) records: the C step core's, when it is built from
these sources and not refused (WORKBENCH_CORE=python), else the Python twin."""
from __future__ import annotations

import os

from .._common import PyBracket
from ._step_core import core_source_sha

__all__ = ["bracket_class"]


def bracket_class() -> type:
    if os.environ.get("WORKBENCH_CORE") == "python":
        return PyBracket
    try:
        from . import _core
    except ImportError:  # step_core_class() warns about the missing core
        return PyBracket
    sha = core_source_sha()
    if sha is not None and sha != _core.SOURCE_SHA:
        return PyBracket
    return _core.Bracket
