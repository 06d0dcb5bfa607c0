"""A sharded program: a data-parallel training step on the CPU devices JAX has.

`workbench demo` asks XLA for 8 CPU devices (XLA_FLAGS, set by the CLI before
JAX starts); run elsewhere, the example uses whatever devices there are.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import transforms as T

from ._registry import example


def init_params(key):
    k1, k2 = jax.random.split(key)
    return {"w1": jax.random.normal(k1, (8, 16)) * 0.3, "b1": jnp.zeros(16),
            "w2": jax.random.normal(k2, (16, 1)) * 0.3, "b2": jnp.zeros(1)}


def mlp_loss(params, batch):
    x, y = batch
    hidden = jnp.tanh(x @ params["w1"] + params["b1"])
    pred = hidden @ params["w2"] + params["b2"]
    return jnp.mean((pred[:, 0] - y) ** 2)


def make_batch(key, size):
    x = jax.random.normal(key, (size, 8))
    return x, jnp.sin(x.sum(axis=1))


@example("A data-parallel training step on 8 CPU devices", "sharding")
def sharded_training_step():
    """Data parallelism: the batch is split along a `data` mesh axis, one block of rows per
    device, while the parameters are replicated on every device. `jit` with these shardings
    hands the program to XLA's SPMD partitioner, which runs the step on every device and
    inserts an all-reduce so that each device ends up with the gradient of the whole batch.
    The Devices tab (key 5) shows which device holds which rows of the batch, and the
    collectives of the optimised HLO: the all-reduce over all the devices of the mesh."""
    devices = jax.devices()
    mesh = Mesh(np.array(devices), ("data",))
    replicated, by_rows = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
    params = jax.device_put(init_params(jax.random.key(0)), replicated)
    batch = jax.device_put(make_batch(jax.random.key(1), 4 * len(devices)), by_rows)
    step = T.jit(T.value_and_grad(mlp_loss), in_shardings=(replicated, by_rows),
                 out_shardings=replicated)
    loss, grads = step(params, batch)
    params = jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)
    print(f"{len(devices)} devices; batch {batch[0].shape} in blocks of "
          f"{by_rows.shard_shape(batch[0].shape)}; loss {float(loss):.4f}")
    print(f"gradient of w1 {grads['w1'].sharding.spec}: replicated on every device")
