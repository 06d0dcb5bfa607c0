"""The Graphviz exporter: collect functions on hand-made records, DOT escaping, file writing."""
from __future__ import annotations

import html
import os
import re
import shutil
import stat
import subprocess

import pytest

from transforms.model import (
    Call,
    EqnRecord,
    JaxprRecord,
    Level,
    PairRow,
    Session,
    Stage,
    Step,
    SubJaxprRecord,
    TreeNode,
    TreePair,
    TreeRecord,
    ValueRecord,
)
from workbench import export
from workbench.export import (
    ExportError,
    GraphOptions,
    GraphTooLarge,
    GraphvizMissing,
    collect_jaxpr,
    collect_pytree,
    collect_stages,
    collect_tower,
    to_dot,
)
from workbench.export.graphviz import dot_string, find_repeats, origin_of

HAVE_DOT = shutil.which("dot") is not None
needs_dot = pytest.mark.skipif(not HAVE_DOT, reason="Graphviz's dot is not installed")


# --- hand-made records -------------------------------------------------------------

def eqn(prim, ins, outs, in_avals=None, out_avals=None, stack="", subjaxprs=(), params=(),
        scope=""):
    return EqnRecord(prim, params, tuple(in_avals or ["float32[3]"] * len(ins)),
                     tuple(out_avals or ["float32[3]"] * len(outs)), "", stack, tuple(ins),
                     tuple(outs), tuple(subjaxprs), scope=scope)


def stage(eqns, in_vars=("a", "b"), out_vars=("d",), name="f", role="f", const_vars=()):
    jaxpr = JaxprRecord(name, "", len(eqns), ("float32[3]",) * len(in_vars),
                        ("float32[3]",) * len(out_vars), tuple(e.primitive for e in eqns))
    return Stage(name, "", jaxpr=jaxpr, role=role, eqns=tuple(eqns), in_vars=tuple(in_vars),
                 out_vars=tuple(out_vars), const_vars=tuple(const_vars))


SMALL = stage([eqn("sin", ["a"], ["c"]), eqn("mul", ["c", "b"], ["d"], stack="jvp()")])


def leaf(index, parent, key, path, aval="float32[3]"):
    return TreeNode(index, parent, 1 if parent is not None else 0, key, path, "leaf",
                    "jax.Array", aval=aval)


def tree(name, role="input", argnum=0):
    return TreeRecord(role, name, nodes=(leaf(0, None, "", ""),), argnum=argnum)


def call_with(stages=(), trees=(), **kw):
    return Call(0, "grad", "loss", None, stages=tuple(stages), trees=tuple(trees), **kw)


def edges(graph):
    return {(e.src, e.dst, e.label) for e in graph.edges}


# --- jaxpr view --------------------------------------------------------------------

def test_jaxpr_small_exact_nodes_and_edges():
    g = collect_jaxpr(SMALL)
    assert [(n.id, n.label, n.kind) for n in g.nodes] == [
        ("i0", "a\nf32[3]", "input"), ("i1", "b\nf32[3]", "input"),
        ("e0", "#0 sin", "eqn"), ("e1", "#1 mul", "eqn"), ("o0", "out[0]\nf32[3]", "output")]
    assert edges(g) == {("i0", "e0", "a: f32[3]"), ("e0", "e1", "c: f32[3]"),
                        ("i1", "e1", "b: f32[3]"), ("e1", "o0", "d: f32[3]")}
    assert g.clusters == ()
    assert [n.origin for n in g.nodes if n.kind == "eqn"] == ["primal", "jvp"]


def test_jaxpr_inputs_and_outputs_named_by_key_paths():
    call = call_with(trees=[tree("W"), tree("b", argnum=1), tree("out", "output", None)])
    g = collect_jaxpr(SMALL, call)
    labels = {n.id: n.label for n in g.nodes}
    assert labels["i0"] == "W\na: f32[3]"
    assert labels["i1"] == "b\nf32[3]"  # named as its variable: said once
    assert labels["o0"] == "out\nf32[3]"
    assert g.notes == ()


def test_container_leaf_path_and_jvp_tangent_names():
    container = TreeRecord("input", "container", nodes=(
        TreeNode(0, None, 0, "", "", "node", "corpus.NTContainer", static=(("flag", "0"),),
                 children=(1,)),
        leaf(1, 0, ".array", ".array")), argnum=0)
    call = call_with(trees=[container])
    one = stage([eqn("sin", ["a"], ["b"])], in_vars=("a",), out_vars=("b",))
    assert collect_jaxpr(one, call).nodes[0].label == "container.array\na: f32[3]"
    jvp = stage([eqn("sin", ["a"], ["c"]), eqn("mul", ["b", "c"], ["d"])], role="jvp",
                name="jvp(f)")
    labels = [n.label for n in collect_jaxpr(jvp, call_with(trees=[container])).nodes[:0]]
    assert labels == []
    g = collect_jaxpr(jvp, call)
    assert [n.label.split("\n")[0] for n in g.nodes if n.kind == "input"] == [
        "container.array", "container.array_dot"]


def test_mismatched_leaf_count_keeps_variable_names_with_a_note():
    call = call_with(trees=[tree("W")])
    g = collect_jaxpr(SMALL, call)
    assert g.nodes[0].label == "a\nf32[3]"
    assert any("2 inputs" in n and "1 leaves" in n for n in g.notes)


def test_literals_shown_on_the_node_and_dropped_outputs_not_drawn():
    s = stage([eqn("mul", ["a", "=2.0"], ["c"]), eqn("scan_like", ["c"], ["_", "d"])])
    g = collect_jaxpr(s)
    assert g.node("e0").label == "#0 mul\nliterals: 2.0"
    assert ("e1", "o0", "d: f32[3]") in edges(g)
    assert not any(e.label.startswith("_") for e in g.edges)


SCAN = SubJaxprRecord("jaxpr", ("e", "f", "g"), ("i", "h"), ("float32[]",) * 3,
                      ("float32[]", "float32[]"), ("const", "carry", "xs"), ("carry", "ys"),
                      (0, 1, 2), (eqn("mul", ["f", "e"], ["h"], stack=""),
                                  eqn("add", ["h", "g"], ["i"])), 2)
SCAN_STAGE = stage([eqn("scan", ["a", "b", "b"], ["c", "d"], subjaxprs=[SCAN],
                        params=(("length", "3"), ("jaxpr", "{jaxpr: mul, add}")),
                        stack="transpose(jvp())")],
                   out_vars=("c", "d"))


def test_subjaxpr_is_a_labelled_cluster_fed_by_the_equation_inputs():
    g = collect_jaxpr(SCAN_STAGE)
    assert [(c.id, c.label, c.parent) for c in g.clusters] == [
        ("cluster_e0", "#0 scan", None), ("cluster_e0_0", "jaxpr (1 const, 1 carry, 1 xs)",
                                          "cluster_e0")]
    inner_inputs = [n.label for n in g.nodes if n.cluster == "cluster_e0_0" and n.kind == "input"]
    assert inner_inputs == ["const e\nf32[]", "carry f\nf32[]", "xs g\nf32[]"]
    assert edges(g) >= {("i0", "e0_0i0", "a: f32[3]"), ("i1", "e0_0i1", "b: f32[3]"),
                        ("i1", "e0_0i2", "b: f32[3]"), ("e0_0i1", "e0_0e0", "f: f32[3]"),
                        ("e0_0e1", "e0", "carry i"), ("e0_0e0", "e0", "ys h"),
                        ("e0", "o0", "c: f32[3]")}
    # body equations take the origin of the equation holding them
    assert {n.origin for n in g.nodes if n.id.startswith("e0_0e")} == {"transpose"}
    assert g.node("e0").label == "#0 scan\nlength=3"


SCOPED = stage([eqn("sin", ["a"], ["c"], stack="jvp(GPT)/attn", scope="GPT/attn"),
                eqn("mul", ["c", "b"], ["d"], stack="GPT", scope="GPT"),
                eqn("cos", ["d"], ["e"], stack="GPT/attn", scope="GPT/attn"),
                eqn("add", ["e", "b"], ["f"])], out_vars=("f",))


def test_equations_are_boxed_by_module_one_box_per_path_nested_as_the_path():
    assert to_dot(collect_jaxpr(SCOPED)) == """\
digraph workbench {
	graph [fontname=Helvetica fontsize=12 label="f  (4 equations)\\nblue: traced under jvp; \
white: primal" labeljust=l labelloc=t newrank=true nodesep=0.25 rankdir=TB ranksep=0.35]
	node [fillcolor="#ffffff" fontname=Helvetica fontsize=10 height=0.3 margin="0.08,0.04" \
shape=box style="rounded,filled"]
	edge [arrowsize=0.6 color="#555555" fontcolor="#333333" fontname=Helvetica fontsize=8]
	i0 [label="a\\nf32[3]" fillcolor="#e2e8f0" shape=box style=filled tooltip="input 0: a"]
	i1 [label="b\\nf32[3]" fillcolor="#e2e8f0" shape=box style=filled tooltip="input 1: b"]
	e3 [label="#3 add" fillcolor="#ffffff"]
	o0 [label="out[0]\\nf32[3]" fillcolor="#e2e8f0" shape=box style="filled,bold" \
tooltip="output 0"]
	subgraph cluster_scope0 {
		graph [color="#7c3aed" fontsize=10 label=GPT labeljust=l style="rounded,dashed"]
		e1 [label="#1 mul" fillcolor="#ffffff" tooltip=GPT]
		subgraph cluster_scope1 {
			graph [color="#7c3aed" fontsize=10 label=attn labeljust=l style="rounded,dashed"]
			e0 [label="#0 sin" fillcolor="#dbeafe" tooltip="jvp(GPT)/attn"]
			e2 [label="#2 cos" fillcolor="#ffffff" tooltip="GPT/attn"]
		}
	}
	i0 -> e0 [label="a: f32[3]"]
	e0 -> e1 [label="c: f32[3]"]
	i1 -> e1 [label="b: f32[3]"]
	e1 -> e2 [label="d: f32[3]"]
	e2 -> e3 [label="e: f32[3]"]
	i1 -> e3 [label="b: f32[3]"]
	e3 -> o0 [label="f: f32[3]"]
}
"""


def test_a_bodys_modules_are_boxed_inside_its_cluster_from_where_it_starts():
    body = SubJaxprRecord("jaxpr", ("e",), ("g",), ("float32[3]",), ("float32[3]",),
                          operands=(0,), eqn_count=1,
                          eqns=(eqn("sin", ["e"], ["g"], stack="cell", scope="cell"),))
    scoped_jit = stage([eqn("jit", ["a"], ["c"], stack="rnn", scope="rnn", subjaxprs=[body],
                            params=(("name", "step"),))], in_vars=("a",), out_vars=("c",))
    g = collect_jaxpr(scoped_jit)
    assert [(c.id, c.label, c.parent) for c in g.clusters] == [
        ("cluster_scope0", "rnn", None), ("cluster_e0", "#0 jit", "cluster_scope0"),
        ("cluster_e0_0", "jaxpr", "cluster_e0"), ("cluster_scope1", "cell", "cluster_e0_0")]
    assert g.node("e0_0e0").cluster == "cluster_scope1"


def test_a_large_stage_boxed_by_modules_without_bodies_is_drawn_whole():
    many = stage([eqn("sin", [f"v{i}"], [f"v{i + 1}"], scope="m") for i in range(320)],
                 in_vars=("v0",), out_vars=("v320",))
    g = collect_jaxpr(many)
    assert len(g.nodes) > 300 and not any("drawn with" in note for note in g.notes)


def test_collapsed_subjaxprs_are_one_node():
    g = collect_jaxpr(SCAN_STAGE, options=GraphOptions(collapse_subjaxprs=True))
    assert g.clusters == ()
    assert g.node("e0").label == "#0 scan\nlength=3\njaxpr: 2 eqns"
    assert edges(g) == {("i0", "e0", "a: f32[3]"), ("i1", "e0", "b: f32[3]"),
                        ("e0", "o0", "c: f32[3]"), ("e0", "o1", "d: f32[3]")}


def chain(n, block=("sin", "mul", "add")):
    eqns, prev = [], "a"
    for i in range(n):
        out = f"v{i}"
        eqns.append(eqn(block[i % len(block)], [prev], [out]))
        prev = out
    return stage(eqns, in_vars=("a",), out_vars=(prev,))


def test_find_repeats():
    assert find_repeats(list("xabcabcabcy")) == [(1, 3, 3)]
    assert find_repeats(list("abcd")) == []
    assert find_repeats(["add"] * 10) == [(0, 1, 10)]


def test_collapse_repeats_keeps_the_first_block():
    s = chain(12)
    g = collect_jaxpr(s, options=GraphOptions(collapse_repeats=True))
    eqn_ids = [n.id for n in g.nodes if n.kind == "eqn"]
    assert eqn_ids == ["e0", "e1", "e2"]
    group = [n for n in g.nodes if n.kind == "group"]
    assert len(group) == 1 and group[0].label.startswith("3 more repeats of #0-#2")
    assert ("e2", group[0].id, "v2: f32[3]") in edges(g)
    assert (group[0].id, "o0", "v11: f32[3]") in edges(g)
    assert any("9 equations" in n for n in g.notes)


def test_max_nodes_caps_with_a_note_of_what_was_left_out():
    g = collect_jaxpr(chain(100), options=GraphOptions(max_nodes=10))
    assert len(g.nodes) == 10  # the input, 7 equations, the group, the output
    assert sum(1 for n in g.nodes if n.kind == "eqn") == 7
    (group,) = [n for n in g.nodes if n.kind == "group"]
    assert group.label.startswith("93 more equations not drawn\n(max_nodes=10)")
    assert any("#7-#99 (93 of 100)" in n for n in g.notes)


def test_focus_draws_the_neighbourhood_only():
    g = collect_jaxpr(chain(20), options=GraphOptions(focus=10, radius=2))
    assert sorted(n.id for n in g.nodes if n.kind == "eqn") == ["e10", "e11", "e12", "e8", "e9"]
    (boundary,) = [n for n in g.nodes if n.kind == "boundary"]
    assert boundary.label == "v7: f32[3]\nfrom #7 mul"
    assert not any(n.kind in ("input", "output") for n in g.nodes)
    assert g.node("e10").mark == "focus"
    with pytest.raises(Exception, match="focus=99"):
        collect_jaxpr(chain(20), options=GraphOptions(focus=99))


def test_stage_without_a_jaxpr_is_refused():
    with pytest.raises(Exception, match="no jaxpr to draw: boom"):
        collect_jaxpr(Stage("hlo(jit(f))", available=False, reason="boom"))


def test_origin_from_name_stack():
    assert origin_of("") == ("primal", False)
    assert origin_of("jvp()") == ("jvp", False)
    assert origin_of("vmap(transpose(jvp()))") == ("transpose", True)


# --- stages view -------------------------------------------------------------------

def test_stages_marks_added_removed_changed():
    before = stage([eqn("sin", ["a"], ["c"]), eqn("mul", ["c", "b"], ["d"])])
    after = stage([eqn("sin", ["a"], ["c"], in_avals=["float32[2,3]"]),
                   eqn("cos", ["c"], ["e"]), eqn("neg", ["e"], ["d"])], name="vmap(f)")
    g = collect_stages(before, after)
    marks = {n.id: n.mark for n in g.nodes if n.kind == "eqn"}
    assert marks == {"a_e0": "changed", "a_e1": "removed", "b_e0": "changed",
                     "b_e1": "added", "b_e2": "added"}
    assert [c.label for c in g.clusters] == ["f  (2 equations)", "vmap(f)  (3 equations)"]
    assert g.title.startswith("f -> vmap(f): 1 changed, 2 added, 1 removed")


# --- tower view --------------------------------------------------------------------

def test_tower_levels_steps_and_causes():
    v = ValueRecord("array", "Array", "float32[3]")
    levels = (Level(0, "eval", "eval#0", 0, None, "EvalTrace"),
              Level(1, "vmap", "vmap#1", 1, 0, "BatchTrace", "f"),
              Level(2, "grad", "vmap#1/grad#2", 2, 1, "LinearizeTrace", "f"))
    steps = (Step(0, 2, "sin", outputs=(v,)), Step(1, 1, "sin", cause=0),
             Step(2, 0, "sin", cause=1), Step(3, 0, "mul", phase="backward"))
    g = collect_tower(Call(0, "vmap", "f", None, levels=levels, steps=steps))
    assert [c.id for c in g.clusters] == ["cluster_L2", "cluster_L1", "cluster_L0"]
    assert g.clusters[0].label.startswith("vmap#1/grad#2   grad (LinearizeTrace)")
    assert {(n.id, n.cluster) for n in g.nodes} == {
        ("s0", "cluster_L2"), ("s1", "cluster_L1"), ("s2", "cluster_L0"), ("s3", "cluster_L0")}
    assert g.node("s0").label == "#0 sin\n-> f32[3]"
    assert g.node("s3").mark == "backward"
    assert {(e.src, e.dst, e.style) for e in g.edges} == {
        ("s0", "s1", "dashed"), ("s1", "s2", "dashed"), ("s2", "s3", "invis")}


# --- pytree view -------------------------------------------------------------------

def test_pytree_pairs_side_by_side_with_mismatches_marked():
    left = TreeRecord("primal_out", "primal", nodes=(
        TreeNode(0, None, 0, "", "", "node", "m.Primal", children=(1,)),
        leaf(1, 0, ".x", ".x", "float32[]")))
    right = TreeRecord("tangent_out", "tangent", nodes=(
        TreeNode(0, None, 0, "", "", "node", "m.Tangent", aux="('s', 1)", children=(1,)),
        leaf(1, 0, ".sign", ".sign", "float32[]")))
    pair = TreePair("custom_jvp", "primal vs tangent", left, right, rows=(
        PairRow("", 0, 0, "differs", "Primal vs Tangent"), PairRow(".x", 1, None, "left_only"),
        PairRow(".sign", None, 1, "right_only")), first_difference="")
    g = collect_pytree(call_with(pairs=(pair,)))
    marks = {n.id: (n.mark, n.label) for n in g.nodes}
    assert marks["p0L0"] == ("mismatch", "primal\nPrimal\ndiffers: Primal vs Tangent")
    assert marks["p0R0"] == ("mismatch", "tangent\nTangent\naux: ('s', 1)\n"
                                         "differs: Primal vs Tangent")
    assert marks["p0L1"][1].endswith("only in primal")
    assert marks["p0R1"][1].endswith("only in tangent")
    assert ("p0L0", "p0R0", "") in edges(g) and ("p0L0", "p0L1", "") in edges(g)
    assert g.same_rank == (("p0L0", "p0R0"),)


def test_pytree_without_tree_records_uses_the_treedef_text():
    g = collect_pytree(Call(0, "grad", "f", None, in_tree="PyTreeDef((*,))", out_tree="*"))
    assert [n.label for n in g.nodes] == ["input treedef\nPyTreeDef((*,))", "output treedef\n*"]
    assert "no pytree records" in g.notes[0]


# --- DOT text and escaping -----------------------------------------------------------

HOSTILE = ['say "hi"', "a\\b", "{x|y}", "<b>bold</b>", "line1\nline2", "naïve ∂W 日本",
           "\\n\\l\\N", "&amp; &lt;", "tab\there", "cr\r\nlf", "ctl\x01\x7f", "'single'",
           "]; digraph evil { a -> b", "\\", '"', "end\\"]


@pytest.mark.parametrize("text", HOSTILE)
def test_dot_string_is_ascii_and_quoted(text):
    out = dot_string(text)
    assert out.startswith('"') and out.endswith('"')
    assert out.isascii()
    body = out[1:-1]
    # every quote inside is escaped, and no backslash escapes the closing quote
    assert re.fullmatch(r'(?:[^"\\]|\\.)*', body)
    for c in "<>{}|\n\r\t":
        assert c not in body


def test_dot_string_exact():
    assert dot_string('a"b\\c') == '"a\\"b\\\\c"'
    assert dot_string("x<y>{z}|") == '"x&lt;y&gt;&#123;z&#125;&#124;"'
    assert dot_string("∂\n&") == '"&#8706;\\n&amp;"'


def hostile_graph():
    nodes = tuple(export.Node(f"n{i}", text, cluster="cluster_h") for i, text in enumerate(HOSTILE))
    edges = tuple(export.Edge(f"n{i}", f"n{i + 1}", HOSTILE[-1 - i])
                  for i in range(len(HOSTILE) - 1))
    return export.Graph('title "quoted" {x}', nodes, edges,
                        (export.Cluster("cluster_h", "<cluster|label>"),), ("note\\",))


def visible(text):
    # What a label shows: newlines are line breaks, tabs spaces, other control characters
    # their visible escapes (workbench/_safe_text.py), never the characters themselves.
    text = text.replace("\r\n", "\n").replace("\t", " ")
    named = {"\r": "\\r"}
    return "".join(named.get(c, f"\\x{ord(c):02x}") if (ord(c) < 32 and c != "\n") or ord(c) == 127
                   else c for c in text)


@needs_dot
def test_hostile_labels_render_exactly(tmp_path):
    out = tmp_path / "hostile.svg"
    export.write_graph(hostile_graph(), out, quiet=True)
    svg = out.read_text(encoding="utf-8")
    texts = [html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]
    shown = "\n".join(texts)
    for label in HOSTILE:
        for line in visible(label).split("\n"):
            assert line.strip() in shown, line
    assert "<cluster|label>" in shown and 'title "quoted" {x}' in shown


# --- writing files -------------------------------------------------------------------

def session_with(stage_):
    return Session(calls=[call_with(stages=[stage_])])


def test_dot_suffix_writes_the_text(tmp_path):
    out = export.graph(session_with(SMALL), "jaxpr", 0, out=tmp_path / "g.dot")
    text = out.read_text()
    assert text.startswith("digraph workbench {") and "\te0 -> e1 " in text
    assert [p.name for p in tmp_path.iterdir()] == ["g.dot"]


def test_unknown_suffix_and_missing_folder(tmp_path):
    with pytest.raises(ExportError, match=r"suffix \.jpg; use one of \.svg"):
        export.graph(session_with(SMALL), out=tmp_path / "g.jpg")
    with pytest.raises(ExportError, match="does not exist"):
        export.graph(session_with(SMALL), out=tmp_path / "nope" / "g.svg")


def test_missing_call_and_stage_are_clear_errors(tmp_path):
    s = session_with(SMALL)
    with pytest.raises(ExportError, match=r"no call 7 in this session; the calls are: 0 \(grad"):
        export.graph(s, call=7, out=tmp_path / "g.dot")
    with pytest.raises(ExportError, match=r"no stage 'vmap\(f\)'; its stages are: f"):
        export.graph(s, stage="vmap(f)", out=tmp_path / "g.dot")
    with pytest.raises(ExportError, match="has no stages: recorded with stages off"):
        export.graph(Session(calls=[call_with()]), out=tmp_path / "g.dot")
    with pytest.raises(ExportError, match="unknown view 'nope'"):
        export.graph(s, view="nope", out=tmp_path / "g.dot")
    assert list(tmp_path.iterdir()) == []


def test_no_dot_binary_writes_the_dot_file_and_says_how_to_install(tmp_path, monkeypatch):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(GraphvizMissing, match="apt-get install -y graphviz") as info:
        export.graph(session_with(SMALL), out=tmp_path / "g.png", quiet=True)
    assert info.value.dot_path == tmp_path / "g.dot"
    assert (tmp_path / "g.dot").read_text().startswith("digraph")
    assert not (tmp_path / "g.png").exists()


def fake_dot(tmp_path, script):
    path = tmp_path / "fake-dot"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_a_failing_dot_leaves_nothing_half_written(tmp_path):
    target = tmp_path / "g.svg"
    target.write_text("previous")
    # writes half a file, then fails
    dot = fake_dot(tmp_path, 'for a; do last="$a"; done; echo "<svg" > "$last"; '
                             'echo "Error: syntax error in line 3" >&2; exit 1\n')
    g = collect_jaxpr(SMALL)
    with pytest.raises(ExportError, match="dot failed to render g.svg: Error: syntax error"):
        export.write_graph(g, target, dot_binary=dot, quiet=True)
    assert target.read_text() == "previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fake-dot", "g.svg"]


def test_dot_timeout_is_stopped_and_cleaned(tmp_path):
    dot = fake_dot(tmp_path, "sleep 30\n")
    with pytest.raises(ExportError, match="did not finish within 0.3 s"):
        export.write_graph(collect_jaxpr(SMALL), tmp_path / "g.svg", dot_binary=dot,
                           timeout=0.3, quiet=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fake-dot"]


def test_too_large_is_refused_up_front_naming_the_options(tmp_path, monkeypatch):
    monkeypatch.setattr("workbench.export._write.MAX_RENDER_NODES", 10)
    with pytest.raises(GraphTooLarge) as info:
        export.graph(session_with(chain(50)), out=tmp_path / "g.svg", quiet=True)
    for option in ("collapse_subjaxprs=True", "collapse_repeats=True", "max_nodes=N",
                   "focus=EQN", "--collapse-repeats", "--max-nodes"):
        assert option in str(info.value)
    assert list(tmp_path.iterdir()) == []
    # the DOT text is never refused
    export.graph(session_with(chain(50)), out=tmp_path / "g.dot")


@needs_dot
@pytest.mark.parametrize("suffix,magic", [(".svg", b"<?xml"), (".png", b"\x89PNG"),
                                          (".pdf", b"%PDF")])
def test_suffix_picks_the_format(tmp_path, suffix, magic, capsys):
    out = export.graph(session_with(SCAN_STAGE), out=tmp_path / f"g{suffix}")
    assert out.read_bytes().startswith(magic)
    assert [p.name for p in tmp_path.iterdir()] == [f"g{suffix}"]
    err = capsys.readouterr().err
    assert "dot: laying out" in err and "done in" in err


def test_cli_graph_exit_codes(tmp_path, capsys):
    path = tmp_path / "s.json"
    session_with(SMALL).save(path)
    parser = export.add_graph_arguments(__import__("argparse").ArgumentParser())
    ok = parser.parse_args([str(path), "--view", "jaxpr", "-o", str(tmp_path / "g.dot")])
    assert export.cli_graph(ok) == 0
    bad = parser.parse_args([str(path), "--call", "3", "-o", str(tmp_path / "h.dot")])
    assert export.cli_graph(bad) == 2
    assert "no call 3" in capsys.readouterr().err
    missing = parser.parse_args([str(tmp_path / "none.json"), "-o", str(tmp_path / "h.dot")])
    assert export.cli_graph(missing) == 2
    assert not (tmp_path / "h.dot").exists()


def test_module_entry_point(tmp_path):
    path = tmp_path / "s.json"
    session_with(SMALL).save(path)
    run = subprocess.run([os.sys.executable, "-m", "workbench.export", str(path), "--stage", "x",
                          "-o", str(tmp_path / "g.dot")], capture_output=True, text=True)
    assert run.returncode == 2 and "no stage 'x'" in run.stderr


def test_to_dot_nests_clusters_and_quotes_ids():
    text = to_dot(collect_jaxpr(SCAN_STAGE))
    lines = text.splitlines()
    outer = lines.index("\tsubgraph cluster_e0 {")
    inner = lines.index("\t\tsubgraph cluster_e0_0 {")
    assert outer < inner  # the body's cluster inside the equation's
    assert text.isascii()


@needs_dot
def test_image_gets_the_mode_a_new_file_would_have(tmp_path):
    old = os.umask(0o027)
    try:
        out = export.graph(session_with(SMALL), "jaxpr", 0, out=tmp_path / "g.svg", quiet=True)
        assert out.stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(old)
