"""Sessions the TUI tests share (seed examples, corpus cases, random odd ones), and tests of
the TUI's plain-data layer (`workbench.tui.model`): rows, folding, filters, search, mappings."""
from __future__ import annotations

import asyncio
import functools
import math
import os
import random

import jax.numpy as jnp
import pytest
from corpus import CASES_BY_NAME, INPUTS, TARGETS, WS, XS, B, W, absolute_if, convolve, example_loss

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
from workbench.analysis import _call_index as _index
from workbench.tui import navigation as model
from workbench.tui.navigation import CALL, LEVEL, STEP, Outline, StepFilter


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


# --- the model ---------------------------------------------------------------------

def test_outline_rows_follow_calls_levels_steps():
    s = seed_logistic()
    o = Outline(s)
    call = s.calls[0]
    assert o.row(0) == (CALL, 0, 0)
    kinds = [o.row(i)[0] for i in range(len(o))]
    assert kinds.count(STEP) == len(call.steps)
    assert kinds.count(LEVEL) == len(call.levels)
    # each level's steps follow it, in recorded order
    labels = [call.levels[o.row(i)[2]].label for i in range(len(o)) if o.row(i)[0] == LEVEL]
    assert labels == ["eval#0", "vmap#1", "vmap#1/grad#2"]


def test_outline_folds_and_finds_rows():
    s = seed_logistic()
    o = Outline(s)
    full = len(o)
    level_row = next(i for i in range(full) if o.row(i)[0] == LEVEL)
    assert o.toggle(level_row) == level_row
    folded = len(o)
    assert folded < full
    step_pos = len(s.calls[0].steps) - 1
    row = o.row_of_step(0, step_pos)
    assert row is not None and o.row(row) == (STEP, 0, step_pos)
    assert o.parent_row(row) < row


def test_filter_by_primitive_level_text_and_errors():
    s = seed_absolute()
    o = Outline(s)
    o.filter = StepFilter.parse("is:error")
    o.rebuild()
    steps = [o.row(i) for i in range(len(o)) if o.row(i)[0] == STEP]
    assert steps and all(s.calls[0].steps[i].index in _index.failing_steps(s.calls[0])
                         for _, _, i in steps)
    o.filter = StepFilter.parse("p:gt l:vmap")
    o.rebuild()
    titles = {s.calls[0].steps[o.row(i)[2]].primitive for i in range(len(o)) if o.row(i)[0] == STEP}
    assert titles == {"gt"}


def test_search_finds_rows_case_insensitively():
    o = Outline(seed_logistic())
    rows = o.search("TANH")
    assert rows and all("tanh" in model.step_haystack(seed_logistic().calls[0].steps[o.row(r)[2]])
                        for r in rows)
    assert o.search("no-such-thing") == []


def test_step_maps_to_its_equation_and_line():
    s = seed_logistic()
    call = s.calls[0]
    f = call.stages[0]
    smap = model.StageMap(f)
    assert smap.eqn_lines is not None and len(smap.eqn_lines) == f.jaxpr.eqn_count
    lines = f.jaxpr.text.split("\n")
    tanh_step = next(st for st in call.steps if st.primitive == "tanh")
    eqn = smap.eqn_of_step(tanh_step, lambda i: call.steps[i])
    assert f.eqns[eqn].primitive == "tanh" and smap.step_of_eqn(eqn) is not None
    assert "tanh" in lines[smap.eqn_lines[eqn]]


def test_a_jnp_wrapper_step_links_to_its_bodys_equation_at_full_detail():
    """`jit[name=sin]` stages as its body's `sin`. The recorder records the wrapper as inline
    from the live params: jax 0.12 prints `inline=Inline.JAX_EARLY`, not `True`."""
    with T.record(detail="full") as s:
        T.grad(lambda x: jnp.sin(x) * 2.0)(1.0)
    call = s.calls[0]
    wrapper = next(st for st in call.steps if st.title == "jit[name=sin]")
    assert wrapper.inline and not any(st.inline for st in call.steps if st.primitive != "jit")
    stage = call.stages[0]
    eqn = model.StageMap(stage).eqn_of_step(wrapper, lambda i: call.steps[i])
    assert eqn is not None and stage.eqns[eqn].primitive == "sin"
    assert stage.eqn_steps[eqn] == wrapper.index


def test_source_context_reads_safely(tmp_path):
    here = SourceLocation(__file__, 3, "x")
    roots = (os.path.dirname(os.path.realpath(__file__)),)
    first, lines = model.source_context(here, context=1, roots=roots)
    assert first == 2 and len(lines) == 3
    for bad in (None, SourceLocation("/", 1, "f"), SourceLocation(__file__, 10**6, "f"),
                SourceLocation("/no/such/file.py", 1, "f"), SourceLocation(__file__, -4, "f")):
        assert model.source_context(bad, roots=roots) is None
    # Only Python files under the roots: a dump naming /etc/passwd, or a file elsewhere.
    assert model.source_context(here, roots=(str(tmp_path),)) is None
    assert model.source_context(SourceLocation("/etc/passwd", 1, "f"), roots=("/",)) is None
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)  # never opened for reading: it would block
    assert model.source_context(SourceLocation(str(fifo), 1, "f"),
                                roots=(str(tmp_path),)) is None


def test_source_roots_are_the_script_folder_cwd_and_sys_path(tmp_path):
    s = Session(metadata={"script": str(tmp_path / "train.py")})
    roots = model.source_roots(s)
    assert roots[0] == os.path.realpath(tmp_path) and os.path.realpath(os.getcwd()) in roots
    assert model.source_roots(Session(metadata={"script": "/etc/passwd"}))[0] != "/etc"


def test_gallery_forms():
    s = seed_convolve()
    assert model.as_gallery(s, "t") == [("t", s)]
    assert model.as_gallery([("a", s), s])[1] == ("session 1", s)
    with pytest.raises(ValueError):
        model.as_gallery([])
    with pytest.raises(TypeError):
        model.as_gallery([1])


@pytest.mark.parametrize("seed", range(40))
def test_model_never_fails_on_random_sessions(seed):
    s = random_session(seed)
    o = Outline(s)
    for i in range(len(o)):
        o.row(i)
    o.search("a")
    o.filter = StepFilter.parse("p:s l:g is:error x")
    o.rebuild()
    for c, call in enumerate(s.calls):
        maps = [model.StageMap(stage) for stage in call.stages]
        for stage in call.stages:
            model.stage_lines(stage)
        for step in call.steps:
            model.step_haystack(step)
            model.step_primitive(step)
            model.source_context(step.source)
            for smap in maps:
                smap.eqn_of_step(step, o.index(c).step_at)
        for smap in maps:
            for eqn in range(len(smap.stage.eqns)):
                smap.step_of_eqn(eqn)
        o.index(c).caused_by(0)
