"""The TUI's words for what it shows, as plain data (no Textual): call labels (the composition
read off the levels, `vmap(grad(f))`, equal labels told apart by their line), step texts
(titles, what search looks in), and sessions (galleries, summaries, descriptions); all of it
made safe for a terminal through workbench/_safe_text.py. Re-exported by tui/model.py."""
from __future__ import annotations

import os
from typing import Any, Iterable

from transforms.model import Call, Session, Stage, Step

from .. import _safe_text as safe_text
from .._words import plural as plural
from ..analysis import (
    TRANSFORMATIONS as TRANSFORMATIONS,
    call_label,
    composition as composition,
    step_label as analysis_step_label,
)

# --- call labels --------------------------------------------------------------------

def composed_label(call: Call) -> str:
    """`vmap(grad(example_loss))`, `grad(grad(cubic))`, `jit(vmap(convolve))`: the one
    rule every reader uses (workbench/analysis/_call_label.py)."""
    return call_label(call)


def call_labels(session: Session) -> list[str]:
    """Each call's composed label; calls whose labels are equal are told apart by the
    line that made them (`at _grad_and_vmap.py:302`), else by their index (`call 59`, as `show`
    and `graph --call` number them: with calls dropped by max_steps it is no position)."""
    labels = [sanitize(composed_label(c)) for c in session.calls]
    groups: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        groups.setdefault(label, []).append(i)
    out = list(labels)
    for label, members in groups.items():
        if len(members) < 2:
            continue
        wheres = [_call_line(session.calls[i]) for i in members]
        distinct = len(set(wheres)) == len(wheres) and all(wheres)
        for i, where in zip(members, wheres):
            out[i] = f"{label} at {where}" if distinct else \
                f"{label} (call {session.calls[i].index})"
    return out


def _call_line(call: Call) -> str:
    src = call.source
    if src is None:
        return ""
    return f"{os.path.basename(str(src.file))}:{src.line}"


# --- step texts ---------------------------------------------------------------------

def step_title(step: Step) -> str:
    try:
        return step.title
    except (AttributeError, TypeError, ValueError):  # odd params (not pairs of text): the primitive
        return str(step.primitive)


def step_label(step: Step) -> str:
    """How the navigator lists a step: a jit of JAX's own function as its operation at the
    user's line (`take at model.py:41`), any other as step_title."""
    try:
        return analysis_step_label(step)
    except (AttributeError, TypeError, ValueError):  # odd params (not pairs of text)
        return step_title(step)


def step_haystack(step: Step, label: str = "") -> str:
    """What text search and filters look in, lower-cased."""
    parts = [step_title(step), step_label(step), step.kind, step.phase, label, step.name_stack or ""]
    for pair in step.params or ():
        parts.extend(str(x) for x in pair)
    if step.source is not None:
        parts.append(f"{step.source.file}:{step.source.line} {step.source.function}")
    if step.error:
        parts.append(step.error)
    return " ".join(map(str, parts)).lower()


# --- sessions -----------------------------------------------------------------------

Gallery = list[tuple[str, Session]]
# A gallery still being recorded: a session is None until it is there.
Entries = list[tuple[str, "Session | None"]]


def as_gallery(sessions: object, title: str | None = None) -> Gallery:
    """One Session, a list of Sessions, or a list of (title, Session) pairs -> pairs."""
    if isinstance(sessions, Session):
        return [(title or "session", sessions)]
    out: Gallery = []
    items: Iterable[Any] = sessions  # type: ignore[assignment]  # a list, as documented
    for i, item in enumerate(items):
        if isinstance(item, Session):
            out.append((f"session {i}", item))
        elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], Session):
            out.append((str(item[0]), item[1]))
        else:
            raise TypeError(f"expected a Session or (title, Session) pairs, got {type(item).__name__}")
    if not out:
        raise ValueError("no session to show: the gallery is empty")
    return out


def session_description(session: Session) -> str:
    """What the recording is about, as its recorder wrote it (a gallery example's story)."""
    return sanitize(session.metadata.get("description", "")) if session.metadata else ""


def session_ending(session: Session) -> str:
    """How a run that did not save its own recording ended (read back from its journal:
    `the process died by SIGSEGV, during call 7 ...`), and what the reader dropped; "" for a
    recording saved normally."""
    ended = session.metadata.get("ended", "") if session.metadata else ""
    if not ended:
        return ""
    text = f"{ended[:1].upper()}{ended[1:]}."
    notes = session.metadata.get("journal_notes", "")
    if notes:
        text += f" Read from its journal, which had a bad end: {notes}."
    return sanitize(text)


def session_output(session: Session) -> str | None:
    """What the recorded program printed, when that was kept (None: not kept)."""
    return session.metadata.get("output") if session.metadata else None


def session_summary(session: Session) -> str:
    failed = sum(1 for c in session.calls if c.errors)
    text = f"{plural(len(session.calls), 'call')}, {plural(session.step_count, 'step')}"
    return text + (f", {failed} failed" if failed else "") + dropped_summary(session)


def dropped_summary(session: Session) -> str:
    """", 19,000 calls dropped (max_steps)": what a bounded recording let go; "" if nothing."""
    if not session.dropped_calls:
        return ""
    return f", {session.dropped_calls:,} calls dropped (max_steps={session.max_steps or 0:,})"


def sanitize(text: object, limit: int = 4000) -> str:
    """One line of display text, safe on a terminal (workbench/_safe_text.py): control,
    bidi and zero-width characters and lone surrogates shown as escapes, long text cut."""
    return safe_text.terminal(text, limit)


def first_line(text: object) -> str:
    """The first line of a text, made safe (workbench/_safe_text.py)."""
    return safe_text.first_line(text, 4000)


# --- stages -------------------------------------------------------------------------

def side_by_side(before: Stage, after: Stage) -> str:
    """The stages view's head for a pair with a compiled text in it (a jaxpr against the
    StableHLO it lowers to): shown side by side, nothing to align; "" for two jaxprs or an
    unavailable stage (whose reason the diff gives)."""
    texts = [s for s in (before, after) if s.jaxpr is None]
    if not texts or not all(s.available and s.text for s in texts):
        return ""
    what = f"{texts[0].name} is" if len(texts) == 1 else "both are"
    return (f"side by side: {before.name} and {after.name} (no equations to align: "
            f"{what} compiled text)")
