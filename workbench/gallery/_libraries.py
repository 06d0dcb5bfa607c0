"""Programs written with flax, equinox, optax and diffrax: a short training step each.

The libraries call `jax.jit`, `jax.value_and_grad` ... themselves, so these examples
run inside `runner.jax_patched()`, as `workbench run` runs a script: whatever the
library hands JAX is recorded. Each example is registered only where its libraries
are installed (they are test dependencies, not the workbench's own).
"""
from __future__ import annotations

import importlib.util

import jax
import jax.numpy as jnp

import transforms as T

from ..run import jax_patched
from ._registry import example, expect_failure


def _installed(*names: str) -> bool:
    return all(importlib.util.find_spec(n) is not None for n in names)


def _batch(n: int = 8):
    x = jnp.linspace(-1.0, 1.0, 2 * n).reshape(n, 2)
    return x, jnp.sin(x[:, 0]) * x[:, 1]


if _installed("flax", "optax"):

    @example("A flax linen MLP, one optax adam step", "libraries")
    def flax_linen_adam_step():
        """A flax linen model keeps its parameters in a nested dict, named by module scope:
        the pytree view shows `params['params']['Dense_0']['kernel']`, and optax's adam
        state beside it (`opt_state[0].mu`, `.nu`, `.count`) with the same structure. Steps
        read flax's own name scopes (`jvp(MLP)/Dense_0`) and point at the lines of this
        training step; the installed library's line they came through is kept as `via`."""
        import flax.linen as nn
        import optax

        class MLP(nn.Module):
            @nn.compact
            def __call__(self, x):
                x = nn.relu(nn.Dense(8)(x))
                return nn.Dense(1)(x)[:, 0]

        model, tx = MLP(), optax.adam(1e-2)
        x, y = _batch()
        params = model.init(jax.random.key(0), x)
        opt_state = tx.init(params)

        def loss(params):
            return jnp.mean((model.apply(params, x) - y) ** 2)

        @T.jit
        def train_step(params, opt_state):
            value, grads = T.value_and_grad(loss)(params)
            updates, opt_state = tx.update(grads, opt_state)
            return optax.apply_updates(params, updates), opt_state, value

        for _ in range(2):
            params, opt_state, value = train_step(params, opt_state)
        print(f"loss after 2 adam steps: {float(value):.4f}")


if _installed("equinox", "optax"):

    @example("An equinox MLP under eqx.filter_jit and eqx.filter_value_and_grad", "libraries")
    def equinox_filter_jit_step():
        """eqx.filter_jit splits its arguments into array leaves (traced) and everything else
        (static), and hands jit that partition. The recording puts it back together: the
        pytree view names leaves by the model (`model.layers[0].weight`), shows the
        module's static fields (`in_features=2`), and marks `model.activation` static. The
        relu of each layer is a custom_jvp level; identical ones fold into one row (×N)."""
        import equinox as eqx
        import optax

        eqx.clear_caches()  # its jit wrappers, if made before the recording began
        x, y = _batch()
        model = eqx.nn.MLP(in_size=2, out_size=1, width_size=8, depth=2, key=jax.random.key(0))
        tx = optax.adam(1e-2)
        opt_state = tx.init(eqx.filter(model, eqx.is_inexact_array))

        def loss(model):
            return jnp.mean((jax.vmap(model)(x)[:, 0] - y) ** 2)

        with jax_patched():
            @eqx.filter_jit
            def equinox_train_step(model, opt_state):
                value, grads = eqx.filter_value_and_grad(loss)(model)
                params = eqx.filter(model, eqx.is_inexact_array)
                updates, opt_state = tx.update(grads, opt_state, params)
                return eqx.apply_updates(model, updates), opt_state, value

            for _ in range(2):
                model, opt_state, value = equinox_train_step(model, opt_state)
        print(f"loss after 2 adam steps: {float(value):.4f}")

    @example("jit of an equinox module fails before tracing; eqx.filter_jit does not", "libraries",
             shows_failure=True)
    def equinox_jit_needs_filter_jit():
        """An equinox module holds non-array leaves (its activation function), and `jax.jit`
        must turn every leaf of its arguments into an abstract array: it raises TypeError
        before tracing anything. The failure is still a recorded call, whose hint names the
        fixes: eqx.filter_jit, which traces only the array leaves, or static_argnums. The
        second call shows the fix."""
        import equinox as eqx

        model = eqx.nn.MLP(in_size=2, out_size=1, width_size=4, depth=1, key=jax.random.key(1))
        x, _ = _batch(4)

        def predict(model, x):
            return jax.vmap(model)(x)[:, 0]

        with expect_failure(TypeError):
            T.jit(predict)(model, x)
        with jax_patched():
            out = eqx.filter_jit(predict)(model, x)
        print(f"eqx.filter_jit(predict): {out.shape[0]} predictions")


if _installed("flax", "optax"):

    @example("A flax nnx model with a custom_vjp, one nnx.Optimizer step under nnx.jit",
             "libraries")
    def flax_nnx_optimizer_step():
        """flax nnx modules are Python objects; nnx.jit splits them into a graph definition
        and flat state before jit sees them. The recording merges them back, so leaves read
        `model.l1.kernel.value` and the optimizer's `opt_state[0].mu['l1']['kernel']`. nnx
        adds no name scopes to JAX's program; the recording reads the modules running each
        step from Python's stack instead, so the steps are listed under `MLP/l1` and
        `MLP/l2` (a module by its attribute), located at the module's own method
        (`MLP.__call__`, via `Linear.__call__`). The custom_vjp's backward rule is its own
        level."""
        import optax
        from flax import nnx

        @jax.custom_vjp
        def clip_gradient(x):
            return x

        def clip_fwd(x):
            return x, None

        def clip_bwd(_, g):
            return (jnp.clip(g, -1.0, 1.0),)

        clip_gradient.defvjp(clip_fwd, clip_bwd)

        class MLP(nnx.Module):
            def __init__(self, rngs):
                self.l1 = nnx.Linear(2, 8, rngs=rngs)
                self.l2 = nnx.Linear(8, 1, rngs=rngs)

            def __call__(self, x):
                return self.l2(clip_gradient(nnx.relu(self.l1(x))))[:, 0]

        x, y = _batch()
        model = MLP(nnx.Rngs(0))
        optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)

        with jax_patched():
            @nnx.jit
            def nnx_train_step(model, optimizer):
                def loss(model):
                    return jnp.mean((model(x) - y) ** 2)
                value, grads = nnx.value_and_grad(loss)(model)
                optimizer.update(model, grads)
                return value

            for _ in range(2):
                value = nnx_train_step(model, optimizer)
        print(f"loss after 2 adam steps: {float(value):.4f}")


if _installed("diffrax"):

    @example("A diffrax ODE solve under grad: one step fitting a decay rate", "libraries")
    def diffrax_fit_step():
        """diffrax solves the ODE in an equinox while loop and differentiates it with
        checkpointed adjoints, so one grad call has hundreds of levels. Runs of identical
        levels (the solver's per-step custom_jvp helpers) fold into one row with a count.
        The vector field's `sin` and `mul`, evaluated again by equinox from a staged jaxpr,
        are located at the line that wrote them, not inside the library. The Stages view
        holds what JAX made: grad(f) and, for the loop's steps, what equinox linearizes
        and transposes (`_to_linearize`, `_to_vjp`)."""
        import equinox as eqx

        with jax_patched():  # diffrax jits its solver when imported: imported as a script would
            import diffrax
        eqx.clear_caches()  # jit wrappers equinox made before the recording began

        def vector_field(t, y, rate):
            return -rate * jnp.sin(y)

        y0, target = jnp.array([1.0, 2.0]), jnp.array([0.5, 1.2])

        def loss(rate):
            solution = diffrax.diffeqsolve(diffrax.ODETerm(vector_field), diffrax.Tsit5(),
                                           t0=0.0, t1=1.0, dt0=0.25, y0=y0, args=rate)
            return jnp.sum((solution.ys[-1] - target) ** 2)

        rate = jnp.float32(0.5)
        with jax_patched():
            gradient = T.grad(loss)(rate)
        rate = rate - 0.5 * gradient
        print(f"d loss / d rate = {float(gradient):.4f}; rate after one step {float(rate):.4f}")
