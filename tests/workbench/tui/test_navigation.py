"""The TUI's plain-data layer (`workbench.tui.navigation`): rows, folding, filters, search,
step <-> equation mappings, source context, and that it never fails on odd sessions."""
from __future__ import annotations

import os

import jax.numpy as jnp
import pytest
from tui_sessions import random_session, seed_absolute, seed_convolve, seed_logistic

import transforms as T
from transforms.model import (
    Session,
    SourceLocation,
)
from workbench.analysis import _call_index as _index
from workbench.tui import navigation as model
from workbench.tui.navigation import CALL, LEVEL, STEP, Outline, StepFilter

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


def test_source_lines_are_read_again_once_the_file_changed(tmp_path):
    """Issue 36, item 3: after an edit under `run --watch`, the new recording's line
    numbers are shown with the new file's text, not the old one's."""
    from transforms.model import SourceLocation as _Src
    from workbench.tui.source import source_context as _context
    script = tmp_path / "w.py"
    script.write_text("a = 1\nb = 2\n")
    roots = (str(tmp_path.resolve()),)
    assert _context(_Src(str(script), 2, "<module>"), 0, roots) == (2, ["b = 2"])
    script.write_text("x = 10\ny = 20\nz = 30\n")
    os.utime(script, ns=(1, 2_000_000_000))  # another mtime, however quick the edit
    assert _context(_Src(str(script), 3, "<module>"), 0, roots) == (3, ["z = 30"])
    assert _context(_Src(str(script), 2, "<module>"), 0, roots) == (2, ["y = 20"])
