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
from transforms.record import Session


@dataclass(frozen=True)
class Example:
    """One seed example: a small function that calls `transforms`, and what it shows."""
    name: str                 # file-name safe, unique: "grad_tanh"
    title: str
    explanation: str          # one paragraph, as the seed explains it
    seed: str                 # the seed document it comes from: "003", "000", "002"
    run: Callable[[], None]
    stages: bool = True       # record(stages=True): keep each call's jaxprs before/after
    inline_jnp: bool = False  # record(inline_jnp=True): steps read sin, mul, not jit[name=sin]
    shows_failure: bool = False  # the example deliberately shows a transformation failing


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
            shows_failure: bool = False) -> Callable[[Callable[[], None]], Callable[[], None]]:
    """Register a gallery example; its docstring is the explanation."""
    def register(run: Callable[[], None]) -> Callable[[], None]:
        name = run.__name__
        assert name not in {e.name for e in EXAMPLES}, f"duplicate gallery example {name}"
        explanation = " ".join((run.__doc__ or "").split())
        EXAMPLES.append(Example(name, title, explanation, seed, run, stages, inline_jnp,
                                shows_failure))
        return run
    return register


def expect_failure(error_type: type[BaseException], fun: Callable, *args: Any) -> BaseException:
    """Call fun(*args), which must raise error_type as the seed shows; print it as JAX words it."""
    try:
        fun(*args)
    except error_type as e:
        first = str(e).splitlines()[0] if str(e) else ""
        line = f"{type(e).__name__}: {first}"
        print(line)
        if _shown is not None:
            _shown.append(line)
        return e
    raise AssertionError(f"expected {error_type.__name__} from {getattr(fun, '__name__', fun)}"
                         f"{args!r}, but it returned normally")


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
        with transforms.record(stages=ex.stages, inline_jnp=ex.inline_jnp) as session:
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
    session.metadata = {"example": ex.name, "seed": ex.seed, "description": ex.explanation}
    return Outcome(ex, session, out.getvalue(), shown, error, tb, time.perf_counter() - start)
