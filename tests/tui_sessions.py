"""What the TUI tests share: sessions (seed examples, corpus cases, random odd ones), running an
async test body, the app with animations off, and what a widget or the status line shows."""
from __future__ import annotations

import asyncio
import functools
import io
import math
import random
import time
from typing import Callable

import jax.numpy as jnp
import pytest
from corpus import CASES_BY_NAME, INPUTS, TARGETS, WS, XS, B, W, absolute_if, convolve, example_loss
from rich.console import Console

import transforms as T
from transforms.model import (
    Call,
    EqnRecord,
    ErrorRecord,
    JaxprRecord,
    Level,
    Metric,
    PrimitiveCount,
    Session,
    SourceLocation,
    Stage,
    Step,
    ValueRecord,
)
from workbench.tui import build_app as _build_app
from workbench.tui.widgets.common.status_bar import StatusBar


def sync(test):
    """Run an async test body with asyncio (no async pytest plugin is needed)."""
    @functools.wraps(test)
    def run(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))
    return run


# --- seed sessions ------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def seed_logistic() -> Session:
    """Seed 003: per-example gradients, vmap(grad) of the logistic loss."""
    with T.record(stages=True, inline_jnp=True) as s:
        T.vmap(T.grad(example_loss, (0, 1)), in_axes=(None, None, 0, 0))(W, B, INPUTS, TARGETS)
    return s


@functools.lru_cache(maxsize=None)
def seed_absolute() -> Session:
    """Seed 003: a Python `if` on a batched value fails under vmap."""
    with T.record(stages=True, inline_jnp=True) as s:
        with pytest.raises(Exception):  # noqa: B017 - whichever error JAX raises is the seed's
            T.vmap(absolute_if)(jnp.arange(-2.0, 3.0))
    return s


@functools.lru_cache(maxsize=None)
def seed_convolve() -> Session:
    """Seed 003: vmap keeps the program's size."""
    with T.record(stages=True, inline_jnp=True) as s:
        T.vmap(convolve)(XS, WS)
    return s


# A spread of the corpus: every transform, control flow, custom rules, failures.
CORPUS_CASES = (
    "seed003_cubic_d3", "seed003_loss_value_and_grad_has_aux", "seed003_convolve_jit_vmap",
    "seed003_all_pairs", "seed003_absolute_if_grad", "seed003_piecewise_vmap_grad",
    "seed003_sqrt_newton_grad", "seed000_container_vmap_grad", "seed000_container_grad",
    "seed002_log1pexp_vmap_grad", "seed002_primal_tangent_grad", "seed002_primal_tangent_jvp",
    "cond_vmap_grad", "scan_vmap_grad", "while_grad_fails", "fori_dynamic_jit_grad_fails",
    "custom_vjp_vmap_grad", "custom_vjp_jvp_fails", "nn_softmax_vmap", "random_split_vmap",
    "checkpoint_grad_grad",
)


@functools.lru_cache(maxsize=None)
def corpus_session() -> Session:
    with T.record(inline_jnp=True) as s:
        for name in CORPUS_CASES:
            try:
                CASES_BY_NAME[name].run(T)
            except Exception:  # noqa: BLE001 - failing cases are recorded, that is the point
                pass
    return s


# --- random odd sessions --------------------------------------------------------------

_ODD_TEXT = ("", " ", "[bold]markup[/bold]", "\x1b[31mred", "名前⚠", "a" * 3000, "\n\nx\n",
             "\t tab", "}{ lambda", "%s %d {0}", "\x00\x7f", "[/]")
_ODD_INT = (0, -1, 1, 7, 2**40, -2**31)


def _text(r: random.Random) -> str:
    return r.choice(_ODD_TEXT) if r.random() < 0.5 else r.choice(("sin", "mul", "grad", "x"))


def _value(r: random.Random, depth: int = 0) -> ValueRecord:
    kind = r.choice(("array", "python", "batched", "jvp", "linearize", "jaxpr", "tracer", "?"))
    children = ()
    if depth < 40 and r.random() < 0.6:
        children = tuple((r.choice(("val", "primal", "tangent", _text(r))), _value(r, depth + 1))
                         for _ in range(r.randint(0, 2)))
    return ValueRecord(kind, _text(r), _text(r), r.choice((None, *_ODD_INT)),
                       r.choice((None, 0, -1)), r.choice((None, _text(r))), children)


def _source(r: random.Random) -> SourceLocation | None:
    return r.choice((None, SourceLocation(_text(r), r.choice(_ODD_INT), _text(r)),
                     SourceLocation("/", 1, "root"), SourceLocation(__file__, 10**6, "far"),
                     SourceLocation(__file__, 3, "here")))


def _stage(r: random.Random, name: str) -> Stage:
    eqns = tuple(EqnRecord(_text(r), ((_text(r), _text(r)),), (_text(r),), (_text(r),),
                           r.choice(("", f"{__file__}:3:1 (f)", _text(r))), _text(r))
                 for _ in range(r.randint(0, 6)))
    jaxpr = r.choice((None, JaxprRecord(_text(r), r.choice(("", "{ lambda ; a. let\n    b = sin a\n"
                                                             "  in (b,) }", _text(r))),
                                        r.choice((0, len(eqns), -3)), (_text(r),), (_text(r),))))
    return Stage(name, _text(r), jaxpr, r.choice((None, _text(r))), r.random() < 0.8, _text(r),
                 r.choice(("f", "transformed", "hlo", "cost", "")), "", "", eqns,
                 tuple(PrimitiveCount(_text(r), r.choice(_ODD_INT)) for _ in range(r.randint(0, 3))),
                 tuple(Metric(_text(r), r.choice((0, -1, 1.5, math.inf, math.nan, 2**70)))
                       for _ in range(r.randint(0, 3))))


def random_session(seed: int) -> Session:
    """A session built straight from the record classes with odd, inconsistent values."""
    r = random.Random(seed)
    calls = []
    for c in range(r.randint(0, 4)):
        levels = tuple(Level(r.choice((i, i, -1, 99)), _text(r), _text(r), r.choice((0, 1, -5, 40)),
                             r.choice((None, i - 1, i, 99)), _text(r))
                       for i in range(r.randint(0, 4)))
        steps = tuple(Step(r.choice((i, i, i + 1000, -1)), r.choice((0, 1, 2, 99, -1)), _text(r),
                           r.choice(("primitive", "error", "call", _text(r))),
                           r.choice(("forward", "backward", "rule", _text(r))),
                           tuple((_text(r), _text(r)) for _ in range(r.randint(0, 3))),
                           tuple(_value(r) for _ in range(r.randint(0, 3))),
                           tuple(_value(r) for _ in range(r.randint(0, 2))),
                           _source(r), _text(r),
                           tuple(JaxprRecord(_text(r), _text(r), r.choice(_ODD_INT),
                                             primitives=(_text(r),)) for _ in range(r.randint(0, 1))),
                           r.choice((None, _text(r))), r.choice((None, i - 1, 10**6, -1)))
                      for i in range(r.randint(0, 30)))
        errors = tuple(ErrorRecord(_text(r), _text(r), r.choice((None, 0, 99)),
                                   r.choice((None, 0, 5, 10**6)), _source(r))
                       for _ in range(r.randint(0, 2)))
        stages = tuple(_stage(r, f"{_text(r)}{k}") for k in range(r.randint(0, 4)))
        calls.append(Call(c, _text(r), _text(r), _source(r), ((_text(r), _text(r)),), levels,
                          steps, errors, _text(r), _text(r), tuple(_value(r) for _ in range(2)),
                          tuple(_value(r) for _ in range(r.randint(0, 3))), None, stages))
    return Session(calls=calls, jax_version=_text(r), python_version=_text(r))


# --- the app and what it shows ----------------------------------------------------------

SIZE = (80, 24)


def build_app(*args, **kwargs):
    """The app with animations off: Pilot waits for each one to finish."""
    app = _build_app(*args, **kwargs)
    app.animation_level = "none"
    return app


async def wait_until(pilot, condition: Callable[[], object], what: str,
                     timeout: float = 10.0) -> None:
    """Let the app run until `condition()` holds (each try waits for the app to go idle);
    fail naming `what` was awaited if it still does not after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {timeout:g} s for {what}, in vain", pytrace=False)
        await pilot.pause()


def widget_text(widget) -> str:
    """What a Static shows, as plain text."""
    console = Console(width=200, color_system=None, file=io.StringIO(), record=True)
    console.print(widget.content)
    return console.export_text()


def status_text(app) -> str:
    return widget_text(app.screen.query_one(StatusBar))


async def view_body(app, pilot, key: str, view: str, pane: type, body: str) -> str:
    """The text of a view's body once its key is pressed (the view must be the active one)."""
    await pilot.press(key)
    await pilot.pause()
    assert app.screen.active_view == view
    return widget_text(app.screen.query_one(pane).query_one(body))


async def missing_view_says(app, pilot, key: str, pane: type) -> str:
    """For a session without a view: the status bar's word once its key is pressed (the pane
    is not there, and the step view stays)."""
    assert not app.screen.query(pane)
    await pilot.press(key)
    await pilot.pause()
    assert app.screen.active_view == "step"
    return status_text(app)
