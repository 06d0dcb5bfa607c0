"""The Graphviz `devices` view on hand-made records."""
from __future__ import annotations

import shutil

import pytest
from device_records import ALL_REDUCE, REPLICATED, STAGE, batch_record

from transforms.model import Call, Session
from workbench import export
from workbench.export import collect_devices, to_dot

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is missing")

CALL = Call(0, "jit", "loss", None, stages=(STAGE,), shardings=(batch_record(), REPLICATED))


def test_a_sharded_array_is_a_grid_of_device_nodes():
    graph = collect_devices(CALL)
    grid = [n for n in graph.nodes if n.cluster == "cluster_array0"]
    assert [n.label for n in grid] == ["dev 0\n[0:4, :]", "dev 1\n[0:4, :]",
                                       "dev 2\n[4:8, :]", "dev 3\n[4:8, :]"]
    assert graph.same_rank == (("a0d0", "a0d1"), ("a0d2", "a0d3"))
    # devices holding one block share a fill; the two blocks differ
    fills = {n.id: n.fill for n in grid}
    assert fills["a0d0"] == fills["a0d1"] != fills["a0d2"] == fills["a0d3"]
    assert {(e.src, e.dst) for e in graph.edges if e.style == "invis"} == {
        ("a0d0", "a0d1"), ("a0d2", "a0d3"), ("a0d0", "a0d2"), ("a0d1", "a0d3")}


def test_replicated_arrays_are_listed_and_collectives_drawn_in_order():
    graph = collect_devices(CALL)
    assert graph.node("replicated").label == (
        "gradient: out['w']  float32[4]  replicated on data=2 × model=2")
    (collective,) = [n for n in graph.nodes if n.cluster == "cluster_stage0"]
    assert collective.label == ("#0 all-reduce  f32[4]\n16 B per device\ngroups {0,2} {1,3}\n"
                                f"{ALL_REDUCE.op_name}")
    assert "cluster_stage0" in to_dot(graph)


def test_a_single_device_call_says_so():
    graph = collect_devices(Call(0, "grad", "f", None))
    assert [n.label for n in graph.nodes] == [
        "single device: no sharded arrays or collectives recorded"]


def test_devices_is_a_view_of_export_graph(tmp_path):
    session = Session(calls=[CALL])
    out = export.graph(session, "devices", out=tmp_path / "d.dot", quiet=True)
    text = out.read_text()
    assert text.startswith("digraph workbench {") and "\ta0d3 [" in text


@needs_dot
def test_export_session_graphs_writes_the_devices_view(tmp_path):
    written = export.export_session_graphs(Session(calls=[CALL]), tmp_path, "demo")
    assert any(p.endswith("demo-call0-devices.svg") for p in written)
