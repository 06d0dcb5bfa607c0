"""A data-parallel training step on a global mesh over every process's devices.

Under `workbench run --processes 2` the script calls jax.distributed.initialize()
with no arguments (the launcher fills them in); started by hand, as a user's own
launcher would, it takes `COORDINATOR PROCESS_ID` and passes them.
"""
import functools
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

if len(sys.argv) > 2:
    jax.distributed.initialize(coordinator_address=sys.argv[1], num_processes=2,
                               process_id=int(sys.argv[2]))
else:
    jax.distributed.initialize()

mesh = Mesh(jax.devices(), ("data",))
batch = NamedSharding(mesh, P("data"))
replicated = NamedSharding(mesh, P())


def loss(w, x, y):
    return jnp.mean((x @ w - y) ** 2)


@functools.partial(jax.jit, in_shardings=(replicated, batch, batch), out_shardings=replicated)
def step(w, x, y):
    return w - 0.1 * jax.grad(loss)(w, x, y)


rng = np.random.default_rng(jax.process_index())
x = jax.make_array_from_process_local_data(batch, rng.normal(size=(4, 3)).astype(np.float32))
y = jax.make_array_from_process_local_data(batch, rng.normal(size=(4,)).astype(np.float32))
w = jnp.ones(3, dtype=jnp.float32)
for _ in range(2):
    w = step(w, x, y)
print("process", jax.process_index(), "of", jax.process_count(), "w",
      np.asarray(w.addressable_data(0)).tolist())
