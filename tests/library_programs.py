"""Programs written as users of flax (linen, nnx), equinox, optax, numpyro and diffrax write
them, each with its library's documented API, and two of JAX's own idioms (implicit
differentiation through lax.custom_root, a Hessian-vector product, MAML's inner steps). Models are small and
steps few: each runs in a second or two.

The library tests (tests/transforms/test_libraries.py, test_level_names.py) and the sweep
over all of them (tests/workbench/test_library_sweep.py) run these; a test module imports
this one after pytest.importorskip of the libraries. Each `run_*` takes no argument and
returns its results (a pytree of arrays).
"""
from __future__ import annotations

import os
import sys

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import optax
from flax import linen as nn, nnx
from numpyro.infer import MCMC, NUTS

FILE = os.path.abspath(__file__)


def x_y(n: int = 8):
    x = jnp.linspace(-1.0, 1.0, 2 * n).reshape(n, 2)
    return x, jnp.sin(x[:, 0]) * x[:, 1]


# --- flax linen + optax adamw: a jitted training step ----------------------------------------

class LinenMLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        hidden = nn.relu(nn.Dense(8)(x))
        return nn.Dense(1)(hidden)[:, 0]


def run_linen():
    x, y = x_y()
    model, tx = LinenMLP(), optax.adamw(1e-2)
    params = model.init(jax.random.key(0), x)
    opt_state = tx.init(params)

    def loss(params):
        return jnp.mean((model.apply(params, x) - y) ** 2)

    @jax.jit
    def train_step(params, opt_state):
        value, grads = jax.value_and_grad(loss)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    for _ in range(2):
        params, opt_state, value = train_step(params, opt_state)
    return params, opt_state, value


# --- flax nnx (with a custom_vjp) + optax: nnx.jit, nnx.value_and_grad -----------------------

@jax.custom_vjp
def clip_gradient(x):
    return x


clip_gradient.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -1.0, 1.0),))


class NnxMLP(nnx.Module):
    def __init__(self, rngs):
        self.l1 = nnx.Linear(2, 8, rngs=rngs)
        self.l2 = nnx.Linear(8, 1, rngs=rngs)

    def __call__(self, x):
        return self.l2(clip_gradient(nnx.relu(self.l1(x))))[:, 0]


def run_nnx():
    x, y = x_y()
    model = NnxMLP(nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)

    @nnx.jit
    def train_step(model, optimizer):
        def loss(model):
            return jnp.mean((model(x) - y) ** 2)
        value, grads = nnx.value_and_grad(loss)(model)
        optimizer.update(model, grads)
        return value

    values = []
    for _ in range(2):
        values.append(train_step(model, optimizer))
    return nnx.state(model), values


# --- equinox + optax: a CNN, eqx.filter_jit and eqx.filter_value_and_grad ---------------------

class CNN(eqx.Module):
    layers: list

    def __init__(self, key):
        conv_key, linear_key = jax.random.split(key)
        self.layers = [eqx.nn.Conv2d(1, 3, kernel_size=3, key=conv_key), jax.nn.relu,
                       eqx.nn.MaxPool2d(kernel_size=2, stride=2), jnp.ravel,
                       eqx.nn.Linear(3 * 3 * 3, 2, key=linear_key)]

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def run_equinox_cnn():
    images = jnp.linspace(0.0, 1.0, 4 * 8 * 8).reshape(4, 1, 8, 8)
    labels = jnp.array([0, 1, 1, 0])
    tx = optax.adam(1e-2)

    def loss(model, images, labels):
        logits = jax.vmap(model)(images)
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    @eqx.filter_jit
    def train_step(model, opt_state, images, labels):
        value, grads = eqx.filter_value_and_grad(loss)(model, images, labels)
        updates, opt_state = tx.update(grads, opt_state, eqx.filter(model, eqx.is_array))
        return eqx.apply_updates(model, updates), opt_state, value

    model = CNN(jax.random.key(0))
    opt_state = tx.init(eqx.filter(model, eqx.is_array))
    for _ in range(2):
        model, opt_state, value = train_step(model, opt_state, images, labels)
    return eqx.filter(model, eqx.is_array), opt_state, value


# Issue 39, item 1: MaxPool2d's float fields reach jax.jit inside filter_jit's static argument.
def run_max_pool_in_filter_jit():
    pool = eqx.nn.MaxPool2d(kernel_size=2, stride=2)

    @eqx.filter_jit
    def f(pool, x):
        return jnp.sum(pool(x))
    return f(pool, jnp.arange(16.0).reshape(1, 4, 4))


# Issue 39, item 1: jax.nn.relu (a custom_jvp function) among a model's layers, passed
# through by filter_value_and_grad.
def layers_loss(model, x):
    for layer in model:
        x = layer(x)
    return jnp.sum(x)


def run_module_list_holding_relu():
    model = [eqx.nn.Linear(3, 4, key=jax.random.PRNGKey(0)), jax.nn.relu]
    return eqx.filter_value_and_grad(layers_loss)(model, jnp.ones(3))


# --- numpyro: NUTS on a small logistic regression ---------------------------------------------

def logistic_regression(x, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([2]))
    b = numpyro.sample("b", dist.Normal(0.0, 1.0))
    numpyro.sample("y", dist.Bernoulli(logits=x @ w + b), obs=y)


def run_numpyro_nuts():
    x, _ = x_y()
    y = (x[:, 0] > x[:, 1]).astype(jnp.float32)
    mcmc = MCMC(NUTS(logistic_regression), num_warmup=3, num_samples=3, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(0), x, y)
    return mcmc.get_samples()


# --- diffrax: an ODE solve under grad ---------------------------------------------------------

def vector_field(t, y, rate):
    return -rate * jnp.sin(y)


def run_diffrax():
    def loss(rate):
        solution = diffrax.diffeqsolve(diffrax.ODETerm(vector_field), diffrax.Tsit5(), t0=0.0,
                                       t1=1.0, dt0=0.25, y0=jnp.array([1.0, 2.0]), args=rate)
        return jnp.sum(solution.ys[-1] ** 2)

    return jax.grad(loss)(jnp.float32(0.5))


# --- implicit differentiation through lax.custom_root ----------------------------------------

def newton_sqrt(a):
    """sqrt(a) by Newton's method inside lax.custom_root; the body calls jax.grad."""
    def f(x):
        return x * x - a

    def solve(g, x0):
        def body(x):
            return x - g(x) / jax.grad(g)(x)
        return jax.lax.while_loop(lambda x: jnp.abs(g(x)) > 1e-6, body, x0)
    return jax.lax.custom_root(f, 1.0, solve, lambda g, y: y / g(1.0))


def newton_loss(a):
    return newton_sqrt(a) ** 2


def run_custom_root():
    return jax.grad(jax.jit(newton_loss))(2.0)


# --- a Hessian-vector product: forward over reverse -------------------------------------------

def rosenbrock(x):
    return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def run_hvp():
    x = jnp.array([0.5, -1.0, 2.0, 1.5])
    return jax.jvp(jax.grad(rosenbrock), (x,), (jnp.ones_like(x),))[1]


# --- MAML: two inner gradient steps, differentiated through by the outer one -----------------

def mse(params, x, y):
    w, b = params
    return jnp.mean((jnp.tanh(x @ w + b) - y) ** 2)


def run_maml():
    x, y = x_y()

    def adapted(params):
        for _ in range(2):
            grads = jax.grad(mse)(params, x, y)
            params = jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)
        return params

    def meta_loss(params):
        return mse(adapted(params), x, y)

    return jax.jit(jax.value_and_grad(meta_loss))((jnp.full((2,), 0.5), jnp.float32(0.1)))


def main(out: str, names: list[str]) -> None:
    """Run the programs named, saving each one's results as OUT/NAME.npz (its leaves)."""
    for name in names:
        result = globals()[f"run_{name}"]()
        np.savez(os.path.join(out, f"{name}.npz"),
                 *[np.asarray(leaf) for leaf in jax.tree.leaves(result)])


if __name__ == "__main__":  # `python library_programs.py OUT NAME...`, or `workbench dump` it
    main(sys.argv[1], sys.argv[2:])
