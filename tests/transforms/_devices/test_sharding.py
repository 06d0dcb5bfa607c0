"""Sharded programs on 8 CPU devices (tests/conftest.py sets XLA_FLAGS).

The oracle is JAX itself: results of the same jax.* program, the shardings of
arrays JAX placed, and the collectives in the optimised HLO text JAX compiles.
"""
from __future__ import annotations

import importlib
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import transforms
from transforms._devices._sharding import COLLECTIVE_KINDS, collectives_in_hlo, parse_groups
from transforms.model import load


@pytest.fixture(scope="module")
def mesh() -> Mesh:
    devices = jax.devices()
    assert len(devices) >= 8, "tests/conftest.py must give JAX 8 CPU devices"
    return Mesh(np.array(devices[:8]).reshape(4, 2), ("data", "model"))


def named(mesh, *spec) -> NamedSharding:
    return NamedSharding(mesh, P(*spec))


def data_groups(mesh) -> set[tuple[int, ...]]:
    """Devices that share a `model` coordinate: what a reduction over `data` spans."""
    return {tuple(d.id for d in mesh.devices[:, j]) for j in range(mesh.devices.shape[1])}


def model_groups(mesh) -> set[tuple[int, ...]]:
    return {tuple(d.id for d in mesh.devices[i, :]) for i in range(mesh.devices.shape[0])}


def jax_collectives(text: str) -> list[tuple[str, str]]:
    """(kind, instruction) of each collective in JAX's HLO text, read line by line."""
    found = []
    for line in text.splitlines():
        for kind in COLLECTIVE_KINDS:
            if f" {kind}(" in line or f" {kind}-start(" in line:
                name = line.split("=")[0].replace("ROOT", "").strip()
                found.append((kind, name))
    return found


def hlo_stage(call):
    (stage,) = [s for s in call.stages if s.role == "hlo"]
    assert stage.available, stage.reason
    return stage


def assert_same_leaves(ours, theirs):
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs),
                    strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def assert_blocks_match(record, placed):
    """Our blocks are what `devices_indices_map` says for an array JAX placed."""
    expected = {d.id: idx for d, idx in placed.sharding.devices_indices_map(placed.shape).items()}
    assert {b.device for b in record.blocks} == set(expected)
    for block in record.blocks:
        index = expected[block.device]
        for dim, part, start, stop in zip(placed.shape, index, block.starts, block.stops):
            assert part.indices(dim)[:2] == (start, stop)


# --- a data-parallel MLP training step ------------------------------------------------

def mlp_loss(params, batch):
    x, y = batch
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    pred = h @ params["w2"] + params["b2"]
    return jnp.mean((pred - y) ** 2)


def mlp_inputs():
    k1, k2, k3, k4 = jax.random.split(jax.random.key(0), 4)
    params = {"w1": jax.random.normal(k1, (16, 32)) * 0.1, "b1": jnp.zeros(32),
              "w2": jax.random.normal(k2, (32, 4)) * 0.1, "b2": jnp.zeros(4)}
    batch = (jax.random.normal(k3, (32, 16)), jax.random.normal(k4, (32, 4)))
    return params, batch


def test_data_parallel_step_records_layouts_and_the_gradient_all_reduce(mesh):
    params, batch = mlp_inputs()
    shardings = dict(in_shardings=(named(mesh), named(mesh, "data")), out_shardings=named(mesh))
    with transforms.record(stages=True) as session:
        ours = transforms.jit(transforms.value_and_grad(mlp_loss), **shardings)(params, batch)
    plain = jax.jit(jax.value_and_grad(mlp_loss), **shardings)
    assert_same_leaves(ours, plain(params, batch))

    call = session.calls[0]
    by_name = {r.name: r for r in call.shardings}
    x = by_name["batch[0]"]
    assert (x.role, x.spec, x.mesh_axes, x.mesh_shape) == ("input", "P('data',)",
                                                           ("data", "model"), (4, 2))
    assert x.shard_shape == (8, 16) and not x.replicated
    assert_blocks_match(x, jax.device_put(batch[0], named(mesh, "data")))
    assert by_name["params['w1']"].replicated
    grads = [r for r in call.shardings if r.role == "gradient"]
    assert sorted(r.path for r in grads) == ["[1]['b1']", "[1]['b2']", "[1]['w1']", "[1]['w2']"]
    assert all(r.replicated for r in grads)
    assert sorted(r.name for r in grads) == ["grad params['b1']", "grad params['b2']",
                                             "grad params['w1']", "grad params['w2']"]

    stage = hlo_stage(call)
    text = plain.lower(params, batch).compile().as_text()
    oracle = jax_collectives(text)
    assert "all-reduce" in {kind for kind, _ in oracle}
    assert [c.kind for c in stage.collectives] == [kind for kind, _ in oracle]
    for c in stage.collectives:
        if c.kind == "all-reduce":
            assert c.ids == "device" and {g.devices for g in c.groups} == data_groups(mesh)
            assert c.result_bytes > 0 and c.reduction


def test_eager_gradients_keep_the_sharding_jax_gave_them(mesh):
    params, batch = mlp_inputs()
    params = jax.device_put(params, named(mesh))
    batch = jax.device_put(batch, named(mesh, "data"))
    with transforms.record() as session:
        ours = transforms.grad(mlp_loss)(params, batch)
    theirs = jax.grad(mlp_loss)(params, batch)
    assert_same_leaves(ours, theirs)
    grads = {r.path: r for r in session.calls[0].shardings if r.role == "gradient"}
    assert set(grads) == {"['b1']", "['b2']", "['w1']", "['w2']"}
    for path, leaf in [("['w1']", theirs["w1"]), ("['b2']", theirs["b2"])]:
        assert grads[path].spec == repr(leaf.sharding.spec)
        assert_blocks_match(grads[path], leaf)


def test_single_device_calls_record_no_shardings():
    with transforms.record(stages=True) as session:
        transforms.jit(transforms.grad(lambda x: jnp.sum(x ** 2)))(jnp.ones(3))
    call = session.calls[0]
    assert call.shardings == ()
    assert hlo_stage(call).collectives == ()


# --- tensor parallel -------------------------------------------------------------

def matmul(x, w):
    return x @ w


def test_tensor_parallel_matmul_gathers_the_sharded_weights(mesh):
    x = jnp.arange(8 * 16, dtype=jnp.float32).reshape(8, 16) / 100
    w = jnp.arange(16 * 8, dtype=jnp.float32).reshape(16, 8) / 100
    shardings = dict(in_shardings=(named(mesh), named(mesh, None, "model")),
                     out_shardings=named(mesh))
    with transforms.record(stages=True) as session:
        ours = transforms.jit(matmul, **shardings)(x, w)
    plain = jax.jit(matmul, **shardings)
    assert_same_leaves(ours, plain(x, w))
    oracle = jax_collectives(plain.lower(x, w).compile().as_text())
    assert {"all-gather", "reduce-scatter"} & {kind for kind, _ in oracle}
    call = session.calls[0]
    stage = hlo_stage(call)
    assert [c.kind for c in stage.collectives] == [kind for kind, _ in oracle]
    (gather,) = [c for c in stage.collectives if c.kind == "all-gather"]
    assert {g.devices for g in gather.groups} == model_groups(mesh)
    assert gather.dimensions == "1" and gather.shape.startswith("f32[8,8]")
    weights = {r.name: r for r in call.shardings}["w"]
    assert weights.spec == "P(None, 'model')" and weights.shard_shape == (16, 4)


# --- shard_map and vmap with named axes ------------------------------------------------

def shard_map_implementations():
    found = []
    if hasattr(jax, "shard_map"):
        found.append(pytest.param(jax.shard_map, id="jax.shard_map"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            experimental = importlib.import_module("jax.experimental.shard_map").shard_map
        except (ImportError, AttributeError):
            experimental = None
    if experimental is not None and experimental is not getattr(jax, "shard_map", None):
        found.append(pytest.param(experimental, id="jax.experimental.shard_map"))
    return found


@pytest.mark.parametrize("shard_map", shard_map_implementations())
def test_shard_map_psum_keeps_its_specs_and_all_reduce(mesh, shard_map):
    kwargs = dict(mesh=mesh, in_specs=P("data", None), out_specs=P(None, None))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the experimental one, on 0.10
        summed = shard_map(lambda a: jax.lax.psum(a, "data"), **kwargs)
    x = jax.device_put(jnp.arange(8 * 16, dtype=jnp.float32).reshape(8, 16),
                       named(mesh, "data"))
    with transforms.record(stages=True) as session:
        ours = transforms.jit(summed)(x)
    plain = jax.jit(summed)
    assert_same_leaves(ours, plain(x))
    call = session.calls[0]
    (step,) = [s for s in call.steps if s.primitive == "shard_map"]
    params = dict(step.params)
    assert params["mesh"] == "Mesh('data': 4, 'model': 2)"
    assert params["in_specs"] == "(P('data', None),)"
    oracle = jax_collectives(plain.lower(x).compile().as_text())
    assert [kind for kind, _ in oracle] == ["all-reduce"]
    (reduce,) = hlo_stage(call).collectives
    assert {g.devices for g in reduce.groups} == data_groups(mesh)
    assert reduce.shape == "f32[2,16]" and reduce.result_bytes == 2 * 16 * 4


def test_vmap_axis_name_psum_is_a_reduce_not_a_collective():
    def centred(a):
        return a - jax.lax.psum(a, "i") / 8

    xs = jnp.arange(24, dtype=jnp.float32).reshape(8, 3)
    with transforms.record(stages=True) as session:
        ours = transforms.jit(transforms.vmap(centred, axis_name="i"))(xs)
        eager = transforms.vmap(centred, axis_name="i")(xs)
    plain = jax.jit(jax.vmap(centred, axis_name="i"))
    assert_same_leaves(ours, plain(xs))
    assert_same_leaves(eager, jax.vmap(centred, axis_name="i")(xs))
    jitted, batched = session.calls
    assert jax_collectives(plain.lower(xs).compile().as_text()) == []
    assert hlo_stage(jitted).collectives == ()
    assert ("axes", "('i',)") in [s for s in batched.steps if s.primitive == "psum"][0].params


def test_sharding_constraint_step_names_spec_and_mesh(mesh):
    x = jnp.ones((8, 16))

    def constrained(a):
        return jax.lax.with_sharding_constraint(a * 2, named(mesh, None, "model"))

    with transforms.record() as session:
        ours = transforms.jit(constrained)(x)
    assert_same_leaves(ours, jax.jit(constrained)(x))
    (step,) = [s for s in session.calls[0].steps if s.primitive == "sharding_constraint"]
    assert dict(step.params)["sharding"] == (
        "NamedSharding(P(None, 'model') on Mesh('data': 4, 'model': 2))")


def test_shardings_and_collectives_survive_save_and_load(mesh, tmp_path):
    params, batch = mlp_inputs()
    with transforms.record(stages=True) as session:
        transforms.jit(transforms.grad(mlp_loss), in_shardings=(named(mesh), named(mesh, "data")),
                       out_shardings=named(mesh))(params, batch)
    session.save(tmp_path / "s.json")
    loaded = load(tmp_path / "s.json").calls[0]
    assert loaded.shardings == session.calls[0].shardings
    assert hlo_stage(loaded).collectives == hlo_stage(session.calls[0]).collectives


# --- replica groups in XLA's spellings --------------------------------------------------

@pytest.mark.parametrize("text, groups", [
    ("{{0,2,4,6},{1,3,5,7}}", [(0, 2, 4, 6), (1, 3, 5, 7)]),
    ("[4,2]<=[8]", [(0, 1), (2, 3), (4, 5), (6, 7)]),
    ("[2,4]<=[4,2]T(1,0)", [(0, 2, 4, 6), (1, 3, 5, 7)]),
    ("mesh['data'=4,'model'=2] {'data'}", [(0, 2, 4, 6), (1, 3, 5, 7)]),
    ("mesh['axis_0'=1,'axis_1'=2,'axis_2'=4], device_ids=([4,2]T(1,0)) {'axis_1'}",
     [(0, 1), (2, 3), (4, 5), (6, 7)]),
    ("something new", []),
])
def test_replica_groups_in_every_spelling(text, groups):
    assert [g.devices for g in parse_groups(text)] == groups


def test_async_and_tuple_collectives_are_read():
    text = ("HloModule m\n\nENTRY %main {\n"
            "  %ags = (f32[2]{0}, f32[8]{0}) all-gather-start(%p), channel_id=1, "
            "replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true\n"
            "  ROOT %cp = bf16[4,4]{1,0} collective-permute(%x), channel_id=2, "
            "source_target_pairs={{0,1},{1,0}}\n}\n")
    gather, permute = collectives_in_hlo(text)
    assert (gather.kind, gather.name, gather.result_bytes) == ("all-gather", "%ags", 40)
    assert gather.computation == "ENTRY %main" and gather.dimensions == "0"
    assert (permute.kind, permute.shape, permute.result_bytes) == (
        "collective-permute", "bf16[4,4]", 32)
    assert [g.devices for g in permute.groups] == [(0, 1), (1, 0)]


# --- bad input: JAX's own error, recorded at the failing step ----------------------------

def test_a_sharding_that_does_not_divide_the_array(mesh):
    def constrained_sum(a):
        return jnp.sum(jax.lax.with_sharding_constraint(a * 2, named(mesh, "data")))

    x = jnp.ones(6)
    with pytest.raises(Exception) as theirs:
        jax.grad(constrained_sum)(x)
    with transforms.record() as session, pytest.raises(type(theirs.value)) as ours:
        transforms.grad(constrained_sum)(x)
    assert str(ours.value) == str(theirs.value)
    call = session.calls[0]
    (error,) = call.errors
    assert error.message == str(theirs.value)
    failing = call.steps[error.step]
    assert failing.primitive == "sharding_constraint" and failing.error == error.message


def test_a_mesh_larger_than_the_devices_present():
    def on_a_big_mesh(a):
        doubled = a * 2
        jax.make_mesh((16,), ("x",))
        return jnp.sum(doubled)

    x = jnp.ones(4)
    with pytest.raises(Exception) as theirs:
        jax.grad(on_a_big_mesh)(x)
    with transforms.record() as session, pytest.raises(type(theirs.value)) as ours:
        transforms.grad(on_a_big_mesh)(x)
    assert str(ours.value) == str(theirs.value)
    (error,) = session.calls[0].errors
    assert error.message == str(theirs.value) and error.step is not None
    assert session.calls[0].steps[error.step].primitive in ("mul", "jit")
    assert error.source is not None and error.source.function == "on_a_big_mesh"


def test_gradients_of_several_arguments_are_named_after_them(mesh):
    params, batch = mlp_inputs()
    params = jax.device_put(params, named(mesh))
    batch = jax.device_put(batch, named(mesh, "data"))
    with transforms.record() as session:
        transforms.grad(mlp_loss, argnums=(0, 1))(params, batch)
    names = {r.name: r for r in session.calls[0].shardings if r.role == "gradient"}
    assert {"grad params['w1']", "grad batch[0]", "grad batch[1]"} <= set(names)
    assert names["grad batch[0]"].argnum == 1
    assert names["grad batch[0]"].spec == repr(
        jax.grad(mlp_loss, argnums=1)(params, batch)[0].sharding.spec)
