"""Every trace, lowering and compile of a jit in a block is recorded, with its key and, for a
retrace, why it missed, in the user's words (one reason per concept, model.REASON_KINDS)."""
from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import pytest

import transforms
from transforms import model


def _explained(session, function: str) -> list[list[str]]:
    """Each trace of `function`: its reasons, as the user reads them."""
    return [[model.explain(r) for r in c.reasons] for c in session.compiles
            if c.function == function and c.traced]


def test_a_smaller_last_batch_and_a_python_float_become_an_array():
    @transforms.jit
    def step(params, batch, lr):
        return params - lr * jnp.sum(batch["x"])

    params = jnp.ones(3)
    with transforms.record() as session:
        step(params, {"x": jnp.ones((32, 784))}, 0.1)
        step(params, {"x": jnp.ones((32, 784))}, 0.1)  # cached: nothing recorded
        step(params, {"x": jnp.ones((16, 784))}, 0.1)
        step(params, {"x": jnp.ones((16, 784))}, jnp.float32(0.1))
    assert _explained(session, "step") == [
        [],
        ["`batch['x']` float32[32,784] -> float32[16,784] (the last, smaller batch)"],
        ["`lr` was a Python scalar (weakly typed float32[]) and is now a float32[] array"],
    ]
    first = next(c for c in session.compiles if c.function == "step")
    assert (first.traced, first.lowered, first.compiled, first.number) == (True, True, True, 0)
    assert first.compile_seconds > 0 and first.trace_seconds > 0
    assert first.location is not None and first.location.function.endswith(
        "test_a_smaller_last_batch_and_a_python_float_become_an_array")
    assert first.key is not None
    assert [(leaf.path, leaf.aval, leaf.weak_type) for leaf in first.key.leaves] == [
        ("params", "float32[3]", False), ("batch['x']", "float32[32,784]", False),
        ("lr", "float32[]", True)]
    assert first.call_index == session.calls[0].index


def test_shape_and_dtype_changes():
    f = transforms.jit(lambda x: x * 2)
    with transforms.record() as session:
        f(jnp.ones((2, 3)))
        f(jnp.ones((2, 4)))
        f(jnp.ones((2, 4), jnp.int32))
    assert _explained(session, "<lambda>") == [
        [], ["`x` float32[2,3] -> float32[2,4]"], ["`x` float32[2,4] -> int32[2,4]"]]


def test_static_argument_change():
    def scale(x, train):
        return x * 2 if train else x

    f = transforms.jit(scale, static_argnames="train")
    with transforms.record() as session:
        f(jnp.ones(3), train=True)
        f(jnp.ones(3), train=False)
    assert _explained(session, "scale") == [[], ["static argument `train` True -> False"]]
    assert session.compiles[-1].key.statics == (model.StaticKey("train", "False", "bool"),)


def test_a_new_function_object_each_call():
    with transforms.record() as session:
        for _ in range(2):
            transforms.jit(lambda x: x + 1)(jnp.ones(3))
    line = test_a_new_function_object_each_call.__code__.co_firstlineno + 3
    assert _explained(session, "<lambda>") == [[], [
        f"a new function object at each call: `jax.jit(<lambda>)` of the function defined at "
        f"{__file__}:{line}"]]


def test_a_tree_that_gains_a_leaf_and_one_that_changes_its_nodes():
    f = transforms.jit(lambda state: jax.tree_util.tree_leaves(state)[0] + 1)
    with transforms.record() as session:
        f({"w": jnp.ones(2)})
        f({"w": jnp.ones(2), "b": jnp.ones(2)})
        f([jnp.ones(2), jnp.ones(2)])
    assert _explained(session, "<lambda>") == [
        [],
        ["the tree of `state` changed: now has `state['b']`"],
        ["the tree of `state` changed: now has `state[0]`, `state[1]`, no longer "
         "`state['b']`, `state['w']`"],
    ]


def test_what_the_recorder_traces_for_itself_is_not_recorded_as_a_compile():
    f = transforms.jit(lambda x: x * 3)
    f(jnp.ones(3))  # JAX traced and compiled it before the block
    with transforms.record() as session:
        f(jnp.ones(3))  # traced once more for the recording only: no compile of the program
    assert [c for c in session.compiles if c.function == "<lambda>"] == []
    assert len(session.calls) == 1


def test_a_library_jit_is_recorded_by_its_events():
    with transforms.record() as session:
        jax.jit(lambda x: x - 1)(jnp.ones(5))  # JAX's own jit: no key, its cost and line
    own = [c for c in session.compiles if c.function == "<lambda>"]
    assert len(own) == 1 and own[0].key is None and own[0].compiled


@pytest.mark.parametrize("version", [2, 3, 4])
def test_compiles_survive_a_dump_and_old_dumps_load_without_them(version):
    f = transforms.jit(lambda x: x * 2)
    with transforms.record() as session:
        f(jnp.ones(2))
        f(jnp.ones(3))
    text = model._layout.json_text(session, model.RECORD_TYPES, version)
    assert model.loads(text).compiles == session.compiles
    data = json.loads(text)  # as a workbench before compiles were recorded wrote it
    del data["compiles"]
    data.pop("lazy_at", None)
    assert model.loads(json.dumps(data)).compiles == []


def test_an_argument_moved_to_another_device_compiles_again_without_a_trace():
    f = transforms.jit(lambda x: x * 2)
    x = jnp.arange(4.0)
    first, second = jax.devices()[:2]
    with transforms.record() as session:
        f(jax.device_put(x, first))
        f(jax.device_put(x, second))
        f(jax.device_put(x, second))  # cached: nothing recorded
    records = [c for c in session.compiles if c.function == "<lambda>"]
    assert [(c.traced, c.compiled) for c in records] == [(True, True), (False, True)]
    assert records[0].placements == (f"{first.platform}:{first.id}",)
    moved = records[1]
    assert moved.key == records[0].key  # JAX's trace cache hit: the same key
    assert [model.explain(r) for r in moved.reasons] == [
        f"compiled again, not traced: `x` was on {first.platform}:{first.id} and is now on "
        f"{second.platform}:{second.id}"]
    assert model.hint(moved.reasons[0]).startswith("put the arguments on the same device")


def test_show_counts_a_compile_without_a_new_trace(tmp_path):
    from workbench.cli._compile_table import compile_lines

    f = transforms.jit(lambda x: x + 1)
    x = jnp.arange(3.0)
    with transforms.record() as session:
        f(jax.device_put(x, jax.devices()[0]))
        f(jax.device_put(x, jax.devices()[1]))
    lines = compile_lines(session)
    assert lines[0].endswith("your jitted functions traced again 0 times, compiled again 1 "
                             "time without a new trace")
    assert any(line.strip().startswith("compiled again, not traced: `x` was on cpu:0 and is "
                                       "now on cpu:1") for line in lines)
