"""Failure diagnostics: the pre-trace pytree check, structure mismatches with
both trees, and tracer errors explained. JAX's exception always reaches the
user unchanged (jax.* is the oracle)."""
from __future__ import annotations

from collections import namedtuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from corpus import (
    ABSOLUTE_IF_LINE,
    CASES_BY_NAME,
    CONTAINER,
    PIECEWISE_IF_LINE,
    assert_same_error,
    outcome,
    test_func,
    uncached,
)
from jax import lax

import transforms as T
from transforms._trees._diagnose import check_inputs

# Seed 000 exactly as posted: repack_NTC returns `value`, a name never defined.
NTBroken = namedtuple("NTBroken", ["name", "flag", "array"])


def unpack_NTC(c):
    active, passive = (c.array,), (c.name, c.flag)
    return active, passive


def repack_NTC(passive, active):
    (name, flag), (array,) = passive, active  # noqa: F841 - the seed's code, kept
    return NTBroken(name, flag, value)  # noqa: F821 - the seed's bug, kept on purpose


REPACK_VALUE_LINE = repack_NTC.__code__.co_firstlineno + 2
jax.tree_util.register_pytree_node(NTBroken, unpack_NTC, repack_NTC)
BROKEN = NTBroken("composite-container", 0, CONTAINER.array)


def broken_func(container):
    if container.flag == 0:
        return container.array.sum()
    return container.array.prod()


def recorded(fn):
    """Run fn under a recording session: (outcome, session)."""
    with T.record() as session:
        result = outcome(fn)
    return result, session


def only_error(session):
    errors = [e for c in session.calls for e in c.errors]
    assert len(errors) == 1, errors
    return errors[0]


# --- the pre-trace check --------------------------------------------------------------

def test_seed000_undefined_name_is_reported_with_file_line_and_name():
    ours, session = recorded(lambda: T.grad(broken_func)(BROKEN))
    theirs = outcome(lambda: jax.grad(broken_func)(BROKEN))
    assert_same_error(ours.error, theirs.error)           # JAX's NameError, unchanged
    assert type(ours.error) is NameError
    (call,) = session.calls
    (d,) = call.diagnostics
    assert d.kind == "undefined_name"
    assert d.names == ("value",)
    assert d.function == "repack_NTC"
    assert d.source.file == __file__ and d.source.line == REPACK_VALUE_LINE
    assert d.node_type.endswith("NTBroken") and d.path == "container"
    # The error record points at the finding.
    error = only_error(session)
    assert error.rule == "pytree_function" and error.function == "repack_NTC"
    assert f"{__file__}:{REPACK_VALUE_LINE}" in error.hint and "`value`" in error.hint


@pytest.mark.parametrize("transform", ["jit", "vmap", "grad"])
def test_seed000_fixed_repack_has_no_findings(transform):
    _, session = recorded(lambda: uncached(getattr(T, transform)(test_func))(CONTAINER))
    assert session.calls[-1].diagnostics == ()


def test_seed000_under_jit_is_recorded_before_jax_s_unflatten_raises():
    # jax.jit unflattens the arguments before our function runs: the check
    # runs when JAX binds the signature on its cache miss.
    jitted = T.jit(broken_func)
    ours, session = recorded(lambda: jitted(BROKEN))
    theirs = outcome(lambda: jax.jit(broken_func)(BROKEN))
    assert_same_error(ours.error, theirs.error)
    assert type(ours.error) is NameError
    (call,) = session.calls
    assert call.transform == "jit" and call.function == "broken_func"
    assert call.source.file == __file__
    (d,) = call.diagnostics
    assert (d.kind, d.names, d.function, d.path) == ("undefined_name", ("value",), "repack_NTC",
                                                     "container")
    assert d.source.file == __file__ and d.source.line == REPACK_VALUE_LINE
    error = only_error(session)
    assert error.type_name == "NameError" and error.message == str(theirs.error)
    assert error.rule == "pytree_function" and error.function == "repack_NTC"
    assert f"{__file__}:{REPACK_VALUE_LINE}" in error.hint and "`value`" in error.hint
    (tree,) = [t for t in call.trees if t.role == "input"]
    assert tree.nodes[0].type_name.endswith("NTBroken") and tree.nodes[0].aux


def test_jit_check_on_bind_with_static_args_lower_and_no_session():
    jitted = T.jit(lambda c, n: c.array.sum() * n, static_argnums=1)
    assert outcome(lambda: jitted(BROKEN, 2)).error is not None  # not recording: nothing kept
    ours, session = recorded(lambda: jitted.lower(BROKEN, 3))
    assert type(ours.error) is NameError
    (call,) = session.calls
    assert call.diagnostics[0].names == ("value",) and call.errors[0].rule == "pytree_function"


def test_jit_with_a_fixed_unflatten_records_one_trace_and_no_findings():
    jitted = uncached(T.jit(test_func))
    with T.record() as session:
        first = jitted(CONTAINER)
        again = jitted(CONTAINER)  # cached: JAX binds nothing, we record nothing
    assert float(first) == float(again) == float(jax.jit(test_func)(CONTAINER))
    (call,) = session.calls
    assert call.diagnostics == () and call.errors == ()
    import inspect
    assert inspect.signature(jitted) == inspect.signature(test_func)


def test_check_runs_before_tracing_and_needs_no_transform():
    (d,) = check_inputs((BROKEN,), {}, ["c"])
    assert (d.kind, d.names, d.path) == ("undefined_name", ("value",), "c")


class Plain:
    def __init__(self, a, aux):
        self.a, self.aux = a, aux


jax.tree_util.register_pytree_node(Plain, lambda p: ((p.a,), p.aux),
                                   lambda aux, ch: Plain(ch[0], aux))


class Swapped:
    def __init__(self, a, b):
        self.a, self.b = a, b


jax.tree_util.register_pytree_node(Swapped, lambda s: ((s.a, s.b), None),
                                   lambda aux, ch: (ch[1], ch[0]))  # rebuilds a tuple


class Unflat:
    def __init__(self, a):
        self.a = a


def unflat_raises(aux, ch):
    raise TypeError("unflatten broke")


jax.tree_util.register_pytree_node(Unflat, lambda u: ((u.a,), None), unflat_raises)


def test_unhashable_aux_is_a_finding_and_grad_still_works():
    ours, session = recorded(lambda: T.grad(lambda p: p.a * 2.)(Plain(1.0, [1, 2])))
    assert ours.error is None and float(ours.value.a) == 2.0
    (d,) = session.calls[0].diagnostics
    assert d.kind == "unhashable_aux" and "[1, 2]" in d.message


def test_roundtrip_that_changes_the_type_is_a_finding():
    (d,) = check_inputs((Swapped(1.0, 2.0),), {}, ["s"])
    assert d.kind == "roundtrip" and "not a" in d.message and d.function == "<lambda>"


def test_unflatten_that_raises_is_diagnosed_and_the_error_is_jax_s():
    ours, session = recorded(lambda: T.grad(lambda u: u.a)(Unflat(1.0)))
    theirs = outcome(lambda: jax.grad(lambda u: u.a)(Unflat(1.0)))
    assert_same_error(ours.error, theirs.error)
    (d,) = session.calls[0].diagnostics
    assert d.kind == "unflatten_error" and d.function == "unflat_raises"
    error = only_error(session)
    assert error.rule == "pytree_function" and "unflat_raises" in error.hint


# --- structure mismatches, with both trees ------------------------------------------------

def test_seed002_primal_and_tangent_trees_are_captured():
    case = CASES_BY_NAME["seed002_primal_tangent_grad"]
    ours, session = recorded(lambda: case.run(T))
    assert_same_error(ours.error, outcome(lambda: case.run(jax)).error)
    error = only_error(session)
    pair = error.mismatch
    assert error.rule == "structure_mismatch" and error.function == "init_jvp"
    assert pair.kind == "custom_jvp"
    assert pair.left.root.type_name.endswith("Primal")
    assert pair.right.root.type_name.endswith("Tangent")
    assert pair.first_difference == ""  # the roots differ
    assert [n.path for n in pair.left.leaves] == [".x"]
    assert [n.path for n in pair.right.leaves] == [".sign", ".norm"]
    assert [(r.path, r.status) for r in pair.rows] == [
        ("", "differs"), (".x", "left_only"), (".sign", "right_only"), (".norm", "right_only")]
    assert "Primal with children .x" in error.hint


def _branches(x):
    return lax.cond(x > 0, lambda v: {"a": v, "b": v}, lambda v: {"a": v, "c": v}, x)


def _carry(xs):
    return lax.scan(lambda c, x: ((c, c), x), 0.0, xs)


@jax.custom_vjp
def _vjp_fn(x, y):
    return x * y


_vjp_fn.defvjp(lambda x, y: (_vjp_fn(x, y), (x, y)), lambda res, g: (g,))

MISMATCHES = {
    # name: (build(T) -> thunk, kind, first difference, left has, right has)
    "cond": (lambda T: lambda: T.jit(_branches)(1.0),
             "cond", "", "['a'], ['b']", "['a'], ['c']"),
    "scan": (lambda T: lambda: T.jit(_carry)(jnp.ones(3)), "scan", "", "a leaf float32[]",
             "a tuple with children [0], [1]"),
    "vmap_in_axes": (lambda T: lambda: T.vmap(lambda d: d["b"], in_axes=({"a": 0},))(
        {"b": jnp.ones(3)}), "vmap_in_axes", "[0]", "['a']", "['b']"),
    "vmap_out_axes": (lambda T: lambda: T.vmap(lambda x: (x, x), out_axes=(0, 0, 0))(
        jnp.ones(3)), "vmap_out_axes", "", "[0], [1], [2]", "[0], [1]"),
    "custom_vjp": (lambda T: lambda: T.grad(_vjp_fn)(1.0, 2.0), "custom_vjp", "",
                   "[0], [1]", "tuple with children [0]"),
}


@pytest.mark.parametrize("name", sorted(MISMATCHES))
def test_structure_mismatch_names_the_first_difference(name):
    build, kind, first, left_has, right_has = MISMATCHES[name]
    ours, session = recorded(build(T))
    theirs = outcome(build(jax))
    assert_same_error(ours.error, theirs.error)
    pair = only_error(session).mismatch
    assert pair is not None and pair.kind == kind
    assert pair.first_difference == first
    assert left_has in pair.left_has and right_has in pair.right_has
    assert pair.summary.startswith("first difference")


# --- tracer errors and other failures ---------------------------------------------------------

def _int_of(x):
    return jnp.zeros(int(x))


def _np_of(x):
    return np.asarray(x) + 1


def _index_with(i):
    return [1.0, 2.0, 3.0][i]


def _ones_of(x, n):
    return jnp.ones(n) * x


LEAKED = []


def _leak(x):
    LEAKED.append(x)
    return x * 2


FAILURES = {
    # name: (build(T) -> thunk, rule, level label, argument, words the hint must name)
    "bool_vmap": (lambda T: lambda: CASES_BY_NAME["seed003_absolute_if_vmap"].run(T),
                  "bool_conversion", "vmap#1", "x", ("jnp.where", "lax.cond")),
    "bool_jit_grad": (lambda T: lambda: CASES_BY_NAME["seed003_piecewise_jit_grad"].run(T),
                      "bool_conversion", "jit#1", "x", ("static_argnums", "jax.debug.print")),
    "concretization": (lambda T: lambda: T.jit(_int_of)(3.0), "concretization", "jit#1", "x",
                       ("static_argnums",)),
    "integer_conversion": (lambda T: lambda: T.jit(_index_with)(1), "integer_conversion",
                           "jit#1", "i", ("jnp.take", "static_argnums")),
    "array_conversion": (lambda T: lambda: T.jit(_np_of)(1.0), "array_conversion", "jit#1", "x",
                         ("jax.numpy", "jax.pure_callback")),
    "leaked_tracer": (lambda T: lambda: T.grad(lambda y: y * LEAKED[0])(1.0), "leaked_tracer",
                      "grad#1", "", ("jax.checking_leaks",)),
    "non_scalar_grad": (lambda T: lambda: T.grad(lambda x: x * 2.)(jnp.ones(3)),
                        "non_scalar_grad", "eval#0", "", ("jax.jacrev", ".sum()")),
    "traced_shape": (lambda T: lambda: T.jit(_ones_of)(1.0, 3), "traced_shape", "jit#1", "n",
                     ("static_argnums",)),
    "integer_input_grad": (lambda T: lambda: T.grad(jnp.sin)(1), "integer_input_grad",
                           "eval#0", "", ("allow_int",)),
}


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_failure_is_explained(name):
    build, rule, level_label, argument, fixes = FAILURES[name]
    if name == "leaked_tracer" and not LEAKED:
        jax.grad(_leak)(1.0)
    ours, session = recorded(build(T))
    theirs = outcome(build(jax))
    assert theirs.error is not None
    assert_same_error(ours.error, theirs.error)
    error = only_error(session)
    assert error.rule == rule
    assert error.level_label == level_label
    assert error.argument == argument
    for fix in fixes:
        assert fix in error.hint


LEAKED_TRACER = "GradTracer(primal=1.0, tangent=JitTracer(float32[]))"


def _use_leaked(y):
    return y * LEAKED[0]


@pytest.mark.parametrize("transform", ["grad", "jit", "vmap"])
def test_leaked_tracer_is_described_with_its_transformation_and_line(transform):
    if not LEAKED:
        jax.grad(_leak)(1.0)
    arg = jnp.ones(2) if transform == "vmap" else 1.0
    ours, session = recorded(lambda: getattr(T, transform)(_use_leaked)(arg))
    theirs = outcome(lambda: getattr(jax, transform)(_use_leaked)(arg))
    assert type(theirs.error) is jax.errors.UnexpectedTracerError
    assert_same_error(ours.error, theirs.error)
    (call,) = session.calls
    # JAX raises while tracing, or (jit on jax 0.10) only when it runs the traced
    # program: then the finding made while tracing is what the call keeps.
    found = [e.tracer for e in call.errors] + \
        [d.message for d in call.diagnostics if d.kind == "leaked_tracer"]
    assert found and all(LEAKED_TRACER in text for text in found), found
    for error in call.errors:
        assert error.rule == "leaked_tracer" and error.source.function == "_use_leaked"
    for d in call.diagnostics:
        assert d.source.function == "_use_leaked" and "that had already ended" in d.message


def test_no_leak_is_reported_for_tracers_of_enclosing_jax_transformations():
    with T.record() as session:
        jax.vmap(jax.grad(lambda v: T.vmap(jnp.sin)(v).sum()))(jnp.ones((2, 3)))
        jax.jit(lambda x: T.grad(lambda y: y * x)(1.0))(2.0)
    assert [d for c in session.calls for d in c.diagnostics] == []


def test_bool_conversion_under_vmap_names_tracer_batch_dim_and_line():
    _, session = recorded(lambda: CASES_BY_NAME["seed003_absolute_if_vmap"].run(T))
    error = only_error(session)
    assert error.batch_dim == 0 and error.transform == "vmap"
    assert error.tracer.startswith("VmapTracer(aval=bool[]")
    assert error.source.line == ABSOLUTE_IF_LINE and error.source.function == "absolute_if"


def test_bool_conversion_under_jit_of_grad_names_the_jit_tracer():
    _, session = recorded(lambda: CASES_BY_NAME["seed003_piecewise_jit_grad"].run(T))
    error = only_error(session)
    assert error.tracer.startswith("JitTracer(bool[])") or "JitTracer" in error.tracer
    assert error.function == "piecewise" and error.source.line == PIECEWISE_IF_LINE


def test_session_with_failures_survives_json(tmp_path):
    _, session = recorded(lambda: CASES_BY_NAME["seed002_primal_tangent_grad"].run(T))
    _, more = recorded(lambda: T.grad(broken_func)(BROKEN))
    session.calls.extend(more.calls)
    path = tmp_path / "s.json"
    session.save(path)
    assert T.load(path).calls == session.calls


def test_custom_rule_mismatch_points_at_the_rule_s_return_line():
    # The error is raised by JAX after the rule returned, under the call's line; the user's
    # mistake is the rule's return statement (seed 002's init_jvp).
    @jax.custom_jvp
    def f(x):
        return (x,)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), _ = primals, tangents
        return (x,), [x]  # the mismatch: a tuple against a list

    _, session = recorded(lambda: T.grad(lambda x: f(x)[0])(1.0))
    source = only_error(session).source
    assert source is not None and source.function == "f_jvp"
    assert source.line == f_jvp.__code__.co_firstlineno + 3  # the decorator's line first


def test_a_custom_rule_that_raises_keeps_its_own_line():
    @jax.custom_jvp
    def f(x):
        return x

    @f.defjvp
    def f_jvp(primals, tangents):
        raise ValueError("in the rule")

    _, session = recorded(lambda: T.grad(f)(1.0))
    source = only_error(session).source
    assert source is not None and source.line == f_jvp.__code__.co_firstlineno + 2
