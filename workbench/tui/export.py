"""Export from inside the TUI: the current call as JSON, its graph as an image, the view as SVG.

Everything goes into one export folder (`workbench-exports/` in the working
directory unless `--export-dir` says otherwise), created when first needed, each
file named after the session and the call: `grad-of-tanh-call0-grad-tanh.json`.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from transforms.model import Call, Session

DEFAULT_FOLDER = "workbench-exports"


def slug(text: str, limit: int = 60) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.")[:limit].strip("-.") or "call"


def export_folder(folder: str | os.PathLike | None) -> Path:
    """The folder exports go to: the one given, or workbench-exports/ here."""
    return Path(folder) if folder is not None else Path.cwd() / DEFAULT_FOLDER


def file_stem(session_title: str, call: Call | None, label: str = "") -> str:
    """`<session>-call<N>-<label>`: which recording, and which of its calls."""
    stem = slug(session_title or "session", 40)
    if call is not None:
        stem += f"-call{call.index}-{slug(label or f'{call.transform}-{call.function}', 40)}"
    return stem


def portable_svg(svg: str) -> str:
    """Textual's SVG of a screen, drawn with its spaces by every renderer: librsvg
    (rsvg-convert) drops the non-breaking spaces that start a run of text unless the
    document preserves whitespace."""
    return svg.replace("<svg ", '<svg xml:space="preserve" ', 1)


def save_screen_svg(app: Any, folder: str | os.PathLike, name: str) -> Path:
    """The screen as it is shown, as an SVG file (portable_svg)."""
    path = _ready(folder) / name
    path.write_text(portable_svg(app.export_screenshot()), encoding="utf-8")
    return path


def _ready(folder: str | os.PathLike) -> Path:
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)  # OSError (a file in the way, no permission) says why
    return path


def export_call_json(session: Session, call: Call, folder: str | os.PathLike,
                     stem: str | None = None) -> Path:
    """Write one call as a session file (`workbench open` reads it back)."""
    path = _ready(folder) / f"{stem or file_stem(session.title, call)}.json"
    Session(calls=[call], jax_version=session.jax_version,
            python_version=session.python_version, title=session.title,
            metadata=dict(session.metadata)).save(path)
    return path


def export_call_graph(call: Call, folder: str | os.PathLike, stem: str | None = None) -> Path:
    """Draw the call's graph (workbench.export, imported here: only an export needs it)."""
    from ..export import write_call_graph
    path = _ready(folder) / f"{stem or file_stem('', call)}.svg"
    written = write_call_graph(call, path)
    return Path(written) if written else path
