"""Export from inside the TUI: the current call as JSON, its graph as an image, the view as SVG."""
from __future__ import annotations

import importlib
import os
import re
from pathlib import Path

from transforms.record import Call, Session


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:60] or "call"


def export_call_json(session: Session, call: Call, folder: str | os.PathLike) -> Path:
    """Write one call as a session file (`workbench open` reads it back)."""
    path = Path(folder) / f"workbench-call{call.index}-{slug(call.transform)}.json"
    Session(calls=[call], jax_version=session.jax_version,
            python_version=session.python_version).save(path)
    return path


class Unavailable(RuntimeError):
    """An export this install cannot make; the message says why."""


def export_call_graph(call: Call, folder: str | os.PathLike) -> Path:
    """Draw the call's graph with workbench.export, when that module is installed."""
    try:
        module = importlib.import_module("workbench.export")
    except ImportError:
        raise Unavailable("graph export is unavailable: workbench.export is not in this "
                          "install") from None
    writer = getattr(module, "write_call_graph", None)
    if writer is None:
        raise Unavailable("graph export is unavailable: workbench.export has no "
                          "write_call_graph(call, path)")
    path = Path(folder) / f"workbench-call{call.index}-{slug(call.transform)}.svg"
    written = writer(call, path)
    return Path(written) if written else path
