"""The functions and inputs the corpus's later cases transform; corpus.py registers the cases.

Control flow, custom rules, jax.nn, random and checkpoint; compositions of the
transformations and the other APIs; less common callables and features; ours called
inside JAX's own tracing. Kept apart from corpus.py, which holds the seed examples (whose
source lines are in TUI snapshots) and every case, so that each file stays short.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

# =============================================================================
# Control flow, custom rules, jax.nn, random, checkpoint
# =============================================================================


def cond_fn(x):
    return lax.cond(x > 0, lambda v: jnp.sin(v) * v, lambda v: v ** 3, x)


def scan_fn(xs):
    def body(carry, x):
        carry = carry * 0.9 + jnp.sin(x)
        return carry, carry ** 2
    final, ys = lax.scan(body, 0.0, xs)
    return final + ys.sum()


def while_fn(x):
    return lax.while_loop(lambda v: v < 10., lambda v: v * 2., x)


def fori_fn(x):
    return lax.fori_loop(0, 3, lambda i, v: v * jnp.cos(v) + i, x)


def fori_dynamic_fn(x, n):
    return lax.fori_loop(0, n, lambda i, v: v * 1.5, x)


@jax.custom_vjp
def sin_times(x, y):
    return jnp.sin(x) * y


def sin_times_fwd(x, y):
    return sin_times(x, y), (jnp.cos(x), jnp.sin(x), y)


def sin_times_bwd(res, g):
    cos_x, sin_x, y = res
    return (cos_x * g * y, sin_x * g)


sin_times.defvjp(sin_times_fwd, sin_times_bwd)


@jax.custom_vjp
def clip_gradient(x):
    return x


def clip_gradient_fwd(x):
    return x, None


def clip_gradient_bwd(_, g):
    return (jnp.clip(g, -0.5, 0.5),)


clip_gradient.defvjp(clip_gradient_fwd, clip_gradient_bwd)


def clipped_cube(x):
    return clip_gradient(x * 3.) ** 2


NN_X = jnp.array([-1.5, -0.2, 0.0, 0.7, 2.0])
NN_WEIGHTS = jnp.array([0.3, -1.0, 2.0, 0.5, 1.5])
NN_BATCH = jnp.array([[-1.0, 0.5, 2.0], [3.0, 0.0, -2.0]])


def nn_relu_loss(x):
    return jnp.sum(jax.nn.relu(x) * NN_WEIGHTS)


def nn_softmax_loss(x):
    return jnp.sum(jax.nn.softmax(x) * NN_WEIGHTS)


def nn_gelu_loss(x):
    return jnp.sum(jax.nn.gelu(x) * NN_WEIGHTS)


def nn_logsumexp(x):
    return jax.nn.logsumexp(x)


def noisy(key, x):
    return x + jax.random.normal(key, x.shape)


def sample_uniform(key):
    return jax.random.uniform(key, (2,))


KEYS = jax.random.split(jax.random.key(0), 3)
RAW_KEYS = jax.random.split(jax.random.PRNGKey(1), 3)


def checkpointed(x):
    g = jax.checkpoint(lambda v: jnp.sin(jnp.sin(v)) * v)
    return jnp.sum(g(x) * x)


VEC = jnp.array([0.5, -1.0, 2.0])


# =============================================================================
# Compositions of grad / vmap / jit, ours mixed with JAX's, and the other APIs
# =============================================================================


def h(x):
    return jnp.sin(x) * x ** 2


def vector_fn(x):
    return jnp.sin(x) * jnp.sum(x ** 2)


def scalar_fn(x):
    return jnp.sum(jnp.sin(x) * x ** 2)


def two_arg_fn(x, y):
    return jnp.tanh(x) * y[0] + y[1] ** 2


def params_loss(params, x):
    return jnp.sum((jnp.dot(x, params["w"]) + params["b"]) ** 2)


PARAMS = {"w": jnp.array([[1., 2.], [0.5, -1.], [0., 3.]]), "b": jnp.array([0.1, -0.2])}
MATRIX = jnp.array([[0.1, 0.2, 0.3], [-1., 0.5, 2.]])


def aux_fn(x):
    return jnp.sin(x) * 2., {"x": x, "cos": jnp.cos(x)}


def vjp_then_pull(T, f, *primals, cotangent):
    out, pullback = T.vjp(f, *primals)
    return out, pullback(cotangent)


def linearize_then_push(T, f, primal, tangent):
    out, f_jvp = T.linearize(f, primal)
    return out, f_jvp(tangent), f_jvp(2 * tangent)



# =============================================================================
# Less common callables and features
# =============================================================================


def scaled(x, n=2.0):
    return jnp.sin(x) * n


class Scaler:
    """A callable object, with a method, as a transformed function."""

    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        return jnp.tanh(x) * self.k

    def apply(self, x):
        return jnp.cos(x) * self.k


def normalize_over_axis(x):
    return x / lax.psum(x, "i")


def switch_fn(i, x):
    return lax.switch(i, [jnp.sin, jnp.cos, lambda v: v ** 2], x)


@jax.custom_batching.custom_vmap
def custom_vmapped(x):
    return jnp.sin(x)


@custom_vmapped.def_vmap
def custom_vmapped_rule(axis_size, in_batched, xs):
    return jnp.cos(xs) * axis_size, in_batched[0]


def host_square(x):
    return jax.pure_callback(lambda v: np.square(v), jax.ShapeDtypeStruct(x.shape, x.dtype), x,
                             vmap_method="sequential")


SPD = jnp.array([[4., 1., 0.], [1., 3., 0.5], [0., 0.5, 2.]])


def solve_loss(a, b):
    return jnp.sum(jnp.linalg.solve(a, b) ** 2)


def int_and_float(x, n):
    return jnp.sin(x) * n



# Ours called from inside JAX's own tracing of control flow and custom rules.


def cond_of_grads(T):
    return lambda x: lax.cond(x > 0, T.grad(jnp.sin), T.grad(jnp.cos), x)


def scan_of_vmap(T):
    def body(carry, row):
        return carry + T.vmap(h)(row).sum(), carry
    return lambda m: lax.scan(body, 0.0, m)


@jax.custom_jvp
def rule_uses_grad(x):
    return jnp.sin(x) * x


@rule_uses_grad.defjvp
def rule_uses_grad_jvp(primals, tangents):
    x, = primals
    t, = tangents
    slope = jax.grad(lambda v: jnp.sin(v) * v)(x)
    return rule_uses_grad(x), slope * t


