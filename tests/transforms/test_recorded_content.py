"""What a record() block records: levels, steps, tracers, sources, scopes (saving and loading
it: test_saved_sessions.py)."""
from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from corpus import (
    CASES,
    LOG1PEXP_JVP_LINE,
    NN_X,
    VEC,
    clipped_cube,
    cond_fn,
    log1pexp,
    log1pexp_jvp,
    scan_fn,
    sin_times,
    uncached,
    while_fn,
)
from sweeps import sweep

import transforms


def _line(func, fragment: str) -> int:
    """The line of `func`'s source that contains `fragment`."""
    lines, start = inspect.getsourcelines(func)
    hits = [start + i for i, text in enumerate(lines) if fragment in text]
    assert len(hits) == 1, (fragment, hits)
    return hits[0]


def _labels(call) -> list[str]:
    return [level.label for level in call.levels]


def _level(call, label: str):
    found = [level for level in call.levels if level.label == label]
    assert len(found) == 1, (label, _labels(call))
    return found[0]


def double(x):
    return x * 2


def sin_mul(x):
    y = jnp.sin(x)
    return y * x


# --- tracers -------------------------------------------------------------------

def test_vmap_records_batched_inputs():
    with transforms.record() as session:
        out = transforms.vmap(double)(jnp.arange(3))
    np.testing.assert_array_equal(out, [0, 2, 4])
    (call,) = session.calls
    assert (call.transform, call.function) == ("vmap", "double")
    assert _labels(call) == ["eval#0", "vmap#1"]
    vmap_level = _level(call, "vmap#1")
    assert vmap_level.kind == "vmap" and vmap_level.function == "double"
    assert ("in_axes", "0") in vmap_level.options
    steps = list(call.steps_at(vmap_level.index))
    assert steps, "the multiply is recorded at the vmap level"
    x = steps[0].inputs[0]
    assert x.kind == "batched" and x.is_tracer
    assert x.aval == "int32[]"
    assert x.child("val").aval == "int32[3]"
    assert x.batch_dim == 0
    assert x.level == vmap_level.index
    assert x.describe() == "VmapTracer(aval=int32[], batched=int32[3], batch_dim=0)"
    # The call's own inputs are the concrete arguments.
    assert [(v.kind, v.aval) for v in call.inputs] == [("array", "int32[3]")]
    assert [v.aval for v in call.outputs] == ["int32[3]"]
    assert call.in_tree == str(jax.tree_util.tree_structure(((jnp.arange(3),), {})))


def test_vmap_in_axes_1_records_batch_dim_1():
    with transforms.record() as session:
        transforms.vmap(double, in_axes=1)(jnp.ones((2, 4)))
    (call,) = session.calls
    x = next(call.steps_at(1)).inputs[0]
    assert (x.aval, x.child("val").aval, x.batch_dim) == ("float32[2]", "float32[2,4]", 1)


def test_grad_records_linearize_tracers_with_primal_and_tangent():
    with transforms.record() as session:
        transforms.grad(sin_mul)(0.3)
    (call,) = session.calls
    assert _labels(call) == ["eval#0", "grad#1"]
    grad_level = _level(call, "grad#1")
    assert (grad_level.kind, grad_level.trace_type) == ("grad", "LinearizeTrace")
    inputs = [v for s in call.steps_at(grad_level.index) for v in s.inputs if v.is_tracer]
    assert inputs
    for v in inputs:
        assert v.kind == "linearize"
        assert [name for name, _ in v.children] == ["primal", "tangent"]
        assert v.child("primal").aval == v.aval == "float32[]"
        assert v.child("tangent").is_tracer
        assert v.describe().startswith("GradTracer(primal=")
    assert inputs[0].child("primal").value == "0.3"


def test_vmap_of_grad_nests_grad_tracers_around_vmap_tracers():
    with transforms.record() as session:
        out = transforms.vmap(transforms.grad(sin_mul))(VEC)
    np.testing.assert_array_equal(out, jax.vmap(jax.grad(sin_mul))(VEC))
    (call,) = session.calls
    assert _labels(call) == ["eval#0", "vmap#1", "vmap#1/grad#2"]
    inner = _level(call, "vmap#1/grad#2")
    assert inner.kind == "grad" and inner.parent == _level(call, "vmap#1").index
    first = next(call.steps_at(inner.index))
    x = first.inputs[0]
    assert x.describe().startswith("GradTracer(primal=VmapTracer(")
    assert x.child("primal").kind == "batched"
    assert x.child("primal").child("val").aval == "float32[3]"


def test_jvp_records_jvp_tracers():
    with transforms.record() as session:
        transforms.jvp(sin_mul, (0.3,), (1.0,))
    (call,) = session.calls
    assert call.transform == "jvp"
    tracers = [v for s in call.steps_at(1) for v in s.inputs if v.is_tracer]
    assert tracers and all(v.kind == "jvp" for v in tracers)
    assert tracers[0].describe().startswith("JVPTracer(primal=")


# --- phases and sources ----------------------------------------------------------

def test_grad_backward_pass_is_recorded_at_the_outer_level():
    with transforms.record() as session:
        transforms.grad(sin_mul)(0.3)
    (call,) = session.calls
    backward = [s for s in call.steps if s.phase == "backward"]
    forward = [s for s in call.steps if s.phase == "forward"]
    assert backward and forward
    assert {s.level for s in backward} == {0}
    assert {s.level for s in call.steps_at(1)} == {1}
    assert all(s.phase == "forward" for s in call.steps_at(1))
    assert max(s.index for s in forward) < min(s.index for s in backward)
    # x is used twice: its two cotangents are accumulated by add_any, backwards.
    assert "add_any" in {s.primitive for s in backward}


def _after_inner_grad(x):
    g = transforms.grad(jnp.sin)(x)
    return g * x


def test_forward_code_after_an_inner_grad_is_forward_again():
    with transforms.record() as session:
        out = transforms.vmap(_after_inner_grad)(VEC)
    np.testing.assert_array_equal(out, jax.vmap(lambda x: jax.grad(jnp.sin)(x) * x)(VEC))
    (call,) = session.calls
    vmap_steps = list(call.steps_at(_level(call, "vmap#1").index))
    phases = [s.phase for s in vmap_steps]
    assert "backward" in phases
    last = vmap_steps[-1]
    assert last.phase == "forward"
    assert last.source.line == _line(_after_inner_grad, "g * x")
    # Forward, then the inner grad's backward pass, then forward again.
    first_back = phases.index("backward")
    resumed = len(phases) - 1 - phases[::-1].index("backward") + 1
    assert set(phases[:first_back]) == {"forward"}
    assert set(phases[first_back:resumed]) == {"backward"}
    assert set(phases[resumed:]) == {"forward"}


def test_jax_transforms_alone_record_nothing():
    with transforms.record() as session:
        jax.vmap(jax.grad(sin_mul))(VEC)
        jax.jit(sin_mul)(0.3)
    assert session.calls == []


def test_steps_carry_the_users_source_line():
    here = inspect.currentframe().f_lineno
    with transforms.record() as session:
        transforms.grad(sin_mul)(0.3)
    call_line = here + 2
    (call,) = session.calls
    assert call.source.file == __file__ and call.source.line == call_line
    forward = [s for s in call.steps if s.phase == "forward"]
    sin_line = _line(sin_mul, "jnp.sin(x)")
    mul_line = _line(sin_mul, "y * x")
    assert {(s.source.file, s.source.line) for s in forward} == {(__file__, sin_line),
                                                                 (__file__, mul_line)}
    assert all(s.source.function == "sin_mul" for s in forward)
    assert [s.source.line for s in call.steps_at(1)] == [sin_line, mul_line]


def test_custom_jvp_rule_steps_point_into_the_rule():
    with transforms.record() as session:
        transforms.grad(log1pexp)(3.0)
    (call,) = session.calls
    rule_levels = [lv for lv in call.levels if lv.kind == "custom_jvp_rule"]
    assert [lv.function for lv in rule_levels] == ["log1pexp_jvp"]
    steps = list(call.steps_at(rule_levels[0].index))
    assert steps and {s.phase for s in steps} == {"rule"}
    first, last = LOG1PEXP_JVP_LINE, LOG1PEXP_JVP_LINE + len(inspect.getsource(log1pexp_jvp)
                                                              .splitlines())
    lines = {s.source.line for s in steps}
    assert all(first <= line < last for line in lines), (lines, first, last)
    assert {s.source.function for s in steps} == {"log1pexp_jvp"}


def test_custom_vjp_fwd_steps_point_into_the_fwd_rule():
    from corpus_functions import sin_times_fwd
    with transforms.record() as session:
        transforms.grad(sin_times)(0.5, 2.0)
    (call,) = session.calls
    (fwd,) = [lv for lv in call.levels if lv.kind == "custom_vjp_fwd"]
    steps = list(call.steps_at(fwd.index))
    assert steps
    lines, start = inspect.getsourcelines(sin_times_fwd)
    assert {(s.source.function, s.source.line) for s in steps} == {
        ("sin_times_fwd", start + 1)}


def test_custom_vjp_fwd_is_a_rule_level():
    with transforms.record() as session:
        transforms.grad(sin_times)(0.5, 2.0)
    (call,) = session.calls
    fwd = [lv for lv in call.levels if lv.kind == "custom_vjp_fwd"]
    assert [lv.function for lv in fwd] == ["sin_times_fwd"]
    assert [s.kind for s in call.steps_at(1)][:1] == ["custom_vjp_call"]
    assert {s.phase for s in call.steps_at(fwd[0].index)} == {"rule"}


def test_custom_jvp_call_step_and_rule_level():
    with transforms.record() as session:
        transforms.vmap(transforms.grad(log1pexp))(jnp.array([0., 100.]))
    (call,) = session.calls
    calls = [s for s in call.steps if s.kind == "custom_jvp_call"]
    assert calls and calls[0].level == _level(call, "vmap#1/grad#2").index
    rules = [lv for lv in call.levels if lv.kind == "custom_jvp_rule"]
    assert rules and rules[0].label.startswith("vmap#1/grad#2/custom_jvp_rule#")


# --- jit -------------------------------------------------------------------------

def poly(x):
    return jnp.sin(x) * x + 1.0


def test_jit_records_its_first_trace_only():
    f = transforms.jit(poly)
    with transforms.record() as session:
        f(jnp.ones(3))
        f(jnp.ones(3) * 2)  # same shape and dtype: cached, no Python runs
        assert len(session.calls) == 1
        f(jnp.ones(4))  # a new shape traces again
        assert len(session.calls) == 2
    first = session.calls[0]
    assert (first.transform, first.function) == ("jit", "poly")
    assert first.levels[0].trace_type == "DynamicJaxprTrace"
    tracers = [v for s in first.steps for v in s.inputs if v.is_tracer]
    assert tracers and {v.kind for v in tracers} == {"jaxpr"}
    assert tracers[0].describe() == "JitTracer(float32[3])"


def test_jit_traced_outside_record_is_traced_and_recorded_once_inside():
    # JAX's caches are keyed on the block: its first call traces (and records) again,
    # later calls in the block are JAX's cache hits, recording nothing more.
    f = transforms.jit(poly)
    f(jnp.ones(5))
    with transforms.record() as session:
        out = f(jnp.ones(5))
        f(jnp.ones(5))
    np.testing.assert_array_equal(out, jax.jit(poly)(jnp.ones(5)))
    assert [c.transform for c in session.calls] == ["jit"]


@pytest.mark.parametrize("outer", ["transforms", "jax"])
def test_jit_step_keeps_the_jaxpr_of_the_function(outer):
    jit = transforms.jit if outer == "transforms" else jax.jit
    with transforms.record() as session:
        transforms.vmap(jit(poly))(VEC)
    (call,) = session.calls
    vmap_level = _level(call, "vmap#1")
    jit_steps = [s for s in call.steps_at(vmap_level.index) if s.primitive in ("jit", "pjit")]
    assert len(jit_steps) == 1
    (sub,) = jit_steps[0].subjaxprs
    expected = jax.make_jaxpr(poly)(1.0)
    assert sub.name == "jaxpr"
    assert sub.eqn_count == len(expected.jaxpr.eqns)
    assert sub.in_avals == ("float32[]",) and sub.out_avals == ("float32[]",)
    assert dict(jit_steps[0].params)["name"] == "'poly'"


def test_grad_of_jit_records_a_jit_level_inside_the_grad_level():
    with transforms.record() as session:
        transforms.grad(uncached(transforms.jit(poly)))(0.3)
    (call,) = session.calls
    assert _labels(call) == ["eval#0", "grad#1", "grad#1/jit#2"]
    jit_level = _level(call, "grad#1/jit#2")
    assert jit_level.trace_type == "DynamicJaxprTrace" and jit_level.function == "poly"
    assert list(call.steps_at(jit_level.index))


# --- inline_jnp and sub-jaxprs ----------------------------------------------------

def test_default_records_jnp_wrappers_as_jit_steps():
    with transforms.record() as session:
        transforms.grad(sin_mul)(0.3)
    prims = [s.primitive for s in session.calls[0].steps_at(1)]
    assert prims == ["jit", "jit"]
    names = [dict(s.params)["name"] for s in session.calls[0].steps_at(1)]
    assert names == ["'sin'", "'multiply'"]


def test_inline_jnp_records_the_primitives_inside_jnp_wrappers():
    with transforms.record(inline_jnp=True) as session:
        out = transforms.grad(sin_mul)(0.3)
    assert out == jax.grad(sin_mul)(0.3)
    call = session.calls[0]
    assert [s.primitive for s in call.steps_at(1)] == ["sin", "mul"]
    assert "jit" not in {s.primitive for s in call.steps}
    assert "cos" in {s.primitive for s in call.steps_at(0)}


def test_cond_keeps_its_branches():
    with transforms.record() as session:
        transforms.grad(cond_fn)(0.3)
    cond_steps = [s for s in session.calls[0].steps if s.primitive == "cond"]
    assert cond_steps
    for s in cond_steps:
        assert [j.name for j in s.subjaxprs] == ["branches[0]", "branches[1]"]
        assert all(j.eqn_count > 0 for j in s.subjaxprs)


def test_scan_and_while_keep_their_bodies():
    with transforms.record() as session:
        transforms.vmap(scan_fn)(jnp.ones((2, 3)))
        transforms.vmap(while_fn)(jnp.array([1., 3.]))
    scan, while_ = session.calls
    scan_steps = [s for s in scan.steps if s.primitive == "scan"]
    assert scan_steps and all([j.name for j in s.subjaxprs] == ["jaxpr"] for s in scan_steps)
    assert all(s.subjaxprs[0].eqn_count > 0 for s in scan_steps)
    while_steps = [s for s in while_.steps if s.primitive == "while"]
    assert while_steps
    assert {j.name for s in while_steps for j in s.subjaxprs} == {"cond_jaxpr", "body_jaxpr"}


def test_checkpoint_and_custom_vjp_are_recorded_as_steps():
    with transforms.record() as session:
        transforms.grad(lambda x: jnp.sum(jax.checkpoint(jnp.sin)(x)))(NN_X)
        transforms.grad(clipped_cube)(1.0)
    remat = {s.primitive for s in session.calls[0].steps}
    assert remat & {"remat", "checkpoint", "remat2"}, remat
    assert "custom_vjp_call" in {s.kind for s in session.calls[1].steps}


# --- sessions: scope ----------------------------------------------------------------

def test_transforms_made_outside_record_are_recorded_when_called_inside():
    g = transforms.grad(sin_mul)
    g(0.3)
    with transforms.record() as session:
        g(0.3)
    assert [c.function for c in session.calls] == ["sin_mul"]
    assert g(0.3) == jax.grad(sin_mul)(0.3)
    assert [c.function for c in session.calls] == ["sin_mul"], "nothing recorded after the block"


def test_nested_record_blocks_record_into_the_innermost_session():
    with transforms.record() as outer:
        transforms.grad(sin_mul)(0.3)
        with transforms.record() as inner:
            transforms.vmap(double)(jnp.arange(2))
        transforms.grad(sin_mul)(0.5)
    assert [c.transform for c in outer.calls] == ["grad", "grad"]
    assert [c.transform for c in inner.calls] == ["vmap"]
    assert [c.index for c in outer.calls] == [0, 1]


def test_record_stops_recording_after_an_exception_in_the_block():
    with pytest.raises(RuntimeError, match="boom"):
        with transforms.record() as session:
            transforms.grad(sin_mul)(0.3)
            raise RuntimeError("boom")
    transforms.grad(sin_mul)(0.3)
    assert len(session.calls) == 1


def test_session_metadata():
    with transforms.record() as session:
        transforms.grad(sin_mul)(0.3)
    assert session.jax_version == jax.__version__
    assert session.schema_version == transforms.SCHEMA_VERSION
    assert session.step_count == len(session.calls[0].steps) > 0


@pytest.mark.parametrize("case", sweep(CASES, [c.name for c in CASES]))
def test_structural_invariants_and_round_trip(case, tmp_path):
    """Indices, parents, causes and levels of every recorded call are consistent,
    and the session survives save and load unchanged."""
    with transforms.record() as session:
        try:
            case.run(transforms)
        except Exception:  # noqa: BLE001 - error cases are checked in test_oracle
            pass
    assert session.calls
    for i, call in enumerate(session.calls):
        assert call.index == i
        assert [lv.index for lv in call.levels] == list(range(len(call.levels)))
        for lv in call.levels:
            if lv.parent is None:
                continue
            parent = call.levels[lv.parent]
            assert lv.parent < lv.index
            assert lv.depth == parent.depth + 1, (lv, parent)
            if parent.depth > 0:
                assert lv.label.startswith(parent.label + "/"), (lv.label, parent.label)
        assert [s.index for s in call.steps] == list(range(len(call.steps)))
        for s in call.steps:
            assert 0 <= s.level < len(call.levels)
            assert s.phase in ("forward", "backward", "rule")
            if s.cause is not None:
                assert 0 <= s.cause < len(call.steps)
                if s.kind != "error":
                    assert s.cause < s.index
            for v in s.inputs + s.outputs:
                if v.level is not None:
                    assert 0 <= v.level < len(call.levels)
        for e in call.errors:
            assert e.step is None or 0 <= e.step < len(call.steps)
            assert e.level is None or 0 <= e.level < len(call.levels)
    path = tmp_path / f"{case.name}.json"
    session.save(path)
    assert transforms.load(path) == session


# --- scopes, nesting, lifetime ------------------------------------------------------

def _scoped(x):
    with jax.named_scope("my_scope"):
        y = jnp.sin(x)
    return y * 2


def test_steps_keep_the_name_stack():
    with transforms.record() as session:
        transforms.vmap(_scoped)(VEC)
    (call,) = session.calls
    sin_step, mul_step = list(call.steps_at(1))
    assert "my_scope" in sin_step.name_stack
    assert "my_scope" not in mul_step.name_stack
    assert sin_step.name_stack.startswith("vmap(")
    assert (sin_step.scope, mul_step.scope) == ("my_scope", "")


def _records_inside(x):
    with transforms.record() as inner:
        y = transforms.vmap(jnp.sin)(x)
    _records_inside.inner = inner
    return (y * x).sum()


def test_record_block_inside_a_transformed_function():
    with transforms.record() as outer:
        out = transforms.grad(_records_inside)(VEC)
    np.testing.assert_array_equal(
        out, jax.grad(lambda x: (jax.vmap(jnp.sin)(x) * x).sum())(VEC))
    assert [(c.transform, c.function) for c in outer.calls] == [("grad", "_records_inside")]
    inner = _records_inside.inner
    assert [(c.transform, c.function) for c in inner.calls] == [("vmap", "sin")]
    assert all(c.ok for c in outer.calls + inner.calls)


@pytest.mark.slow
def test_recorders_are_released_when_the_block_ends():
    """No recorder outlives its call: JAX's caches must not keep a recording alive."""
    import gc

    from transforms._jax import RecordingTrace

    def alive():
        gc.collect()
        return sum(isinstance(o, RecordingTrace) for o in gc.get_objects())

    before = alive()
    with transforms.record():
        transforms.jit(transforms.grad(log1pexp))(2.0)
        transforms.vmap(transforms.grad(sin_times))(VEC, VEC)
        transforms.grad(clipped_cube)(0.3)
        transforms.vmap(transforms.grad(cond_fn))(VEC)
        transforms.vmap(scan_fn)(jnp.ones((2, 3)))
    assert alive() == before


def _scope_named_vmap(x):
    with jax.named_scope("vmap"):
        return jax.lax.sin(x).sum()


def test_a_scope_and_a_transformation_of_one_name_keep_their_own_name_stacks():
    # JAX's NameStack == takes Scope("vmap") for Transform("vmap") (both are NamedTuples):
    # a text cached by it would print one stack as the other.
    with transforms.record() as session:
        transforms.grad(lambda x: jax.vmap(jax.lax.sin)(x).sum())(VEC)
        transforms.grad(_scope_named_vmap)(VEC)
    stacks = [{s.name_stack for s in call.steps if s.primitive == "sin"} for call in session.calls]
    assert stacks == [{"jvp(vmap())"}, {"jvp(vmap)"}]


@jax.custom_jvp
def _clipped(x):
    with jax.named_scope("clip"):
        return jnp.clip(x, -1.0, 1.0)


_clipped.defjvp(lambda primals, tangents: (_clipped(primals[0]), tangents[0]))


def test_a_level_jax_traces_with_a_fresh_name_stack_keeps_the_scope_it_ran_in():
    """JAX traces a custom_jvp's body (and a jit's) to a jaxpr of its own with the name stack
    started afresh: its steps carry the scope of the step that ran it, as JAX's final program
    names them, and their own scopes under it."""
    def f(x):
        with jax.named_scope("block"):
            return jnp.sum(_clipped(jnp.sin(x)))

    with transforms.record() as session:
        transforms.jit(f)(VEC)
    (call,) = session.calls
    (body,) = [lv for lv in call.levels if lv.kind == "custom_jvp_fun"]
    bound = {s.scope for s in call.steps if s.level == body.index}
    assert bound == {"block/clip"}
    assert {s.scope for s in call.steps if s.kind == "custom_jvp_call"} == {"block"}
    with transforms.record() as session:  # no fresh stack under grad: scopes as they were
        transforms.grad(f)(1.0)
    call = session.calls[0]
    bodies = {lv.index for lv in call.levels if lv.kind == "custom_jvp_fun"}
    assert {s.scope for s in call.steps if s.level in bodies} == {"block/clip"}
