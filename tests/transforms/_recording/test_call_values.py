"""Item 1 of issue 33: the concrete arguments and results of every top-level recorded call,
jit included (its arguments summarised where jit binds them, its results replayed with its
own executable once the trace is over), and recording them changes no result."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import transforms
from transforms import record
from transforms.model import stage_function


def _leaves(call, role):
    return [n for t in call.trees if t.role == role for n in t.leaves]


def test_a_jit_call_has_its_arguments_and_replayed_results():
    def f(x, n):
        return x * n, jnp.log(x - 1.0)

    x = jnp.arange(5.0)
    with record() as session:
        out = transforms.jit(f, static_argnums=1)(x, 3)
    (call,) = session.calls
    (arg, static) = _leaves(call, "input")
    assert arg.traced and arg.summary is not None and arg.summary.text == "[0. 1. 2. 3. 4.]"
    assert static.summary is None and static.value == "3"
    results = _leaves(call, "output")
    assert [r.summary.origin for r in results] == ["replayed", "replayed"]
    # the same executable: the same bits as the call returned
    assert results[0].summary.text == str(np.asarray(out[0]))
    assert results[1].summary.text == str(np.asarray(out[1]))
    assert results[1].summary.nan == 1 and results[1].summary.inf == 1


def test_a_program_with_a_callback_is_not_run_again():
    printed = []

    def f(x):
        jax.debug.callback(lambda v: printed.append(v), x)
        return x + 1

    with record() as session:
        transforms.jit(f)(jnp.ones(3))
    assert len(printed) == 1
    (out,) = _leaves(session.calls[0], "output")
    assert out.summary is None


def test_values_change_no_result_and_keep_no_array():
    import gc
    import weakref

    x = jnp.linspace(-1.0, 1.0, 100)
    expected = jax.grad(lambda v: jnp.sum(jnp.sin(v) ** 2))(x)
    with record() as session:
        got = transforms.grad(lambda v: jnp.sum(jnp.sin(v) ** 2))(x)
        y = jnp.ones(4)
        ref = weakref.ref(y)
        transforms.jit(lambda v: v * 2)(y)
        del y
        gc.collect()
        assert ref() is None
    assert np.array_equal(np.asarray(got), np.asarray(expected))
    (grad_leaf,) = _leaves(session.calls[0], "gradient")
    assert grad_leaf.summary is not None and grad_leaf.summary.text == ""
    assert grad_leaf.summary.mean is not None


def test_values_true_evaluates_every_equation_of_the_replayable_stages():
    def f(x):
        return jnp.sum(jnp.where(x > 0, jnp.sqrt(x), 0.0))

    x = jnp.array([0.0, 1.0])
    with record(values=True) as session:
        g = transforms.grad(f)(x)
        transforms.jit(transforms.grad(f))(jnp.array([4.0, 1.0]))
    eager, jitted = session.calls
    assert [v.stage for v in eager.values] == [s.name for s in eager.stages]
    (values,) = [v for v in eager.values if v.stage == "grad(f)"]
    (stage,) = [s for s in eager.stages if s.name == "grad(f)"]
    assert len(values.outputs) == len(stage.eqns) and not values.note
    by_primitive = {e.primitive: outs for e, outs in zip(stage.eqns, values.outputs)}
    assert by_primitive["div"][0].text == "[inf 0.5]"
    # the program's last equation is the gradient the call returned
    assert values.outputs[-1][0].text == str(np.asarray(g))
    (jit_values,) = [v for v in jitted.values if v.stage == "grad(f)"]
    assert jit_values.outputs[-1][0].text == "[0.25 0.5 ]"


def test_values_survive_a_dump_and_are_off_by_default():
    from transforms.model import loads
    with record(values=True) as session:
        transforms.grad(lambda v: jnp.sum(v * v))(jnp.arange(3.0))
    assert loads(session.to_json_text()).calls[0].values == session.calls[0].values
    with record() as plain:
        transforms.grad(lambda v: jnp.sum(v * v))(jnp.arange(3.0))
    assert plain.calls[0].values == ()


def _loss(w, x):
    return jnp.sum(jnp.tanh(x @ w))


def _step(w, x):
    loss, grads = transforms.value_and_grad(_loss)(w, x)
    return w - 0.1 * grads, loss


W, XS = jnp.ones((3, 2)), jnp.arange(6.0).reshape(2, 3)


def test_a_grad_inside_a_jitted_step_has_its_gradients_values():
    with record(values=True) as session:
        transforms.jit(_step)(W, XS)
    (call,) = session.calls
    (pair,) = call.pairs
    assert pair.title == "_loss: w vs its gradient"
    (gradient,) = pair.right.leaves
    assert gradient.summary is not None and gradient.summary.origin == "replayed"
    assert gradient.summary.text == str(np.asarray(jax.grad(_loss)(W, XS)))
    (weights,) = pair.left.leaves
    assert weights.summary is not None and weights.summary.text == str(np.asarray(W))
    # the jit's own jaxpr (the step's), not the nested value_and_grad's, has the jit's values
    own = next(s for s in call.stages if s.jaxpr is not None)
    (values,) = [v for v in call.values if v.stage == own.name]
    assert len(values.outputs) == len(own.eqns)


def test_without_values_a_nested_gradient_stays_a_traced_leaf():
    with record() as session:
        transforms.jit(_step)(W, XS)
    (pair,) = session.calls[0].pairs
    assert pair.right.leaves[0].summary is None


def test_the_stages_of_a_grad_inside_a_jitted_step_are_evaluated_at_its_inputs():
    with record(values=True) as session:
        transforms.jit(_step)(W, XS)
    (call,) = session.calls
    values = {v.stage: v for v in call.values}
    nested = {s.role: values[s.name] for s in call.stages
              if s.jaxpr is not None and stage_function(s.name) == "_loss"}
    assert nested["f"].outputs[-1][0].text == str(np.asarray(_loss(W, XS)))
    assert nested["transposed"].note == "at the cotangent 1.0, as grad pulls back"
    gradient = str(np.asarray(jax.grad(_loss)(W, XS)))
    assert nested["transposed"].outputs[-1][0].text == gradient
    assert nested["transformed"].outputs[-1][0].text == gradient
    assert nested["linearized"].outputs and not nested["linear"].outputs


def test_a_step_jax_traced_before_the_block_has_the_same_values():
    step = transforms.jit(_step)
    step(W, XS)  # JAX caches its trace: the block traces it again to record it
    with record(values=True) as session:
        step(W, XS)
    (call,) = session.calls
    gradient = str(np.asarray(jax.grad(_loss)(W, XS)))
    (pair,) = call.pairs
    assert pair.right.leaves[0].summary.text == gradient
    (backward,) = [v for v in call.values if v.stage == "transpose(linear(_loss))"]
    assert backward.outputs[-1][0].text == gradient
