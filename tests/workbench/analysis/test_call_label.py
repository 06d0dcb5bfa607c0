"""One call-label rule for every reader (issue 36, item 1): the transformations applied to
the call's own function make its label; those its body applies inside (a jitted step that
calls value_and_grad(loss), which calls vmap(example_loss)) are levels, not the label."""
from __future__ import annotations

import jax.numpy as jnp
import pytest

import transforms as T
from workbench.analysis import call_label, composition
from workbench.cli._summary import summarize_call
from workbench.export import collect
from workbench.tui.navigation import call_labels


def _example_loss(w, x):
    return jnp.sum(w * x) ** 2


def _loss(w, xs):
    return jnp.mean(T.vmap(_example_loss, in_axes=(None, 0))(w, xs))


def step(w, xs):
    value, g = T.value_and_grad(_loss)(w, xs)
    return w - 0.1 * g, value


def cubic(x):
    return x ** 3


@pytest.fixture(scope="module")
def session():
    with T.record() as s:
        T.jit(step)(jnp.ones(3), jnp.ones((4, 3)))
        T.vmap(T.grad(cubic))(jnp.ones(3))
        T.jit(T.vmap(cubic))(jnp.ones(3))
    return s


def test_transformations_inside_the_function_are_not_in_its_label(session):
    jitted = session.calls[0]
    assert [lv.kind for lv in jitted.levels] == ["jit", "value_and_grad", "vmap"]
    assert composition(jitted) == ["jit"]
    assert call_label(jitted) == "jit(step)"


def test_compositions_of_the_function_are_its_label(session):
    assert [call_label(c) for c in session.calls[1:]] == ["vmap(grad(cubic))",
                                                          "jit(vmap(cubic))"]


def test_every_reader_uses_the_one_rule(session):
    assert call_labels(session) == ["jit(step)", "vmap(grad(cubic))", "jit(vmap(cubic))"]
    assert summarize_call(session.calls[1])[0].startswith("call 1: vmap(grad(cubic)) at ")
    assert summarize_call(session.calls[0])[0].startswith("call 0: jit(step) at ")
    assert collect(session, "tower", call=1).title.startswith("call 1: vmap(grad(cubic)): ")
