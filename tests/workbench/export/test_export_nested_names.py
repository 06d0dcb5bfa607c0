"""A jitted training step that calls value_and_grad(loss) inside (issue 36, item 2): its own
stage's inputs are named from its own input trees, not counted with the inner
transformation's; the inner stages' inputs and outputs are named from the trees kept for it."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import transforms as T
from workbench.export import collect


def _loss(params, x, y):
    return jnp.mean((x @ params["w"] + params["b"] - y) ** 2)


def _step(params, x, y):
    value, grads = T.value_and_grad(_loss)(params, x, y)
    return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), value


@pytest.fixture(scope="module")
def session():
    params = {"w": jnp.ones((3, 2)), "b": jnp.zeros(2)}
    with T.record() as s:
        T.jit(_step)(params, jnp.ones((4, 3)), jnp.ones((4, 2)))
    return s


def _labels(graph, kind):
    return [n.label for n in graph.nodes if n.kind == kind]


def test_the_steps_inputs_are_named_from_its_own_trees(session):
    graph = collect(session, "jaxpr")
    assert _labels(graph, "input") == ["params['b']\na: f32[2]", "params['w']\nb: f32[3,2]",
                                       "x\nc: f32[4,3]", "y\nd: f32[4,2]"]
    assert "inputs keep their variable names" not in graph.title


def test_the_inner_value_and_grad_names_its_gradients(session):
    graph = collect(session, "stages")
    assert graph.title.startswith("_loss -> value_and_grad(_loss)")
    outputs = _labels(graph, "output")
    assert outputs[-3:] == ["out[0]\nf32[]", "grad params['b']\nf32[2]",
                            "grad params['w']\nf32[3,2]"]
    assert _labels(graph, "input")[-4:] == ["params['b']\na: f32[2]",
                                            "params['w']\nb: f32[3,2]", "c\nf32[4,3]",
                                            "d\nf32[4,2]"]
