"""The Graphviz exporter on the seed examples, recorded live; dataflow records round-trip."""
from __future__ import annotations

import re
import shutil

import corpus as C
import jax.numpy as jnp
import pytest

import transforms as T
from workbench import export
from workbench.export import collect

HAVE_DOT = shutil.which("dot") is not None


@pytest.fixture(scope="module")
def session():
    with T.record(stages=True) as s:
        T.grad(C.loss, (0, 1))(C.W, C.B)                                          # 0
        T.vmap(C.convolve)(C.XS, C.WS)                                            # 1
        T.vmap(T.grad(C.example_loss, (0, 1)),
               in_axes=(None, None, 0, 0))(C.W, C.B, C.INPUTS, C.TARGETS)         # 2
        T.grad(C.test_func)(C.CONTAINER)                                          # 3
        T.grad(C.scan_fn)(jnp.arange(3.0))                                        # 4
        T.jit(C.cond_fn)(1.0)                                                     # 5
        T.jit(C.while_fn)(1.0)                                                    # 6
    return s


@pytest.mark.slow
def test_variable_names_match_the_printed_jaxpr(session):
    for call in session.calls:
        for stage in call.stages:
            if stage.jaxpr is None:
                continue
            text = stage.jaxpr.text
            printed = re.findall(r"\b([a-z]+):[a-z0-9]+\[", text)
            names = list(stage.const_vars + stage.in_vars)
            for e in stage.eqns:
                names += [v for v in e.out_vars if v != "_"]
            top = [n for n in printed if n in set(names)]
            assert names and set(names) <= set(printed), (stage.name, names, printed)
            assert top[:len(stage.in_vars)] or not stage.in_vars


def test_grad_loss_inputs_named_W_and_b(session):
    g = collect(session, "jaxpr", 0, "grad(f)")
    inputs = [n.label.split("\n")[0] for n in g.nodes if n.kind == "input"]
    outputs = [n.label.split("\n")[0] for n in g.nodes if n.kind == "output"]
    assert inputs == ["W", "b"] and outputs == ["grad W", "grad b"]
    origins = {n.origin for n in g.nodes if n.kind == "eqn"}
    assert origins == {"jvp", "transpose"}


def test_vmap_convolve_stages_keep_the_program_size(session):
    g = collect(session, "stages", 1)
    assert g.title == "f -> vmap(f): 10 changed, 0 added, 0 removed, 0 same"
    eqns = [n for n in g.nodes if n.kind == "eqn"]
    assert len(eqns) == 20 and {n.mark for n in eqns} == {"changed"}
    assert all(n.batched for n in eqns if n.id.startswith("b_"))


def test_tower_of_vmap_grad(session):
    g = collect(session, "tower", 2)
    labels = [c.label.split("   ")[0] for c in g.clusters]
    assert labels == ["vmap#1/grad#2", "vmap#1", "eval#0"]
    call = session.calls[2]
    caused = sum(1 for s in call.steps if s.cause is not None)
    assert sum(1 for e in g.edges if e.style == "dashed") == caused > 0


def test_ntcontainer_pytree_shows_aux_data(session):
    g = collect(session, "pytree", 3)
    root = g.node("p0L0")
    assert root.label == "container\nNTContainer\nname='composite-container'\nflag=0"
    assert g.node("p0R1").label.startswith(".array\nf32[3,2]")
    assert not any(n.mark for n in g.nodes)


def test_control_flow_bodies_are_labelled_clusters(session):
    scan = collect(session, "jaxpr", 4, "f")
    (body,) = [c for c in scan.clusters if c.kind == "subjaxpr"]
    assert body.label.startswith("jaxpr (") and "carry" in body.label and "xs" in body.label
    cond = collect(session, "jaxpr", 5, "f")
    assert sorted(c.label for c in cond.clusters if c.kind == "subjaxpr") == [
        "branches[0] (1 operand)", "branches[1] (1 operand)"]
    loop = collect(session, "jaxpr", 6, "f")
    assert sorted(c.label for c in loop.clusters if c.kind == "subjaxpr") == [
        "body_jaxpr (1 carry)", "cond_jaxpr (1 carry)"]


def test_saved_and_loaded_sessions_draw_the_same(session, tmp_path):
    path = tmp_path / "s.json"
    session.save(path)
    loaded = T.load(path)
    assert loaded.calls[4].stages == session.calls[4].stages
    for view, call in (("jaxpr", 0), ("stages", 1), ("tower", 2), ("pytree", 3), ("jaxpr", 5)):
        assert export.to_dot(collect(loaded, view, call)) == \
            export.to_dot(collect(session, view, call))


@pytest.mark.skipif(not HAVE_DOT, reason="Graphviz's dot is not installed")
def test_session_graphs_for_demo_export_and_tui(session, tmp_path):
    written = export.export_session_graphs(session, tmp_path, "ex")
    names = sorted(p.rsplit("/", 1)[-1] for p in written)
    assert "ex-call0-jaxpr.svg" in names and "ex-call2-tower.svg" in names
    assert "ex-call3-pytree.svg" in names
    path = export.write_call_graph(session.calls[1], tmp_path / "call1.svg")
    assert path.read_text().lstrip().startswith("<?xml")
