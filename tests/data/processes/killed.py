"""Process 1 is killed (SIGKILL) after the first step; process 0 then waits for it."""
import os
import signal

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

jax.distributed.initialize()
mesh = Mesh(jax.devices(), ("data",))
x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("data")),
                                           np.arange(4, dtype=np.float32))
total = jax.jit(jnp.sum, out_shardings=NamedSharding(mesh, P()))
print("first", float(total(x).addressable_data(0)), flush=True)
if jax.process_index() == 1:
    os.kill(os.getpid(), signal.SIGKILL)
print("second", float(total(x * 2).addressable_data(0)), flush=True)
