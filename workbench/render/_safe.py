"""One guard for every renderer: a failure becomes a placeholder, never a crash."""
from __future__ import annotations

from typing import Callable

from rich.console import RenderableType
from rich.text import Text

from .. import _safe_text as safe_text


def safe(render: Callable[[], RenderableType], what: str) -> RenderableType:
    """Build a renderable, or a placeholder saying why it could not be built."""
    try:
        return render()
    except Exception as e:  # a renderer never takes the UI down with it
        return Text(f"<render-error {what}: {type(e).__name__}: {safe_text.first_line(e)}>", style="red")

