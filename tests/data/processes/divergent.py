"""Process 0 traces a sum (an all-reduce over every device) that process 1 does not."""
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

jax.distributed.initialize()
mesh = Mesh(jax.devices(), ("data",))
x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("data")),
                                           np.arange(4, dtype=np.float32))


@jax.jit
def step(x):
    y = jnp.sin(x)
    if jax.process_index() == 0:
        y = y + jnp.sum(y)
    return y * 2


print("out", step(x).addressable_data(0))
