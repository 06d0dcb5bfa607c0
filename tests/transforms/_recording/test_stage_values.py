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


def _by_role(call):
    """Values by their stage's role (f, jvp, linear, transposed, transformed...)."""
    by_name = _by_stage(call)
    return {s.role: by_name[s.name] for s in call.stages if s.name in by_name}


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
        transforms.vjp(f, X, Y)
        transforms.linearize(f, X, Y)
    vjp_call, linearize_call = session.calls
    assert _by_stage(vjp_call)["transpose(linear(f))"].note == (
        "not evaluated: the cotangent is given later, to the pullback vjp returned (a call "
        "of its own)")
    assert _by_stage(linearize_call)["linear(f)"].note == (
        "not evaluated: the tangents are given later, to the function linearize returned (a "
        "call of its own)")
    assert _by_stage(linearize_call)["linearize(f)"].note == ""


def g(x):
    return jnp.sin(x) * x


def test_a_pullbacks_call_evaluates_the_backward_pass_at_its_cotangent():
    cotangent = jnp.array([1.0, 2.0, 3.0])
    with record(values=True) as session:
        _, pullback = transforms.vjp(g, X)
        (out,) = pullback(cotangent)
    forward, backward = session.calls
    values = _by_role(backward)
    assert values["transposed"].note == (
        "at the cotangent this call was given, with call 0's residuals")
    assert _last(values["transposed"]) == str(np.asarray(out))
    # the forward pass's own stages were evaluated with the forward call
    assert values["transformed"].note == ("not evaluated: a stage of call 0, the forward pass, "
                                     "evaluated with it where its inputs were known")
    assert _by_role(forward)["transformed"].note == ""


def test_a_linearized_functions_call_evaluates_the_linear_map_at_its_tangents():
    tangent = jnp.array([1.0, 0.5, 0.25])
    with record(values=True) as session:
        _, pushforward = transforms.linearize(g, X)
        out = pushforward(tangent)
    values = _by_role(session.calls[1])
    assert values["linear"].note == (
        "at the tangents this call was given, with call 0's residuals")
    assert _last(values["linear"]) == str(np.asarray(out))
    assert values["jvp"].note == "at call 0's primals and the tangents this call was given"
    assert _last(values["jvp"]) == str(np.asarray(out))


def test_a_returned_functions_call_without_values_on_its_forward_says_why():
    with record() as first:
        _, pullback = transforms.vjp(g, X)
    with record(values=True) as session:
        pullback(jnp.ones(3))
    assert len(first.calls) == 1
    (call,) = session.calls
    assert call.values == ()  # not this block's forward call: its stages are not here


def test_the_stages_of_a_jvp_call_take_its_primals_and_tangents():
    with record(values=True) as session:
        _, tangent_out = transforms.jvp(g, (X,), (jnp.ones(3),))
    values = _by_role(session.calls[0])
    assert values["f"].note == "at the primals"
    assert _last(values["f"]) == str(np.asarray(g(X)))
    assert _last(values["transformed"]) == str(np.asarray(tangent_out))


def test_a_returned_function_keeps_host_copies_not_the_users_arrays():
    import gc
    import weakref

    def h(x):  # its one residual is cos(x): JAX's pullback does not hold x
        return jnp.sin(x)

    x = jnp.arange(3.0) + 1.0
    held = weakref.ref(x)
    with record(values=True) as session:
        _, pullback = transforms.vjp(h, x)
        del x
        gc.collect()
        assert held() is None  # nor does the recording: it holds host copies
        pullback(jnp.ones(3))
    assert _by_role(session.calls[1])["transposed"].note.startswith("at the cotangent")


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
