"""A call with hooks before and after it and no frame of ours on the stack while it runs.

Inside record() the user's function runs under JAX's transformation as it would without
us: a frame between JAX and the user's function is seen by every tool that walks the stack
(pdb's `up`, profilers, JAX's own traceback-depth tests). So each recorded call, level and
custom rule is a Bracket: `open(args, kwargs)` runs first and returns None (call `fun` as
is) or `(target, args, kwargs, returned, raised)`: `target(*args, **kwargs)` runs with no
frame of the Bracket's around it, then `returned(out)` gives the caller's result, or
`raised(error)` sees the error, which is then raised on (with the traceback the hook left).

The C Bracket (`_capture/_core_bracket.c`, registered by `_capture` with
`use_bracket_class`) has no frame at all; PyBracket, its twin where the C core is not built
(or WORKBENCH_CORE=python), has one (its __call__).
"""
from __future__ import annotations

from typing import Any, Callable

__all__ = ["PyBracket", "bracket", "raised_as_is", "returned_as_is", "use_bracket_class"]

Open = Callable[[tuple, "dict | None"], Any]


class PyBracket:
    """The C Bracket's behaviour in Python (one frame, __call__, while the target runs)."""

    __slots__ = ("_open", "fun", "__dict__", "__weakref__")

    def __init__(self, open: Open, fun: Callable):
        self._open = open
        self.fun = fun

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        run = self._open(args, kwargs or None)
        if run is None:
            return self.fun(*args, **kwargs)
        target, call_args, call_kwargs, returned, raised = run
        try:
            out = target(*call_args, **(call_kwargs or {}))
        except BaseException as e:
            raised(e)
            raise
        return returned(out)

    def __repr__(self) -> str:
        return f"<Bracket of {self.fun!r}>"


def _python_bracket() -> type:
    return PyBracket


_choose: Callable[[], type] = _python_bracket  # until _capture registers the C one
_class: type | None = None


def use_bracket_class(choose: Callable[[], type]) -> None:
    """`choose()` gives the Bracket class, asked once, on the first bracket made."""
    global _choose, _class
    _choose, _class = choose, None


def bracket(open: Open, fun: Callable | None = None) -> Any:
    """A Bracket of `fun` (C where built: see the module's docstring); without `fun`, `open`
    never returns None: it always names the target."""
    global _class
    if _class is None:
        _class = _choose()
    return _class(open, fun if fun is not None else _named_by_open)


def returned_as_is(out: Any) -> Any:
    """A run's `returned` that gives the target's result unchanged."""
    return out


def raised_as_is(error: BaseException) -> None:
    """A run's `raised` that lets the target's error go on unchanged."""


def _named_by_open(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("a Bracket whose open names its target was called without one")
