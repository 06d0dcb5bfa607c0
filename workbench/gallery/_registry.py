"""The gallery's machinery: an Example, the registry, and running one into its own Session."""
from __future__ import annotations

import contextlib
import io
import os
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import transforms
from transforms.model import Session


@dataclass(frozen=True)
class Example:
    """One seed example: a small function that calls `transforms`, and what it shows."""
    name: str                 # file-name safe, unique: "grad_tanh"
    title: str
    explanation: str          # one paragraph, as the seed explains it
    seed: str                 # the seed document it comes from: "003", "000", "002"; or a
                              # topic beyond them: "sharding", "libraries", "nans"
    run: Callable[[], None]
    stages: bool = True       # record(stages=True): keep each call's jaxprs before/after
    inline_jnp: bool = False  # record(inline_jnp=True): steps read sin, mul, not jit[name=sin]
    shows_failure: bool = False  # the example deliberately shows a transformation failing
    find_nans: bool = False   # record(find_nans=True): where its first NaN or Inf came from
    values: bool = False      # record(values=True): every equation's values


@dataclass
class Outcome:
    """An example after it ran: its session, what it printed, and how it went."""
    example: Example
    session: Session
    output: str = ""
    shown_failures: list[str] = field(default_factory=list)  # "TypeError: ..." lines shown
    error: str | None = None  # an unexpected exception: the example itself is broken
    traceback: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


EXAMPLES: list[Example] = []
_GALLERY_DIR = os.path.dirname(os.path.abspath(__file__))
_shown: list[str] | None = None


def example(title: str, seed: str, *, stages: bool = True, inline_jnp: bool = False,
            shows_failure: bool = False, find_nans: bool = False, values: bool = False
            ) -> Callable[[Callable[[], None]], Callable[[], None]]:
    """Register a gallery example; its docstring is the explanation."""
    def register(run: Callable[[], None]) -> Callable[[], None]:
        name = run.__name__
        assert name not in {e.name for e in EXAMPLES}, f"duplicate gallery example {name}"
        explanation = " ".join((run.__doc__ or "").split())
        EXAMPLES.append(Example(name, title, explanation, seed, run, stages, inline_jnp,
                                shows_failure, find_nans, values))
        return run
    return register


class expect_failure:
    """`with expect_failure(TypeError): T.grad(f)(x)`: the block must raise error_type, as the
    seed shows; it is printed as JAX words it, and kept in `.error`.

    A context manager, not a function taking `fun` to call: the transformed call then
    runs in the example's own frame, so the recording's call site and the error's line
    are the example's, never this harness's.
    """

    def __init__(self, error_type: type[BaseException]):
        self.error_type = error_type
        self.error: BaseException | None = None

    def __enter__(self) -> expect_failure:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: Any) -> bool:
        if kind is None:
            raise AssertionError(f"expected {self.error_type.__name__}, but the block "
                                 f"ran without raising it")
        if error is None or not isinstance(error, self.error_type):
            return False  # not the failure the seed shows: the example is broken
        first = str(error).splitlines()[0] if str(error) else ""
        line = f"{type(error).__name__}: {first}"
        print(line)
        if _shown is not None:
            _shown.append(line)
        self.error = error
        return True


def run_example(ex: Example) -> Outcome:
    """Run one example inside its own record() block; never raises for the example's faults."""
    global _shown
    out = io.StringIO()
    shown: list[str] = []
    error, tb = None, ""
    start = time.perf_counter()
    prev, _shown = _shown, shown
    # The examples are the user's code here, even from an installed workbench.
    setting = transforms.set_user_code()
    transforms.set_user_code((*setting[0], _GALLERY_DIR), setting[1])
    try:
        with transforms.record(stages=ex.stages, inline_jnp=ex.inline_jnp,
                               find_nans=ex.find_nans, values=ex.values) as session:
            with contextlib.redirect_stdout(out):
                try:
                    ex.run()
                # recorded in the Outcome: one broken example must not stop the gallery
                except Exception as e:
                    error = f"{type(e).__name__}: {e}"
                    tb = "".join(traceback.format_exception(e))
    finally:
        _shown = prev
        transforms.set_user_code(*setting)
    session.title = ex.title
    # What it printed belongs to the story: the TUI's Story view shows it.
    session.metadata = {"example": ex.name, "seed": ex.seed, "description": ex.explanation,
                        "output": out.getvalue()}
    return Outcome(ex, session, out.getvalue(), shown, error, tb, time.perf_counter() - start)
