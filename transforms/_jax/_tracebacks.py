"""Tracebacks and errors: JAX's traceback filtering, done as JAX would do it without our frames
(api_boundary), and what JAX's errors leave behind in their frames (the two sides of a
pytree mismatch, an ended tracer) and its public error names. Part of the door.
"""
from __future__ import annotations

import functools
import os
import types
from typing import Any, Callable, NamedTuple

import jax

# NB: jax._src: traceback filtering has no public registration; without it our
# wrapper frames would show in the tracebacks JAX filters for users.
from jax._src import traceback_util as _traceback_util

from ._base import PACKAGE_DIR, Tracer
from ._trace import trace_has_ended
from ._tracers import trace_of


def _is_ours(frame: types.FrameType) -> bool:
    return frame.f_code.co_filename.startswith(PACKAGE_DIR + os.sep)


def _walk(tb: types.TracebackType | None):
    while tb is not None:
        yield tb
        tb = tb.tb_next


def _hidden_as_jax_would(tb: types.TracebackType | None) -> list[bool]:
    """Per traceback entry: would JAX hide it, had our frames not been there? Ours: always.

    NB: jax._src. JAX filters, at its outermost api_boundary (its reraise
    frame), the frames below it that `include_frame` rejects; frames above it
    (jacfwd's `jacfun`, say) stay.
    """
    hidden, below_boundary = [], False
    for t in _walk(tb):
        frame = t.tb_frame
        below_boundary = below_boundary or _traceback_util._is_reraiser_frame(frame)
        hidden.append(_is_ours(frame) or (below_boundary
                                          and not _traceback_util.include_frame(frame)))
    return hidden


def _filter_as_jax_would(e: BaseException, mode: str) -> None:
    tb = e.__traceback__
    hidden = _hidden_as_jax_would(tb)
    entries = list(_walk(tb))
    if mode == "tracebackhide":
        for t, hide in zip(entries, hidden):
            if hide:
                t.tb_frame.f_locals["__tracebackhide__"] = True
        return
    out = None
    for t, hide in zip(reversed(entries), reversed(hidden)):
        if not hide:
            out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    e.with_traceback(out)
    jax_filtered = any(_traceback_util._is_reraiser_frame(t.tb_frame) for t in entries)
    note = "--------------------\n" + _traceback_util._simplified_tb_msg
    if jax_filtered and note not in getattr(e, "__notes__", ()):
        e.add_note(note)  # as JAX's boundary adds it


class FilteredRun:
    """JAX's traceback filtering around one call, done as JAX would do it without our frames:
    opened before the call, ended by `returned` or `raised` (a Bracket's halves; api_boundary
    is the same as a decorator).

    Not JAX's own api_boundary: that filters every JAX frame under it,
    including frames JAX leaves in for users (jacfwd's `jacfun`). Here JAX's
    own boundaries are switched off while the call runs (so the recorder sees
    whole tracebacks, as the pytree mismatch rules need), and at the end
    exactly the frames JAX would have removed are removed, and ours (or, where
    JAX marks frames `__tracebackhide__` for IPython, marked). With
    JAX_TRACEBACK_FILTERING=off nothing is removed; in `remove_frames` mode
    JAX filters as usual and only our frames are removed.
    """
    __slots__ = ("mode", "off")

    def __init__(self) -> None:
        self.mode = _traceback_util._filtering_mode()
        self.off = None
        if self.mode in ("quiet_remove_frames", "tracebackhide"):
            # NB: jax._src: JAX's filtering mode, and its thread-local switch.
            self.off = _traceback_util.config.traceback_filtering("off")
            self.off.__enter__()

    def returned(self, out: Any) -> Any:
        if self.off is not None:
            self.off.__exit__(None, None, None)
        return out

    def raised(self, e: BaseException) -> None:
        if self.off is not None:
            self.off.__exit__(None, None, None)
            if isinstance(e, Exception):
                _filter_as_jax_would(e, self.mode)
        elif self.mode != "off" and isinstance(e, Exception):
            e.with_traceback(_without_our_frames(e.__traceback__))


def api_boundary(fun: Callable) -> Callable:
    """`fun`'s tracebacks filtered as JAX would filter them without us (see FilteredRun)."""

    @functools.wraps(fun)
    def boundary(*args, **kwargs):
        filtered = FilteredRun()
        try:
            out = fun(*args, **kwargs)
        except BaseException as e:
            filtered.raised(e)
            raise
        return filtered.returned(out)
    return boundary


def _without_our_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    out = None
    for t in reversed(list(_walk(tb))):
        if not _is_ours(t.tb_frame):
            out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out



class _MismatchSite(NamedTuple):
    function: str                      # the JAX function that compared the two trees
    left: str                          # its locals holding each side
    right: str
    names: tuple[str, str] | None = None  # its locals naming each side, if any


# NB: jax._src: JAX raises its pytree-structure mismatches with PyTreeDef strings or prose;
# the trees themselves are still locals of the frame that compared them, named here per
# mismatch kind (the kinds of transforms/_trees/_diagnose.py's MISMATCH_RULES).
_MISMATCH_SITES = {
    "custom_jvp": _MismatchSite("_flatten_jvp", "py_primals_out", "py_tangents_out"),
    "custom_vjp": _MismatchSite("_flatten_bwd", "in_tree", "py_cts_in"),
    "cond": _MismatchSite("_check_branch_outputs", "out_avals1", "out_avals2",
                          ("name1", "name2")),
    "scan": _MismatchSite("_check_carry_type", "in_carry", "out_carry"),
    "vmap_in_axes": _MismatchSite("flatten_axes", "axis_tree", "treedef"),
    "vmap_out_axes": _MismatchSite("flatten_axes", "axis_tree", "treedef"),
}
MISMATCH_KINDS = tuple(_MISMATCH_SITES)


class MismatchSides(NamedTuple):
    left: Any
    right: Any
    left_name: str | None = None       # how JAX names each side there ("true_fun"), if it does
    right_name: str | None = None


def _frames(error: BaseException):
    tb = error.__traceback__
    while tb is not None:
        yield tb.tb_frame
        tb = tb.tb_next


def mismatch_sides(error: BaseException, kind: str) -> MismatchSides | None:
    """The two live trees a structure-mismatch error of `kind` compared, from the traceback's
    frame of the JAX function that compared them; None when no frame holds them."""
    site = _MISMATCH_SITES[kind]
    for frame in _frames(error):
        if frame.f_code.co_name != site.function:
            continue
        f_locals = frame.f_locals
        if site.left not in f_locals or site.right not in f_locals:
            continue
        names: list[str | None] = [None, None]
        if site.names is not None:
            names = [str(f_locals[n]) if n in f_locals else None for n in site.names]
        return MismatchSides(f_locals[site.left], f_locals[site.right], *names)
    return None


def ended_tracer_in_traceback(error: BaseException) -> Any:
    """The tracer JAX refused (UnexpectedTracerError): a local of the frames that raised,
    whose trace has ended; None if none is found.

    NB: JAX checks a tracer's trace where it is used, a few frames from the raise.
    """
    frames = list(_frames(error))
    for frame in reversed(frames[-4:]):
        for value in list(frame.f_locals.values()):
            if isinstance(value, Tracer) and trace_has_ended(trace_of(value)):
                return value
    return None


def public_error_name(cls: type) -> str | None:
    """`jax.errors.Name` for an error class JAX defines privately and exports there, else None.

    NB: JAX defines its errors in jax._src modules; `jax.errors` is where users find them.
    """
    if not cls.__module__.startswith("jax._src"):
        return None
    return f"jax.errors.{cls.__name__}" if getattr(jax.errors, cls.__name__, None) is cls else None
