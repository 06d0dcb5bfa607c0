"""`max_nodes` bounds every node of every view, and the refusal's advice works (issue 18)."""
from __future__ import annotations

import re
import shutil

import pytest

from transforms.model import (
    Call,
    EqnRecord,
    JaxprRecord,
    Level,
    Session,
    Stage,
    Step,
    SubJaxprRecord,
    TreeNode,
    TreePair,
    TreeRecord,
)
from workbench import export
from workbench.cli import main as workbench_main
from workbench.export import ExportError, GraphOptions, GraphTooLarge, collect_jaxpr

LAYERS = 300  # 600 parameter inputs, as in the issue's 9.9k-equation program
W, B = "float32[16,16]", "float32[16]"


def _mlp_stage() -> Stage:
    """grad-like: per layer dot, add, tanh (reads w and b); a scan with a body every 50 layers;
    every parameter's gradient an output."""
    eqns, in_vars, avals, outs = [], ["x"], ["float32[4,16]"], []
    h = "x"
    for k in range(LAYERS):
        w, b = f"w{k}", f"b{k}"
        in_vars += [w, b]
        avals += [W, B]
        subs = ()
        if k % 50 == 0:
            body = (EqnRecord("sin", (), (B,), (B,), "", "", ("s0",), ("s1",)),
                    EqnRecord("cos", (), (B,), (B,), "", "", ("s1",), ("s2",)))
            subs = (SubJaxprRecord("body", ("s0",), ("s2",), (B,), (B,), ("carry",),
                                   ("carry",), (1,), body, 2),)
        eqns.append(EqnRecord("dot_general", (), ("float32[4,16]", W), ("float32[4,16]",), "",
                              "jvp()", (h, w), (f"d{k}",)))
        eqns.append(EqnRecord("scan" if subs else "add", (), ("float32[4,16]", B),
                              ("float32[4,16]",), "", "jvp()", (f"d{k}", b), (f"a{k}",), subs))
        eqns.append(EqnRecord("tanh", (), ("float32[4,16]",), ("float32[4,16]",), "", "jvp()",
                              (f"a{k}",), (f"h{k}",)))
        eqns.append(EqnRecord("mul", (), ("float32[4,16]", "float32[4,16]"), (W,), "",
                              "transpose(jvp())", (f"h{k}", "x"), (f"g{k}",)))
        outs.append(f"g{k}")
        h = f"h{k}"
    jaxpr = JaxprRecord("grad(f)", "", len(eqns), tuple(avals), (W,) * len(outs),
                        tuple(e.primitive for e in eqns))
    return Stage("grad(f)", "", jaxpr=jaxpr, role="transformed", transform="grad",
                 eqns=tuple(eqns), in_vars=tuple(in_vars), out_vars=tuple(outs))


def _input_tree() -> TreeRecord:
    params = tuple(range(3, 3 + 2 * LAYERS))
    nodes = [TreeNode(0, None, 0, "", "", "node", "builtins.tuple", children=(1, 2))]
    nodes.append(TreeNode(1, 0, 1, "[0]", "[0]", "leaf", "jax.Array", aval="float32[4,16]"))
    nodes.append(TreeNode(2, 0, 1, "[1]", "[1]", "node", "builtins.list", children=params))
    for k in range(2 * LAYERS):
        nodes.append(TreeNode(3 + k, 2, 2, f"[{k}]", f"[1][{k}]", "leaf", "jax.Array",
                              aval=W if k % 2 == 0 else B))
    return TreeRecord("input", "args", nodes=tuple(nodes), argnum=0)


def _call() -> Call:
    stage = _mlp_stage()
    f = Stage("f", "", jaxpr=stage.jaxpr, role="f", eqns=stage.eqns[:300],
              in_vars=stage.in_vars, out_vars=("h74",))
    levels = tuple(Level(i, "grad", f"grad#{i}", i, None, "JVPTrace") for i in range(3))
    steps = tuple(Step(i, i % 3, "sin", "primitive") for i in range(3000))
    tree = _input_tree()
    pair = TreePair("gradient", "inputs and gradients", tree, tree)
    return Call(0, "grad", "loss", None, levels=levels, steps=steps, stages=(f, stage),
                trees=(tree,), pairs=(pair,))


SESSION = Session(calls=[_call()])
VIEWS = {"jaxpr": {}, "stages": {"stage": "f", "stage_b": "grad(f)"}, "tower": {},
         "pytree": {}, "devices": {}}


@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("cap", [3, 7, 20, 100, 500, 2500])
def test_any_max_nodes_gives_at_most_that_many_nodes(view, cap):
    try:
        g = export.collect(SESSION, view, 0, options=GraphOptions(max_nodes=cap),
                           **VIEWS[view])
    except ExportError as e:  # only when the view cannot be drawn that small, saying so
        assert cap < 7 and f"max_nodes={cap}" in str(e) and "at least" in str(e)
        return
    assert 0 < len(g.nodes) <= cap


def test_the_issue_case_500_nodes_folds_the_600_inputs_and_says_so():
    g = export.collect(SESSION, "jaxpr", 0, "grad(f)", options=GraphOptions(max_nodes=500))
    assert len(g.nodes) <= 500
    groups = {n.label.split("\n")[0] for n in g.nodes if n.id.startswith("ig")}
    assert groups == {"args[0]: 1 value", "args[1]: 600 values"}
    (params,) = [n for n in g.nodes if n.label.startswith("args[1]: 600 values")]
    assert params.label.split("\n")[1] == "f32[16,16] x300, f32[16] x300"
    assert any("the 601 inputs and consts are drawn as 2 nodes (args[0]: 1, args[1]: 600)" in n
               for n in g.notes)
    assert any(n.startswith("max_nodes=500: equations #") and "are drawn as one node" in n
               for n in g.notes)
    assert g.folding.inputs_folded == 601 and g.folding.equations_folded > 0


def test_without_max_nodes_nothing_is_folded():
    g = collect_jaxpr(_mlp_stage())
    assert g.folding.inputs_folded == g.folding.equations_folded == 0
    assert sum(1 for n in g.nodes if re.fullmatch(r"i\d+", n.id)) == 601  # bodies have inputs too


def test_smallest_jaxpr_graph_is_three_nodes_and_below_is_refused():
    g = collect_jaxpr(_mlp_stage(), options=GraphOptions(max_nodes=3))
    assert sorted(n.kind for n in g.nodes) == ["group", "input", "output"]
    with pytest.raises(ExportError, match="needs at least 3 nodes"):
        export.collect(SESSION, "jaxpr", 0, "grad(f)", options=GraphOptions(max_nodes=2))
    with pytest.raises(ExportError, match="positive number"):
        export.collect(SESSION, "jaxpr", 0, "grad(f)", options=GraphOptions(max_nodes=0))


def _advised_max_nodes(message: str) -> str:
    found = re.search(r"--max-nodes (\d+)", message)
    assert found, message
    return found.group(1)


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_following_the_refusal_advice_renders(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("workbench.export._write.MAX_RENDER_NODES", 200)
    dump = tmp_path / "big.json"
    SESSION.save(dump)
    out = tmp_path / "g.svg"
    for view, extra in (("jaxpr", []), ("stages", ["--stage", "f", "--vs", "grad(f)"])):
        with pytest.raises(GraphTooLarge) as info:
            export.graph(SESSION, view, 0, stage=extra[1] if extra else None,
                         stage_b=extra[3] if extra else None, out=out, quiet=True)
        advised = _advised_max_nodes(str(info.value))
        assert advised == "200"
        capsys.readouterr()
        code = workbench_main(["graph", str(dump), "--view", view, *extra, "--max-nodes",
                               advised, "-q", "-o", str(out)])
        assert code == 0, capsys.readouterr().err
        assert out.read_text().count("<g id=\"node") <= 200
