"""Facts recorded once, as data (issue 13, item 2): each equation's source as a location
(EqnRecord.location), each equation's line span in its stage's text (Stage.eqn_spans), its
scope path (EqnRecord.scope) and the step each equation was staged from (Stage.eqn_steps),
recorded when the stage is made;
dumps from before the first two get them when loaded; readers read them and never parse the
text or match steps to equations by source line."""
from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import pytest
from jax import lax
from repo_paths import DATA

import transforms as T
from transforms.model import SessionLoadError, SourceLocation, _jaxpr_text, find_stage, loads
from workbench.tui.stage_map import StageMap, eqn_lines, step_primitive


def _branchy(x):
    y = lax.cond(x > 0, jnp.sin, jnp.cos, x)
    return jnp.tanh(y) * 2.0


@pytest.fixture(scope="module")
def recorded():
    with T.record(stages=True) as session:
        T.vmap(T.grad(_branchy))(jnp.arange(3.0))
    return session


def _jaxpr_stages(session):
    return [s for c in session.calls for s in c.stages if s.jaxpr is not None and s.jaxpr.text]


def test_each_equation_has_its_line_span_in_the_stage_text(recorded):
    stages = _jaxpr_stages(recorded)
    assert len(stages) >= 5
    for stage in stages:
        lines = stage.jaxpr.text.split("\n")
        assert len(stage.eqn_spans) == len(stage.eqns) == stage.jaxpr.eqn_count, stage.name
        for (first, last), eqn in zip(stage.eqn_spans, stage.eqns):
            head = lines[first]
            assert head.startswith("    ") and eqn.primitive in head, (stage.name, head)
            assert first <= last
        # the spans tile the equations: the next starts right after; `in` follows the last
        starts = [a for a, _ in stage.eqn_spans]
        assert [b + 1 for _, b in stage.eqn_spans[:-1]] == starts[1:]
        assert lines[stage.eqn_spans[-1][1] + 1].startswith("  in ")
    cond_stage = next(s for s in stages if s.name == "f")
    cond_at = next(i for i, e in enumerate(cond_stage.eqns) if e.primitive == "cond")
    first, last = cond_stage.eqn_spans[cond_at]
    assert last > first  # its branches are printed inside it


def test_each_equation_source_is_a_location_as_well_as_the_text(recorded):
    for stage in _jaxpr_stages(recorded):
        located = [e for e in stage.eqns if e.location is not None]
        assert located, stage.name  # (a branch jnp.cos derived by JAX has no user line)
        for eqn in stage.eqns:
            assert (eqn.location is None) == (eqn.source == ""), eqn
            if eqn.location is not None:
                assert (eqn.location.file, eqn.location.function) == (__file__, "_branchy")
                assert eqn.source.startswith(f"{eqn.location.file}:{eqn.location.line}")
                assert eqn.source.endswith(f"({eqn.location.function})")
            for sub in eqn.subjaxprs:  # jnp.sin as a branch: bound inside JAX, no user line
                assert all((e.location is None) == (e.source == "") for e in sub.eqns)


def test_the_spans_and_locations_survive_a_save_and_load(recorded, tmp_path):
    path = tmp_path / "s.json"
    recorded.save(path)
    assert T.load(path).calls == recorded.calls


def _json_data(session) -> dict:
    return json.loads(json.dumps(session.to_json_dict()))


def _without_text_facts(data: dict) -> dict:
    """A dump as the workbench wrote it before it recorded locations and spans."""
    stage_fields = data["fields"]["Stage"]
    eqn_fields = data["fields"]["EqnRecord"]
    spans, location = stage_fields.index("eqn_spans"), eqn_fields.index("location")

    def strip(rows, at):
        for row in rows:
            del row[at]

    stage_fields.remove("eqn_spans")
    eqn_fields.remove("location")
    for stages in data["tables"]["tuple[Stage, ...]"]:
        strip(stages, spans)
        for stage in stages:
            eqns = stage[stage_fields.index("eqns")]
            stack = [eqns]
            while stack:
                rows = stack.pop()
                strip(rows, location)
                for row in rows:
                    for sub in row[eqn_fields.index("subjaxprs")]:
                        stack.append(sub[data["fields"]["SubJaxprRecord"].index("eqns")])
    return data


def test_a_dump_from_before_them_gets_both_when_loaded(recorded):
    old = _without_text_facts(_json_data(recorded))
    assert "eqn_spans" not in json.dumps(old["fields"])
    loaded = loads(json.dumps(old))
    assert loaded.calls == recorded.calls  # spans and locations derived from the text


def test_a_version_1_dump_gets_them_too():
    old = T.load(DATA / "session_v1.json")
    stage = old.calls[0].stages[0]
    assert stage.eqn_spans and len(stage.eqn_spans) == len(stage.eqns)
    assert all(isinstance(e.location, SourceLocation) for e in stage.eqns if e.source)


def test_spans_that_do_not_fit_the_equations_are_a_load_error(recorded):
    data = _json_data(recorded)
    at = data["fields"]["Stage"].index("eqn_spans")
    stage = next(s for stages in data["tables"]["tuple[Stage, ...]"] for s in stages if s[at])
    stage[at] = stage[at][:-1]
    with pytest.raises(SessionLoadError, match="spans for"):
        loads(json.dumps(data))
    stage[at] = [[3, 2]] + stage[at][1:] + [[99, 99]]
    with pytest.raises(SessionLoadError, match="is not a span"):
        loads(json.dumps(data))


def test_readers_read_the_recorded_spans_and_locations_not_the_text(recorded):
    stage = next(s for s in _jaxpr_stages(recorded) if s.name == "f")
    assert eqn_lines(stage) == [a for a, _ in stage.eqn_spans]
    # Without recorded spans and locations there is nothing to show, whatever the text says.
    bare = dataclasses.replace(stage, eqn_spans=(), eqn_steps=(),
                               eqns=tuple(e._replace(location=None) for e in stage.eqns))
    assert eqn_lines(bare) is None
    assert StageMap(bare).eqns_of_step == {} and StageMap(bare).step_of_eqn(0) is None
    call = recorded.calls[0]
    at = next(i for i, e in enumerate(stage.eqns) if e.primitive == "tanh")
    tanh = call.steps[StageMap(stage).step_of_eqn(at)]  # jnp.tanh's step: jit[name=tanh]
    assert tanh.source.line == stage.eqns[at].location.line
    assert StageMap(bare).eqn_of_step(tanh, lambda i: call.steps[i]) is None
    assert StageMap(stage).eqn_of_step(tanh, lambda i: call.steps[i]) == at


def test_the_text_functions():
    text = ("{ lambda ; a:f32[]. let\n    b:f32[] = sin a\n    c:f32[] = cond[\n"
            "      branches=(...)\n    ] b\n  in (c,) }")
    assert _jaxpr_text.eqn_line_spans(text, 2) == ((1, 1), (2, 4))
    assert _jaxpr_text.eqn_line_spans(text, 3) == ()  # not certain: none
    assert _jaxpr_text.summary_frame("/x/y.py:12:4 (f)") == ("/x/y.py", 12, "f")
    assert _jaxpr_text.summary_frame("/x/y.py:12 (<lambda>)") == ("/x/y.py", 12, "<lambda>")
    assert _jaxpr_text.summary_frame("") is None


# --- the step each equation was staged from (Stage.eqn_steps) ---------------------------------

def _products(x):
    return jnp.sin(x * 2.0) * (x * 3.0)


def test_each_equation_names_the_step_it_was_staged_from():
    """Recorded when the stage is made (each replayed step is bound under its own traceback,
    which JAX gives every equation it stages for it): in f, the step it became; in the
    derivative's stages, the step whose derivative it is (a transpose reverses the order)."""
    with T.record() as session:
        T.grad(_products)(1.0)
    call = session.calls[0]
    stages = {s.name: s for s in call.stages}
    inner = max(lv.index for lv in call.levels)
    user_steps = [st for st in call.steps if st.level == inner]
    f = stages["f"]
    assert f.eqn_steps == tuple(st.index for st in user_steps)
    for eqn, step in zip(f.eqns, user_steps):  # jnp's wrappers stage as their bodies
        assert step_primitive(step) in (eqn.primitive, "jit")
    by_index = {st.index: st for st in call.steps}
    times_two, times_three = (st for st in user_steps if st.title == "jit[name=multiply]"
                              and st.index in (user_steps[0].index, user_steps[2].index))
    for name in ("jvp(f)", "linear(f)", "transpose(linear(f))", "grad(f)"):
        stage = stages[name]
        assert len(stage.eqn_steps) == len(stage.eqns), name
        assert set(stage.eqn_steps) <= {st.index for st in user_steps}, name
        smap = StageMap(stage)
        # x * 2.0's equations hold the literal 2.0, x * 3.0's the literal 3.0: in every
        # stage, whatever order JAX put them in (matching by line and order could not tell).
        for step, literal in ((times_two, "=2.0"), (times_three, "=3.0")):
            eqn = smap.eqn_of_step(step, by_index.get)
            assert literal in stage.eqns[eqn].in_vars, (name, stage.eqns[eqn])
            assert smap.step_of_eqn(eqn) == step.index
    # What grad emitted at the enclosing level links to the equations of the step it came from.
    emitted = next(st for st in call.steps if st.cause == times_three.index)
    eqn = StageMap(stages["grad(f)"]).eqn_of_step(emitted, by_index.get)
    assert "=3.0" in stages["grad(f)"].eqns[eqn].in_vars


def test_equation_steps_survive_a_dump_and_are_checked_on_load():
    with T.record() as session:
        T.grad(_products)(1.0)
    again = loads(session.to_json_text())
    assert [s.eqn_steps for s in again.calls[0].stages] == \
        [s.eqn_steps for s in session.calls[0].stages]
    data = json.loads(session.to_json_text())
    at = data["fields"]["Stage"].index("eqn_steps")
    stage = next(s for stages in data["tables"]["tuple[Stage, ...]"] for s in stages if s[at])
    stage[at] = stage[at][:-1]
    with pytest.raises(SessionLoadError, match="steps for"):
        loads(json.dumps(data))
    # A dump from before the field: no links, and nothing else changes.
    del data["fields"]["Stage"][at]
    for stages in data["tables"]["tuple[Stage, ...]"]:
        for s in stages:
            del s[at]
    old = loads(json.dumps(data))
    assert all(s.eqn_steps == () for s in old.calls[0].stages)


def _trained(p, x):
    y = jnp.tanh(p * x)
    return jnp.sum(y * jnp.sin(x)) + jnp.mean(y)


def test_a_top_level_jit_s_equations_name_their_steps():
    """A plain jit's f stage is JAX's own trace: each step's outputs are the variables of the
    equations JAX staged for it (jnp.mean's body: two equations, one step)."""
    with T.record() as session:
        T.jit(_trained)(jnp.ones(3), jnp.arange(3.0))
    call = session.calls[0]
    (f,) = [s for s in call.stages if s.name == "f"]
    assert len(f.eqn_steps) == len(f.eqns) and min(f.eqn_steps) >= 0
    titles = [call.steps[i].title for i in f.eqn_steps]
    assert titles == ["jit[name=multiply]", "jit[name=tanh]", "jit[name=sin]",
                      "jit[name=multiply]", "jit[name=_reduce_sum]", "jit[name=_mean]",
                      "jit[name=_mean]", "jit[name=add]"]
    assert [e.primitive for e in f.eqns] == ["mul", "tanh", "sin", "mul", "reduce_sum",
                                             "reduce_sum", "div", "add"]
    mean = next(st for st in call.steps if st.title == "jit[name=_mean]")
    assert f.eqns[StageMap(f).eqn_of_step(mean, lambda i: call.steps[i])].primitive == "div"


def _scoped_sin_sum(x):
    with jax.named_scope("encoder"), jax.named_scope("layer_0"):
        y = jnp.sin(x)
    with jax.named_scope("head"):
        y = jax.jit(lambda v: v * 2.0)(y)  # an inner jaxpr's scopes start at the jit
    return y.sum()


def test_each_equation_keeps_its_scope_path_the_transformations_left_out():
    with T.record(stages=True) as session:
        T.grad(_scoped_sin_sum)(jnp.arange(5.0))
    stages = session.calls[0].stages
    grad = find_stage(stages, "grad(f)")
    scopes = {(e.primitive, e.name_stack, e.scope) for e in grad.eqns if e.primitive != "pjit"}
    assert {("sin", "jvp(encoder)/layer_0", "encoder/layer_0"),
            ("cos", "jvp(encoder)/layer_0", "encoder/layer_0"),
            ("reduce_sum", "jvp()", "")} <= scopes
    assert {e.scope for e in grad.eqns if e.primitive in ("mul", "jit", "pjit")} >= {
        "head", "encoder/layer_0"}
    (jit,) = [e for e in find_stage(stages, "f").eqns if e.subjaxprs]
    assert (jit.scope, [e.scope for e in jit.subjaxprs[0].eqns]) == ("head", [""])
