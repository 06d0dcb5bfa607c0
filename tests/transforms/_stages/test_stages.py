"""Stage capture: every stage is the jaxpr (or compiled view) JAX itself makes,
nested wrappers give a chain, and each failing stage is recorded with its error
while the others stay.

The oracle is JAX's own API called directly: `jax.make_jaxpr` of the same
transformation, `jax.linearize(f, x)[1]`, `jax.vjp(f, x)[1]`, `.lower().as_text()`.
"""
from __future__ import annotations

import gc

import corpus
import jax
import jax.numpy as jnp
import pytest
from corpus import (
    CASES,
    CASES_BY_NAME,
    WK,
    WS,
    XS,
    X,
    convolve,
    outcome,
    piecewise,
    sin_twice,
    sum_sq,
    uncached,
    while_fn,
)
from jax.extend.core import Primitive
from jax.interpreters import batching
from sweeps import sweep

import transforms
import transforms._stages._chain as stages_module
from transforms._stages._chain import growth
from transforms.model import GrowthPoint, Metric, PrimitiveCount, Stage, find_stage, load

REVERSE_CHAIN = ("f", "jvp(f)", "linearize(f)", "linear(f)", "transpose(linear(f))", "grad(f)")
JIT_STAGES = ("stablehlo(jit(f))", "hlo(jit(f))", "cost(jit(f))", "memory(jit(f))")


def stages_of(build, *args, **kwargs) -> tuple[Stage, ...]:
    """The stages recorded for one call of a transforms-built function."""
    with transforms.record() as session:
        uncached(build)(*args, **kwargs)
    assert len(session.calls) == 1
    return session.calls[0].stages


def names(stages) -> tuple[str, ...]:
    return tuple(s.name for s in stages)


def sin_sum(x):
    return jnp.sum(jnp.sin(x) * x)


def manually_batched_convolve(xs, ws):
    output = []
    for i in range(xs.shape[0]):
        output.append(convolve(xs[i], ws[i]))
    return jnp.stack(output)


# --- the seed: vmap keeps the program's size, a Python loop grows it ---------

def test_vmap_convolve_is_the_same_program_with_a_batch_axis():
    stages = stages_of(transforms.vmap(convolve), XS, WS)
    assert names(stages) == ("f", "vmap(f)")
    f, batched = stages
    assert f.jaxpr.text == str(jax.make_jaxpr(convolve)(X, WK))
    assert batched.jaxpr.text == str(jax.make_jaxpr(jax.vmap(convolve))(XS, WS))
    assert f.eqn_count == batched.eqn_count == 10
    assert f.jaxpr.in_avals == ("float32[5]", "float32[3]")
    assert batched.jaxpr.in_avals == ("float32[2,5]", "float32[2,3]")
    assert f.histogram == batched.histogram == (
        PrimitiveCount("broadcast_in_dim", 3), PrimitiveCount("dot_general", 3),
        PrimitiveCount("slice", 3), PrimitiveCount("concatenate", 1))
    assert [e.name_stack for e in batched.eqns] == ["vmap()"] * 10
    assert (f.role, f.transform) == ("f", "")
    assert (batched.role, batched.transform) == ("transformed", "vmap")


def test_python_loop_grows_linearly_and_vmap_does_not():
    def args(n):
        return jax.ShapeDtypeStruct((n, 5), jnp.float32), jax.ShapeDtypeStruct((n, 3), jnp.float32)

    g = growth({"loop": manually_batched_convolve, "vmap": transforms.vmap(convolve)}, args)
    loop, vmap = g.series
    # At batch 1 indexing the size-1 axis needs no slice: 13, then 14 more per element.
    assert [p.eqn_count for p in loop.points] == [13, 29, 43, 57]
    assert [p.count("dot_general") for p in loop.points] == [3, 6, 9, 12]
    assert [p.eqn_count for p in vmap.points] == [10, 10, 10, 10]
    assert [p.count("dot_general") for p in vmap.points] == [3, 3, 3, 3]
    assert (loop.per_element, vmap.per_element) == (14.0, 0.0)


def test_growth_records_a_size_that_cannot_be_staged():
    def needs_two(xs):
        if xs.shape[0] < 2:
            raise ValueError("needs a batch of two or more")
        return xs.sum()

    g = growth({"f": needs_two}, lambda n: (jnp.ones((n, 3)),), sizes=(1, 2))
    assert g.series[0].points == (
        GrowthPoint(1, error="ValueError: needs a batch of two or more"),
        GrowthPoint(2, 1, (PrimitiveCount("reduce_sum", 1),)))
    assert g.series[0].per_element is None


def batch_args(n):
    return jax.ShapeDtypeStruct((n, 5), jnp.float32), jax.ShapeDtypeStruct((n, 3), jnp.float32)


def test_growth_is_kept_on_the_call_recorded_last(tmp_path):
    with transforms.record() as session:
        transforms.vmap(convolve)(XS, WS)
        g = transforms.growth({"loop": manually_batched_convolve,
                               "vmap": transforms.vmap(convolve)}, batch_args, sizes=(1, 2))
    (call,) = session.calls  # staging at each size recorded nothing
    assert call.growth == (g,)
    assert [[p.count("dot_general") for p in s.points] for s in g.series] == [[3, 6], [3, 3]]
    path = tmp_path / "growth.json"
    session.save(path)
    assert load(path).calls[0].growth == (g,)


def test_growth_outside_a_recording_or_before_any_call_is_only_returned():
    g = transforms.growth({"vmap": transforms.vmap(convolve)}, batch_args, sizes=(2,))
    assert g.series[0].points[0].eqn_count == 10
    with transforms.record() as session:
        transforms.growth({"vmap": transforms.vmap(convolve)}, batch_args, sizes=(2,))
    assert session.calls == []


@pytest.mark.parametrize("funs, sizes, message", [
    ({}, (1, 2), "needs at least one function"),
    ({"f": convolve}, (), "sizes must be positive ints"),
    ({"f": convolve}, (0, 1), "sizes must be positive ints"),
    ({"f": convolve}, (1.5,), "sizes must be positive ints"),
])
def test_growth_refuses_bad_input(funs, sizes, message):
    with pytest.raises(ValueError, match=message):
        transforms.growth(funs, batch_args, sizes=sizes)


# --- autodiff: JVP, linearized pair, transposed -------------------------------

def test_grad_chain_is_jvp_linearize_transpose():
    stages = stages_of(transforms.grad(sin_sum), X)
    assert names(stages) == REVERSE_CHAIN
    out, f_jvp = jax.linearize(sin_sum, X)
    oracle = {
        "f": jax.make_jaxpr(sin_sum)(X),
        "jvp(f)": jax.make_jaxpr(lambda p, t: jax.jvp(sin_sum, p, t))((X,), (X,)),
        "linear(f)": jax.make_jaxpr(f_jvp)(X),
        "transpose(linear(f))": jax.make_jaxpr(jax.vjp(sin_sum, X)[1])(out),
        "grad(f)": jax.make_jaxpr(jax.grad(sin_sum))(X),
    }
    for name, jaxpr in oracle.items():
        assert find_stage(stages, name).jaxpr.text == str(jaxpr), name
    linearized = find_stage(stages, "linearize(f)")
    # primal output, then the residuals the linear map closes over
    assert linearized.jaxpr.out_avals == ("float32[]", "float32[5]", "float32[5]", "float32[5]")


def assert_same_equations(stage, closed):
    """Same equations, in order, on the same avals (constants may be ordered otherwise)."""
    jaxpr = closed.jaxpr
    assert stage.eqn_count == len(jaxpr.eqns)
    assert [e.primitive for e in stage.eqns] == [e.primitive.name for e in jaxpr.eqns]
    assert [e.out_avals for e in stage.eqns] == [
        tuple(v.aval.str_short() for v in e.outvars) for e in jaxpr.eqns]
    assert stage.jaxpr.in_avals == tuple(v.aval.str_short() for v in jaxpr.invars)
    assert stage.jaxpr.out_avals == tuple(v.aval.str_short() for v in jaxpr.outvars)


def grad_grad_h(T):
    return T.grad(corpus.h)


# (case, the function grad differentiates, argnums, has_aux, args): each autodiff
# stage against JAX's make_jaxpr of that transformation of the real function.
AD_ORACLES = [
    ("sin_sum", lambda T: sin_sum, 0, False, (X,)),
    ("loss_argnums01", lambda T: corpus.loss, (0, 1), False, (corpus.W, jnp.float32(corpus.B))),
    ("loss_has_aux", lambda T: corpus.loss_and_preds, 0, True, (corpus.W, jnp.asarray(corpus.B))),
    ("example_loss_argnums0", lambda T: corpus.example_loss, 0, False,  # arrays held constant
     (corpus.W, jnp.float32(0.5), corpus.INPUTS[0], corpus.TARGETS[0])),
    ("cond", lambda T: corpus.cond_fn, 0, False, (jnp.float32(1.0),)),
    ("scan", lambda T: corpus.scan_fn, 0, False, (jnp.array([0.1, 0.2, -0.3, 1.0]),)),
    ("custom_vjp", lambda T: corpus.sin_times, (0, 1), False, (jnp.float32(0.5), jnp.float32(2))),
    ("custom_jvp", lambda T: corpus.log1pexp, 0, False, (jnp.float32(100.0),)),
    ("softmax", lambda T: corpus.nn_softmax_loss, 0, False, (corpus.NN_X,)),
    ("checkpoint", lambda T: corpus.checkpointed, 0, False, (corpus.VEC,)),
    ("grad_grad", grad_grad_h, 0, False, (jnp.float32(0.3),)),
]


@pytest.mark.parametrize("fun, argnums, has_aux, args",
                         sweep([c[1:] for c in AD_ORACLES], [c[0] for c in AD_ORACLES], every=4))
def test_autodiff_stages_are_jaxs_own(fun, argnums, has_aux, args):
    stages = stages_of(transforms.grad(fun(transforms), argnums, has_aux=has_aux), *args)
    f = fun(jax)
    positions = (argnums,) if isinstance(argnums, int) else argnums

    def at(*xs):  # f as a function of the differentiated arguments
        full = list(args)
        for i, x in zip(positions, xs):
            full[i] = x
        return f(*full)
    primals = tuple(args[i] for i in positions)
    lin = jax.linearize(at, *primals, has_aux=has_aux)
    linearized = jax.make_jaxpr(lambda *p: jax.linearize(at, *p, has_aux=has_aux))(*primals)
    e = "grad(f)" if fun is grad_grad_h else "f"  # stages are named as expressions of f
    oracle = {
        f"jvp({e})": jax.make_jaxpr(lambda p, t: jax.jvp(at, p, t, has_aux=has_aux))(primals,
                                                                                      primals),
        f"linearize({e})": linearized,
        f"linear({e})": jax.make_jaxpr(lin[1])(*primals),
        f"transpose(linear({e}))": jax.make_jaxpr(jax.vjp(at, *primals, has_aux=has_aux)[1])(
            lin[0]),
        f"grad({e})": jax.make_jaxpr(jax.grad(f, argnums, has_aux=has_aux))(*args),
    }
    for name, closed in oracle.items():
        assert find_stage(stages, name).jaxpr.text == str(closed), name
        assert_same_equations(find_stage(stages, name), closed)


def test_every_stage_transforms_what_f_bound_not_f():
    stages = stages_of(transforms.grad(sin_sum), X)
    assert [s.method for s in stages] == [
        "jax.make_jaxpr(<the primitives f bound at this call>)",
        "jax.make_jaxpr(jax.jvp(<recorded f>, primals, tangents))",
        "jax.make_jaxpr(jax.linearize(<recorded f>, *primals))",
        "jax.make_jaxpr(jax.linearize(<recorded f>, *primals)[1])",
        "jax.make_jaxpr(jax.vjp(<recorded f>, *primals)[1])",
        # an eager call executed grad(f)'s program itself: staged as it ran
        "jax.make_jaxpr(<the primitives this call executed>)"]
    stages = stages_of(transforms.grad(transforms.grad(corpus.h)), jnp.float32(0.3))
    assert find_stage(stages, "jvp(grad(f))").method == (
        "jax.make_jaxpr(jax.jvp(<recorded f>, primals, tangents))")
    assert find_stage(stages, "grad(f)").method == (
        "jax.make_jaxpr(jax.grad(<recorded f>, argnums=0, has_aux=False))")
    # under jit nothing is executed while tracing: the transformation is applied again
    stages = stages_of(transforms.jit(transforms.grad(sin_sum)), X)
    assert find_stage(stages, "grad(f)").method == (
        "jax.make_jaxpr(jax.grad(<recorded f>, argnums=0, has_aux=False))")


def test_transposed_jaxpr_holds_the_backward_of_each_forward_op():
    stages = stages_of(transforms.grad(sin_sum), X)
    prims = {s.name: tuple(e.primitive for e in s.eqns) for s in stages}
    assert prims["f"] == ("sin", "mul", "reduce_sum")
    # jvp: sin's tangent rule brings cos
    assert prims["jvp(f)"] == ("sin", "cos", "mul", "mul", "mul", "mul", "add_any",
                               "reduce_sum", "reduce_sum")
    # backward: reduce_sum -> broadcast_in_dim, mul -> two muls, sin -> mul by cos
    assert prims["transpose(linear(f))"] == ("broadcast_in_dim", "mul", "mul", "mul", "add_any")
    transposed = find_stage(stages, "transpose(linear(f))")
    assert {e.name_stack for e in transposed.eqns} == {"transpose(jvp())"}
    assert {e.name_stack for e in find_stage(stages, "jvp(f)").eqns} == {"jvp()"}
    grad = find_stage(stages, "grad(f)")
    assert [e.name_stack for e in grad.eqns] == ["jvp()"] * 4 + ["transpose(jvp())"] * 5


def test_each_equation_keeps_its_source_line():
    stages = stages_of(transforms.grad(sin_sum), X)
    line = sin_sum.__code__.co_firstlineno + 1
    f = find_stage(stages, "f")
    sources = [e.source for e in f.eqns]
    assert sources == [f"{__file__}:{line}:19 (sin_sum)", f"{__file__}:{line}:19 (sin_sum)",
                       f"{__file__}:{line}:11 (sin_sum)"]
    backward = find_stage(stages, "transpose(linear(f))")
    assert {e.source for e in backward.eqns} <= set(sources)


def test_per_example_grads_chain():
    case = CASES_BY_NAME["seed003_per_example_grads"]
    stages = stages_of(case.build(transforms), *case.args)
    assert names(stages) == REVERSE_CHAIN + ("vmap(grad(f))",)
    assert stages[-1].jaxpr.text == str(jax.make_jaxpr(case.build(jax))(*case.args))
    assert stages[-1].method == ("jax.make_jaxpr(jax.vmap(<recorded grad(f)>, "
                                 "in_axes=(None, None, 0, 0), out_axes=0))")  # b is a float
    assert find_stage(stages, "grad(f)").method == (
        "jax.make_jaxpr(jax.grad(<recorded f>, argnums=(0, 1), has_aux=False))")
    assert stages[0].jaxpr.in_avals == ("float32[3]", "float32[]", "float32[3]", "bool[]")


# Outermost stage == JAX's make_jaxpr of the same composition, across the corpus.
ORACLE_CASES = [
    "seed003_loss_grad_argnums01", "seed003_loss_value_and_grad", "seed003_loss_has_aux",
    "seed003_loss_hessian_b", "seed003_convolve_vmap_axis1", "seed003_convolve_vmap_none",
    "seed003_all_pairs", "seed000_container_vmap", "seed000_container_vmap_grad",
    "seed002_log1pexp_vmap_grad", "cond_vmap_grad", "scan_vmap_grad", "custom_vjp_vmap_grad",
    "fori_dynamic_vmap", "grad_grad", "vmap_grad_grad", "checkpoint_grad_grad", "grad_jit",
    "vmap_jit", "vmap_vmap", "vmap_pytree_params", "value_and_grad_has_aux_dict",
    "vmap_out_axes_none", "jacfwd_jacrev", "vmap_hessian", "jvp_has_aux",
]


def as_arrays(args):
    """Python floats as JAX arrays: both sides trace them (see the test below)."""
    return tuple(jnp.asarray(a) if isinstance(a, float) else a for a in args)


@pytest.mark.parametrize("name", sweep(ORACLE_CASES, ORACLE_CASES, every=4))
def test_outermost_stage_is_jaxs_own_jaxpr(name):
    case = CASES_BY_NAME[name]
    args = as_arrays(case.args)
    stages = stages_of(case.build(transforms), *args, **case.kwargs)
    # a jit inside another transformation has no compiled views: JAX never compiles it alone
    missing = [(s.name, s.reason) for s in stages if not s.available
               and not (s.transform == "jit" and s.reason.startswith("JAX does not compile"))]
    assert not missing
    last = stages[-1]
    assert last.role == "transformed"
    assert last.jaxpr.text == str(jax.make_jaxpr(case.build(jax))(*args, **case.kwargs))


def test_a_python_float_jax_did_not_trace_is_the_value_that_ran():
    # vmap passes y=2.0 through untouched and jnp bakes it into the program it runs:
    # the recorded program has the literal where make_jaxpr (tracing y) has an input.
    stages = stages_of(transforms.vmap(lambda x, y: x * y, in_axes=(0, None)), corpus.VEC, 2.0)
    batched = find_stage(stages, "vmap(f)")
    assert [e.primitive for e in batched.eqns] == ["mul"]
    assert batched.eqns[0].in_vars[1] == "=2.0"


JIT_CASES = ["seed003_convolve_jit", "seed003_convolve_jit_vmap", "seed000_container_jit",
             "jit_grad", "jit_vmap_grad"]


@pytest.mark.parametrize("name", JIT_CASES)
def test_jit_stages_are_jaxs_trace_and_lowering(name):
    case = CASES_BY_NAME[name]
    stages = stages_of(case.build(transforms), *case.args)
    traced = case.build(jax).trace(*case.args)
    jaxprs = [s for s in stages if s.jaxpr is not None]
    assert jaxprs[-1].jaxpr.text == str(traced.jaxpr)
    stablehlo = [s for s in stages if s.role == "stablehlo"]
    assert [s.text for s in stablehlo] == [traced.lower().as_text()]


# --- jit: StableHLO, optimised HLO, cost, memory -------------------------------

def test_jit_stages_carry_stablehlo_and_cost_on_cpu():
    stages = stages_of(transforms.jit(sin_twice), 1.0)
    assert names(stages) == ("f",) + JIT_STAGES
    f, stablehlo, hlo, cost, memory = stages
    assert f.jaxpr.text == str(jax.make_jaxpr(sin_twice)(1.0))
    assert "func.func public @main" in stablehlo.text and "stablehlo.sine" in stablehlo.text
    assert hlo.text.startswith("HloModule jit_sin_twice")
    assert cost.metrics[:3] == (Metric("flops", 1.0), Metric("transcendentals", 1.0),
                                Metric("bytes accessed", 8.0))
    assert memory.metric("argument_size_in_bytes") == 4
    assert memory.metric("output_size_in_bytes") == 4
    assert [s.role for s in stages] == ["f", "stablehlo", "hlo", "cost", "memory"]


def test_jit_keeps_static_arguments_static():
    def power(x, n):
        for _ in range(n):  # Python control flow on the static argument
            x = x * x
        return x

    stages = stages_of(transforms.jit(power, static_argnums=1), 2.0, 3)
    assert all(s.available for s in stages), [(s.name, s.reason) for s in stages]
    assert find_stage(stages, "f").histogram == (PrimitiveCount("mul", 3),)


# --- failures: recorded on the stage that failed, the others stay -------------

no_lowering_p = Primitive("no_lowering")
no_lowering_p.def_abstract_eval(lambda x: x)
no_lowering_p.def_impl(lambda x: x)


def _no_lowering_batched(args, dims):
    return no_lowering_p.bind(*args), dims[0]


batching.primitive_batchers[no_lowering_p] = _no_lowering_batched


def test_a_lowering_failure_under_jit_of_vmap_keeps_every_earlier_stage():
    def f(x):
        return no_lowering_p.bind(jnp.sin(x))

    with transforms.record() as session:
        with pytest.raises(NotImplementedError, match="MLIR translation rule"):
            transforms.jit(transforms.vmap(f))(XS)
    stages = session.calls[0].stages
    assert names(stages)[:3] == ("f", "vmap(f)", "stablehlo(jit(vmap(f)))")
    assert [s.available for s in stages] == [True, True, False, False, False, False]
    assert find_stage(stages, "vmap(f)").histogram == (PrimitiveCount("no_lowering", 1),
                                                       PrimitiveCount("sin", 1))
    assert stages[2].reason.startswith("NotImplementedError: MLIR translation rule for primitive "
                                       "'no_lowering' not found")
    assert stages[3].reason == f"not reached: lowering failed ({stages[2].reason})"


def test_a_lowering_failure_keeps_the_jaxpr_stage():
    def f(x):
        return no_lowering_p.bind(jnp.sin(x))

    with transforms.record() as session:
        with pytest.raises(NotImplementedError, match="MLIR translation rule"):
            transforms.jit(f)(X)
    stages = session.calls[0].stages
    assert [s.available for s in stages] == [True, False, False, False, False]
    assert find_stage(stages, "f").histogram == (PrimitiveCount("no_lowering", 1),
                                                 PrimitiveCount("sin", 1))
    error = "NotImplementedError: MLIR translation rule for primitive 'no_lowering' not found"
    assert stages[1].reason.startswith(error)
    not_reached = f"not reached: lowering failed ({stages[1].reason})"
    assert [s.reason for s in stages[2:]] == [not_reached] * 3


def test_a_compilation_failure_keeps_stablehlo():
    def f(x):
        call = jax.ffi.ffi_call("not_a_registered_target", jax.ShapeDtypeStruct(x.shape, x.dtype))
        return call(x)

    with transforms.record() as session:
        with pytest.raises(jax.errors.JaxRuntimeError, match="No FFI handler registered"):
            transforms.jit(f)(X)
    stages = session.calls[0].stages
    assert [s.available for s in stages] == [True, True, False, False, False]
    assert "stablehlo.custom_call @not_a_registered_target" in stages[1].text
    assert stages[2].reason.startswith("JaxRuntimeError: NOT_FOUND: No FFI handler registered "
                                       "for not_a_registered_target")
    assert stages[3].reason == f"not reached: compilation failed ({stages[2].reason})"


def test_reverse_mode_failure_shows_where_the_pipeline_breaks():
    with transforms.record() as session:
        with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
            transforms.grad(while_fn)(3.0)
    stages = session.calls[0].stages
    assert names(stages) == REVERSE_CHAIN
    assert [s.available for s in stages] == [True, True, True, True, False, False]
    for failed in stages[4:]:
        assert failed.reason.startswith("ValueError: Reverse-mode differentiation does not work "
                                        "for lax.while_loop")


@pytest.mark.parametrize("fun, x", [(piecewise, 2.0), (piecewise, 4.0),
                                    (corpus.sqrt_newton, 2.0)],
                         ids=["piecewise_2", "piecewise_4", "sqrt_newton"])
def test_python_control_flow_under_grad_is_the_branch_taken(fun, x):
    with transforms.record() as session:
        assert transforms.grad(fun)(x) == jax.grad(fun)(x)
    stages = session.calls[0].stages
    assert names(stages) == REVERSE_CHAIN
    assert all(s.available for s in stages), [(s.name, s.reason) for s in stages]
    # the linear and backward maps are JAX's own at the same point
    out, linear = jax.linearize(fun, x)
    assert find_stage(stages, "linear(f)").jaxpr.text == str(jax.make_jaxpr(linear)(x))
    backward = jax.vjp(fun, x)[1]
    assert find_stage(stages, "transpose(linear(f))").jaxpr.text == str(
        jax.make_jaxpr(backward)(out))
    line = fun.__code__.co_firstlineno + (1 if fun is piecewise else 2)
    compare = "lt" if fun is piecewise else "gt"
    name = fun.__name__
    arg = "x" if fun is piecewise else "a"
    assert stages[0].note == (
        f"{name} branches in Python on a traced value (`{compare}` at "
        f"{fun.__code__.co_filename}:{line}), so it has no jaxpr for all inputs; "
        f"this is the jaxpr of the branch taken at {arg}={x}")
    assert all(s.note == stages[0].note for s in stages)


def test_a_function_without_python_branches_has_no_note():
    stages = stages_of(transforms.grad(sin_sum), X)
    assert {s.note for s in stages} == {""}


def test_vmap_failing_before_calling_f():
    with transforms.record() as session:
        with pytest.raises(ValueError, match="vmap got inconsistent sizes"):
            transforms.vmap(jnp.add)(jnp.ones(2), jnp.ones(3))
    f, batched = session.calls[0].stages
    assert (f.available, batched.available) == (False, False)
    assert batched.reason.startswith("ValueError: vmap got inconsistent sizes")
    assert f.reason == f"not reached: vmap failed before calling the function ({batched.reason})"


def test_options_that_are_not_literals_are_used_as_given():
    class Axis:  # an axis name whose repr cannot be read back
        pass

    axis = Axis()
    stages = stages_of(transforms.vmap(jnp.sin, axis_name=axis), X)
    f, batched = stages
    assert f.available and batched.available
    assert batched.jaxpr.text == str(jax.make_jaxpr(jax.vmap(jnp.sin, axis_name=axis))(X))
    with transforms.record() as session:  # under jit: applied again, with the live option
        transforms.jit(transforms.vmap(jnp.sin, axis_name=axis))(X)
    batched = find_stage(session.calls[0].stages, "vmap(f)")
    assert batched.method.startswith("jax.make_jaxpr(jax.vmap(<recorded f>, in_axes=0, "
                                     "out_axes=0, axis_name=<")
    assert batched.jaxpr.text == str(jax.make_jaxpr(jax.vmap(jnp.sin, axis_name=axis))(X))


@pytest.mark.parametrize("case", sweep(CASES, [c.name for c in CASES]))
def test_every_corpus_call_gets_a_well_formed_chain(case):
    with transforms.record() as session:
        outcome(lambda: case.run(transforms))
    for call in session.calls:
        assert call.stages, call.transform
        assert len(set(names(call.stages))) == len(call.stages), names(call.stages)
        for stage in call.stages:
            if stage.available:
                assert stage.jaxpr is not None or stage.text is not None or stage.metrics
                assert stage.jaxpr is None or stage.jaxpr.eqn_count == len(stage.eqns)
            else:
                assert stage.reason and stage.jaxpr is None


# --- the record ---------------------------------------------------------------

def test_session_with_stages_round_trips_through_json(tmp_path):
    with transforms.record() as session:
        transforms.vmap(transforms.grad(sin_sum))(XS)
        uncached(transforms.jit(sum_sq))(jnp.arange(3.0))
        transforms.grad(piecewise)(2.0)
    path = tmp_path / "stages.json"
    session.save(path)
    loaded = load(path)
    assert loaded.calls == session.calls
    stage = find_stage(loaded.calls[0].stages, "vmap(grad(f))")
    assert stage.eqns[0] == find_stage(session.calls[0].stages, "vmap(grad(f))").eqns[0]
    assert type(stage.eqns[0]).__name__ == "EqnRecord"
    assert find_stage(loaded.calls[1].stages, "cost(jit(f))").metric("flops") == 5.0


def test_stages_by_default_and_none_when_turned_off():
    with transforms.record() as session:
        transforms.vmap(convolve)(XS, WS)
    assert names(session.calls[0].stages) == ("f", "vmap(f)")
    with transforms.record(stages=False) as session:
        transforms.vmap(convolve)(XS, WS)
    assert session.calls[0].stages == ()


def test_a_fault_in_capture_is_recorded_not_raised(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug in stage capture")

    monkeypatch.setattr(stages_module, "_capture_group", broken)
    with transforms.record() as session:
        transforms.vmap(convolve)(XS, WS)
    (stage,) = session.calls[0].stages
    assert (stage.name, stage.available) == ("capture", False)
    assert stage.reason == "stage capture failed: RuntimeError: a bug in stage capture"


def test_a_compilation_failure_under_jit_of_vmap_keeps_every_earlier_stage():
    def f(x):
        call = jax.ffi.ffi_call("not_a_registered_target", jax.ShapeDtypeStruct(x.shape, x.dtype),
                                vmap_method="broadcast_all")
        return call(x)

    with transforms.record() as session:
        with pytest.raises(jax.errors.JaxRuntimeError, match="No FFI handler registered"):
            transforms.jit(transforms.vmap(f))(XS)
    stages = session.calls[0].stages
    assert names(stages) == ("f", "vmap(f)", "stablehlo(jit(vmap(f)))", "hlo(jit(vmap(f)))",
                             "cost(jit(vmap(f)))", "memory(jit(vmap(f)))")
    assert [s.available for s in stages] == [True, True, True, False, False, False]
    assert find_stage(stages, "vmap(f)").jaxpr.in_avals == ("float32[2,5]",)
    assert stages[3].reason.startswith("JaxRuntimeError: NOT_FOUND: No FFI handler registered")


@pytest.mark.parametrize("enabled", [True, False])
def test_capture_leaves_the_garbage_collector_as_it_found_it(enabled):
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        stages = stages_of(transforms.vmap(convolve), XS, WS)
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
    assert all(s.available for s in stages)
