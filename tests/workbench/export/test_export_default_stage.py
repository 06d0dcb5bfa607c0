"""The graph drawn by default (issue 39, items 5 and 6): when the call's outermost stage was not
captured, the stage drawn in its place is named, with why, on stderr and in the graph; bodies
are expanded only as deep as keeps the drawing quick, and the graph says what it drew as one
node and how to draw it all."""
from __future__ import annotations

import pytest

from transforms.model import Call, EqnRecord, JaxprRecord, Session, Stage, SubJaxprRecord
from workbench.cli import main as workbench_main
from workbench.export import GraphOptions, collect, collect_jaxpr, to_dot
from workbench.export._jaxpr_view import DEFAULT_BODY_NODES

REASON = ("RuleNotRun: _root_jvp (a custom_jvp rule) cannot be staged: it did not run at "
          "this call at these argument types")


def _stage(name: str, role: str, eqns: tuple = (), available: bool = True) -> Stage:
    if not available:
        return Stage(name, "", available=False, reason=REASON, role=role)
    eqns = eqns or (EqnRecord("sin", (), ("float32[3]",), ("float32[3]",), "", "", ("a",),
                              ("b",)),)
    jaxpr = JaxprRecord(name, "", len(eqns), ("float32[3]",), ("float32[3]",),
                        tuple(e.primitive for e in eqns))
    return Stage(name, "", jaxpr=jaxpr, role=role, eqns=eqns, in_vars=("a",),
                 out_vars=(eqns[-1].out_vars[0],))


def _call(outermost_available: bool) -> Call:
    stages = (_stage("f", "f"), _stage("jvp(f)", "jvp"),
              _stage("transpose(linear(f))", "transposed"),
              _stage("value_and_grad(f)", "transformed", available=outermost_available))
    return Call(0, "value_and_grad", "fun_value_and_grad", None, stages=stages)


NOTE = ("drew stage transpose(linear(f)) of call 0: its outermost stage value_and_grad(f) is "
        f"unavailable ({REASON}); --stage NAME draws another")


def test_a_graph_drawn_in_place_of_an_unavailable_outermost_stage_says_so():
    drawn = collect(Session(calls=[_call(outermost_available=False)]))
    assert drawn.title == ("transpose(linear(f))  (1 equations), in place of value_and_grad(f) "
                           "(unavailable)")
    assert drawn.stage_note == NOTE and drawn.notes[0] == NOTE


def test_the_stages_view_says_which_stage_stands_for_the_outermost():
    drawn = collect(Session(calls=[_call(outermost_available=False)]), view="stages")
    assert drawn.title.startswith("f -> transpose(linear(f)): ")
    assert drawn.title.endswith(", in place of value_and_grad(f) (unavailable)")
    assert drawn.stage_note == NOTE
    both = collect(Session(calls=[_call(outermost_available=True)]), view="stages")
    assert both.title.startswith("f -> value_and_grad(f): ") and both.stage_note == ""


def test_the_outermost_stage_drawn_or_a_stage_named_has_no_note():
    assert collect(Session(calls=[_call(outermost_available=True)])).stage_note == ""
    named = collect(Session(calls=[_call(outermost_available=False)]), stage="jvp(f)")
    assert named.stage_note == "" and named.title == "jvp(f)  (1 equations)"


def test_the_command_says_which_stage_it_drew_and_why(tmp_path, capsys):
    path, out = tmp_path / "s.json", tmp_path / "g.dot"
    Session(calls=[_call(outermost_available=False)]).save(path)
    assert workbench_main(["graph", str(path), "-o", str(out)]) == 0
    assert capsys.readouterr().err.splitlines() == [
        f"workbench graph: note: {NOTE}", f"workbench graph: wrote {out}"]
    assert "in place of value_and_grad(f) (unavailable)" in out.read_text()


# --- bodies expanded as deep as is quick -------------------------------------------------

def _loop_stage(depth: int, width: int) -> Stage:
    """One while equation whose body nests `depth` while loops, each with `width` equations."""
    def body(level: int) -> tuple:
        eqns = [EqnRecord("sin", (), ("float32[]",), ("float32[]",), "", "", (f"v{level}_{i}",),
                          (f"v{level}_{i + 1}",)) for i in range(width)]
        if level < depth:
            sub = SubJaxprRecord("body_jaxpr", (f"v{level + 1}_0",),
                                 (f"v{level + 1}_{width}",), ("float32[]",), ("float32[]",),
                                 (), (), (0,), body(level + 1), width)
            eqns.append(EqnRecord("while", (), ("float32[]",), ("float32[]",), "", "",
                                  (f"v{level}_{width}",), (f"w{level}",), (sub,)))
        return tuple(eqns)
    sub = SubJaxprRecord("body_jaxpr", ("v1_0",), (f"v1_{width}",), ("float32[]",),
                         ("float32[]",), (), (), (0,), body(1), width)
    loop = EqnRecord("while", (), ("float32[]",), ("float32[]",), "", "", ("a",), ("out",),
                     (sub,))
    jaxpr = JaxprRecord("f", "", 1, ("float32[]",), ("float32[]",), ("while",))
    return Stage("f", "", jaxpr=jaxpr, role="f", eqns=(loop,), in_vars=("a",),
                 out_vars=("out",))


def test_deep_bodies_are_drawn_as_one_node_past_the_default_size_and_the_graph_says_so():
    stage = _loop_stage(depth=3, width=150)  # every body drawn: over 450 nodes
    whole = collect_jaxpr(stage, options=GraphOptions(collapse_subjaxprs=False))
    assert len(whole.nodes) > DEFAULT_BODY_NODES
    drawn = collect_jaxpr(stage)
    assert len(drawn.nodes) <= DEFAULT_BODY_NODES
    assert drawn.notes[-1] == (
        f"drawn with bodies nested more than 1 deep as one node each: {len(drawn.nodes)} nodes "
        f"of the {len(whole.nodes)} that drawing every body takes (Graphviz lays out nested "
        f"bodies that large in minutes); --expand draws every body, --focus EQN the "
        f"neighbourhood of one equation")
    assert drawn.notes[-1] in to_dot(drawn).replace("\\n", "\n")


def test_a_body_too_large_even_alone_is_one_node():
    stage = _loop_stage(depth=1, width=DEFAULT_BODY_NODES + 50)
    drawn = collect_jaxpr(stage)
    assert len(drawn.nodes) == 3 and not drawn.clusters  # input, the loop, output
    assert drawn.notes[-1].startswith("drawn with every body (of a control-flow or inner-jit "
                                      "equation) as one node: 3 nodes of the ")


@pytest.mark.parametrize("options", [GraphOptions(collapse_subjaxprs=False),
                                     GraphOptions(max_nodes=2000)], ids=["expand", "max_nodes"])
def test_what_the_user_asked_for_is_drawn_as_asked(options):
    stage = _loop_stage(depth=3, width=150)
    drawn = collect_jaxpr(stage, options=options)
    assert len(drawn.nodes) > DEFAULT_BODY_NODES
    assert not any(n.startswith("drawn with") for n in drawn.notes)


def test_a_small_or_flat_graph_is_drawn_whole():
    small = collect_jaxpr(_loop_stage(depth=2, width=5))
    assert small.clusters and not any(n.startswith("drawn with") for n in small.notes)
