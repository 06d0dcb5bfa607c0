"""Issue 33 item 2: record(values=True) evaluates every jaxpr stage of a call whose inputs
can be derived from the call's (linearize(f) at the differentiated arguments, grad's backward
pass at the cotangent 1.0 with its forward pass's residuals, the stages inside a vmap at the
first example, a jit's stages on its arguments' copies); every other stage says why."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transforms
from transforms import record


def f(x, y):
    return jnp.sum(jnp.sin(x) * y)


X = jnp.arange(3.0)
Y = jnp.array([1.0, 2.0, 3.0])
NO_TANGENTS = "not evaluated: a grad call gives no tangents (it pulls a cotangent back instead)"


def _by_stage(call):
    return {v.stage: v for v in call.values}


def _last(values):
    return values.outputs[-1][0].text


@pytest.mark.parametrize("wrap", ["eager", "jit"])
def test_every_stage_of_a_grad_call_has_values_or_says_why(wrap):
    g = transforms.grad(f)
    with record(values=True) as session:
        out = (transforms.jit(g) if wrap == "jit" else g)(X, Y)
    (call,) = session.calls
    values = _by_stage(call)
    assert list(values) == [s.name for s in call.stages if s.jaxpr is not None]
    assert values["jvp(f)"].note == NO_TANGENTS and values["jvp(f)"].outputs == ()
    assert values["linear(f)"].note == NO_TANGENTS
    # linearize(f) at the call's x: its cos equation (a residual) holds cos x
    (stage,) = [s for s in call.stages if s.name == "linearize(f)"]
    linearized = values["linearize(f)"]
    assert linearized.note == "" and len(linearized.outputs) == len(stage.eqns)
    by_primitive = {e.primitive: outs for e, outs in zip(stage.eqns, linearized.outputs)}
    assert by_primitive["cos"][0].text == str(np.asarray(jnp.cos(X)))
    # the backward pass at the cotangent 1.0 ends with the gradient the call returned
    backward = values["transpose(linear(f))"]
    assert backward.note == "at the cotangent 1.0, as grad pulls back"
    assert _last(backward) == str(np.asarray(out)) == _last(values["grad(f)"])


def test_the_stages_inside_a_vmap_take_its_first_example():
    xs = jnp.arange(6.0).reshape(2, 3)
    with record(values=True) as session:
        out = transforms.vmap(transforms.grad(f))(xs, xs + 1.0)
    values = _by_stage(session.calls[0])
    first = "at the first example of the batch"
    assert values["f"].note == first and values["grad(f)"].note == first
    assert _last(values["grad(f)"]) == str(np.asarray(out[0]))
    assert values["transpose(linear(f))"].note == (
        "at the cotangent 1.0, as grad pulls back, at the first example of the batch")
    assert _last(values["transpose(linear(f))"]) == str(np.asarray(out[0]))
    assert values["vmap(grad(f))"].note == "" and _last(values["vmap(grad(f))"]) == str(
        np.asarray(out))


def test_a_stage_whose_inputs_are_not_the_calls_says_why():
    with record(values=True) as session:
        _, pullback = transforms.vjp(f, X, Y)
        pullback(1.0)
        transforms.linearize(f, X, Y)
    vjp_call, pullback_call, linearize_call = session.calls
    assert _by_stage(vjp_call)["transpose(linear(f))"].note == (
        "not evaluated: the cotangent is given later, to the pullback vjp returned (a call "
        "of its own)")
    assert {v.note for v in pullback_call.values} == {
        "not evaluated: these are call 0's stages (its forward pass, evaluated there); the "
        "residuals they would take here are not kept"}
    assert _by_stage(linearize_call)["linear(f)"].note == (
        "not evaluated: the tangents are given later, to the function linearize returned (a "
        "call of its own)")
    assert _by_stage(linearize_call)["linearize(f)"].note == ""


def test_a_vmap_with_in_axes_per_leaf_says_why_its_inner_stages_have_no_values():
    xs = {"a": jnp.ones((2, 3))}
    with record(values=True) as session:
        transforms.vmap(lambda d: jnp.sum(d["a"]), in_axes=({"a": 0},))(xs)
    values = _by_stage(session.calls[0])
    assert values["f"].note == ("not evaluated: vmap's in_axes name axes per leaf: the first "
                                "example is not derived")
    assert values["vmap(f)"].note == ""


def test_values_change_nothing_jax_computes():
    with record(values=True):
        ours = transforms.grad(f)(X, Y)
    assert np.array_equal(ours, jax.grad(f)(X, Y))
