"""The example corpus: named functions, inputs and transformed calls.

Every `Case` builds its transformed function from a namespace `T`, which is
either the `jax` module (the oracle) or the `transforms` package (under test):

    case.run(jax)         # what JAX computes
    case.run(transforms)  # must be exactly the same, recorded or not

Cases that mix the two (`jax.vmap(T.grad(f))`) are pure JAX when T is `jax`.
A case with `raises` set must fail, under JAX, with that exception type; ours
must then raise the same type with the same message.

The seed examples (`seed003_*`, `seed000_*`, `seed002_*`) come from the
documents in /work/shared/seeds/; the functions of the other cases are in
corpus_functions.py. The helpers that compare two outcomes exactly
(`outcome`, `assert_same_outcome`, ...) are in outcomes.py, imported here
too: the tests share them.
"""
from __future__ import annotations

import dataclasses
import functools
from collections import namedtuple
from types import ModuleType
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from outcomes import uncached


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[ModuleType], Callable]  # T -> the transformed callable
    args: tuple = ()
    kwargs: dict = dataclasses.field(default_factory=dict)
    raises: type[BaseException] | None = None
    doc: str = ""

    def run(self, T: ModuleType) -> Any:
        return uncached(self.build(T))(*self.args, **self.kwargs)


CASES: list[Case] = []


def case(name: str, build: Callable, *args: Any, raises: type[BaseException] | None = None,
         doc: str = "", **kwargs: Any) -> Case:
    c = Case(name, build, args, kwargs, raises, doc)
    assert name not in {x.name for x in CASES}, f"duplicate case name {name}"
    CASES.append(c)
    return c


# =============================================================================
# Seed 003: "Transformations: grad and vmap"
# =============================================================================

def cubic(x):
    return x**3 + 2 * x**2 - 3 * x + 1


def sigmoid(x):
    return 0.5 * (jnp.tanh(x / 2) + 1)


def predict(W, b, inputs):
    return sigmoid(jnp.dot(inputs, W) + b)


INPUTS = jnp.array([[0.52, 1.12, 0.77],
                    [0.88, -1.08, 0.15],
                    [0.52, 0.06, -1.30],
                    [0.74, -2.49, 1.39]])
TARGETS = jnp.array([True, True, False, True])
W = jnp.array([0.1, 0.4, -0.3])
B = 0.5


def loss(W, b):
    preds = predict(W, b, INPUTS)
    label_probs = preds * TARGETS + (1 - preds) * (1 - TARGETS)
    return -jnp.sum(jnp.log(label_probs))


def loss_and_preds(W, b):
    preds = predict(W, b, INPUTS)
    label_probs = preds * TARGETS + (1 - preds) * (1 - TARGETS)
    return -jnp.sum(jnp.log(label_probs)), preds


def example_loss(W, b, x, y):
    pred = predict(W, b, x)
    label_prob = pred * y + (1 - pred) * (1 - y)
    return -jnp.log(label_prob)


def convolve(x, w):
    output = []
    for i in range(1, len(x) - 1):
        output.append(jnp.dot(x[i - 1:i + 2], w))
    return jnp.array(output)


X = jnp.arange(5.0)
WK = jnp.array([2., 3., 4.])
XS = jnp.stack([X, X])
WS = jnp.stack([WK, WK])
XST = jnp.transpose(XS)
WST = jnp.transpose(WS)


def dist(x, y):
    return jnp.sqrt(jnp.sum((x - y) ** 2))


def all_pairs(T, f):
    return T.vmap(T.vmap(f, in_axes=(None, 0)), in_axes=(0, None))


POINTS = jnp.array([[0., 0.], [1., 0.], [0., 2.]])


def double(x):
    return x * 2


def absolute_where(x):
    return jnp.where(x > 0, x, -x)


def absolute_if(x):
    if x > 0:  # needs one answer, but under vmap x stands for a whole batch
        return x
    else:
        return -x


ABSOLUTE_IF_LINE = absolute_if.__code__.co_firstlineno + 1  # the `if x > 0:` line


def piecewise(x):
    if x < 3:
        return 3. * x ** 2
    else:
        return -4. * x


PIECEWISE_IF_LINE = piecewise.__code__.co_firstlineno + 1


def sqrt_newton(a):
    x = a
    while abs(x * x - a) > 1e-6:  # data-dependent loop
        x = 0.5 * (x + a / x)
    return x


def sum_sq(x):
    return jnp.sum(x ** 2)


def sin_twice(x):
    return jnp.sin(x) * 2.0


case("seed003_grad_tanh", lambda T: T.grad(jnp.tanh), 2.0)
case("seed003_cubic_d1", lambda T: T.grad(cubic), 1.0)
case("seed003_cubic_d2", lambda T: T.grad(T.grad(cubic)), 1.0)
case("seed003_cubic_d3", lambda T: T.grad(T.grad(T.grad(cubic))), 1.0)
case("seed003_loss_grad_default", lambda T: T.grad(loss), W, B)
case("seed003_loss_grad_argnums0", lambda T: T.grad(loss, argnums=0), W, B)
case("seed003_loss_grad_argnums1", lambda T: T.grad(loss, 1), W, B)
case("seed003_loss_grad_argnums01", lambda T: T.grad(loss, (0, 1)), W, B)
case("seed003_loss_value_and_grad", lambda T: T.value_and_grad(loss, (0, 1)), W, B)
case("seed003_loss_has_aux", lambda T: T.grad(loss_and_preds, has_aux=True), W, B)
case("seed003_loss_value_and_grad_has_aux",
     lambda T: T.value_and_grad(loss_and_preds, argnums=(0, 1), has_aux=True), W, B)
case("seed003_loss_hessian_b", lambda T: T.grad(T.grad(loss, 1), 1), W, B)
case("seed003_convolve_vmap", lambda T: T.vmap(convolve), XS, WS)
case("seed003_convolve_vmap_axis1", lambda T: T.vmap(convolve, in_axes=1, out_axes=1), XST, WST)
case("seed003_convolve_vmap_none", lambda T: T.vmap(convolve, in_axes=(0, None)), XS, WK)
case("seed003_convolve_jit", lambda T: T.jit(convolve), X, WK)
case("seed003_convolve_jit_vmap", lambda T: T.jit(T.vmap(convolve)), XS, WS)
case("seed003_all_pairs", lambda T: all_pairs(T, dist), POINTS, POINTS)
case("seed003_per_example_grads",
     lambda T: T.vmap(T.grad(example_loss, (0, 1)), in_axes=(None, None, 0, 0)),
     W, B, INPUTS, TARGETS)
case("seed003_vmap_double_arange", lambda T: T.vmap(double), jnp.arange(3))
case("seed003_absolute_where", lambda T: T.vmap(absolute_where), jnp.arange(-2.0, 3.0))
case("seed003_absolute_if_vmap", lambda T: T.vmap(absolute_if), jnp.arange(-2.0, 3.0),
     raises=jax.errors.TracerBoolConversionError)
case("seed003_absolute_if_grad", lambda T: T.grad(absolute_if), -2.0,
     doc="grad alone carries concrete values: Python `if` works")
case("seed003_piecewise_grad_2", lambda T: T.grad(piecewise), 2.0)
case("seed003_piecewise_grad_4", lambda T: T.grad(piecewise), 4.0)
case("seed003_piecewise_jit_grad", lambda T: T.jit(T.grad(piecewise)), 2.0,
     raises=jax.errors.TracerBoolConversionError)
case("seed003_piecewise_vmap_grad", lambda T: T.vmap(T.grad(piecewise)), jnp.array([2.0, 4.0]),
     raises=jax.errors.TracerBoolConversionError)
case("seed003_sqrt_newton_grad", lambda T: T.grad(sqrt_newton), 2.0)
case("seed003_sum_sq_jit", lambda T: T.jit(sum_sq), jnp.arange(3.0))
case("seed003_sin_twice_jit", lambda T: T.jit(sin_twice), 1.0)

# =============================================================================
# Seed 000: a custom container with static and traced members
# =============================================================================

NTContainer = namedtuple("NTContainer", ["name", "flag", "array"])


def unpack_NTC(c):
    active, passive = (c.array,), (c.name, c.flag)
    return active, passive


def repack_NTC(passive, active):  # the seed's version refers to `value`: fixed here
    (name, flag), (array,) = passive, active
    return NTContainer(name, flag, array)


jax.tree_util.register_pytree_node(NTContainer, unpack_NTC, repack_NTC)

CONTAINER = NTContainer(
    name="composite-container",
    flag=0,
    array=jnp.reshape(jnp.arange(6, dtype="f4"), (3, 2)),
)
CONTAINER_PROD = CONTAINER._replace(flag=1, array=CONTAINER.array + 1)


def test_func(container: NTContainer):
    if container.flag == 0:
        return container.array.sum()
    return container.array.prod()


test_func.__test__ = False  # not a pytest test, despite its name (seed's name kept)

case("seed000_container_jit", lambda T: T.jit(test_func), CONTAINER)
case("seed000_container_vmap", lambda T: T.vmap(test_func), CONTAINER)
case("seed000_container_grad", lambda T: T.grad(test_func), CONTAINER,
     doc="grad returns an NTContainer")
case("seed000_container_grad_prod", lambda T: T.grad(test_func), CONTAINER_PROD)
case("seed000_container_vmap_grad", lambda T: T.vmap(T.grad(test_func)), CONTAINER_PROD)

# =============================================================================
# Seed 002: custom_jvp, a working rule and the Primal/Tangent mismatch
# =============================================================================


@jax.custom_jvp
def log1pexp(x):
    return jnp.log(1. + jnp.exp(x))


@log1pexp.defjvp
def log1pexp_jvp(primals, tangents):
    x, = primals
    x_dot, = tangents
    ans = log1pexp(x)
    ans_dot = (1 - 1 / (1 + jnp.exp(x))) * x_dot
    return ans, ans_dot


LOG1PEXP_JVP_LINE = log1pexp_jvp.__code__.co_firstlineno


class Primal(NamedTuple):
    x: float


class Tangent(NamedTuple):
    sign: bool
    norm: float

    def add(self, n):
        return Tangent(n > 0, self.norm + jnp.abs(n))


@jax.custom_jvp
def init(dummy) -> Primal:
    return Primal(0.)


@init.defjvp
def init_jvp(primals, tangents):
    return Primal(0.), Tangent(0., 0.)


@jax.custom_jvp
def add(p: Primal, n: float) -> Primal:
    return Primal(p.x + n)


@add.defjvp
def add_jvp(primals, tangents):
    p, n = primals
    t, n_dot = tangents  # wrong of course: t is a Primal
    return add(p, n), t.add(n_dot)


def primal_tangent_program(d):
    return add(init(d), d).x


case("seed002_log1pexp_grad", lambda T: T.grad(log1pexp), 100.)
case("seed002_log1pexp_vmap_grad", lambda T: T.vmap(T.grad(log1pexp)), jnp.array([0., 10., 100.]))
case("seed002_log1pexp_jit_grad", lambda T: T.jit(T.grad(log1pexp)), 3.)
case("seed002_log1pexp_jvp", lambda T: lambda x, t: T.jvp(log1pexp, (x,), (t,)), 3., 1.)
case("seed002_log1pexp_vmap", lambda T: T.vmap(log1pexp), jnp.array([0., 10., 100.]))
case("seed002_primal_tangent_grad", lambda T: T.grad(primal_tangent_program), 1.0,
     raises=TypeError)
case("seed002_primal_tangent_jvp",
     lambda T: lambda d, t: T.jvp(primal_tangent_program, (d,), (t,)), 1.0, 1.0,
     raises=TypeError)
case("seed002_primal_tangent_no_transform", lambda T: T.jit(primal_tangent_program), 1.0,
     doc="without differentiation the rules never run: this works")

# =============================================================================
# Control flow, custom rules, jax.nn, random, checkpoint
# (the functions and inputs of these cases and the ones below: corpus_functions.py)
# =============================================================================

from corpus_functions import (
    KEYS,
    MATRIX,
    NN_BATCH,
    NN_X,
    PARAMS,
    RAW_KEYS,
    SPD,
    VEC,
    Scaler,
    aux_fn,
    checkpointed,
    clip_gradient,
    clipped_cube,
    cond_fn,
    cond_of_grads,
    custom_vmapped,
    fori_dynamic_fn,
    fori_fn,
    h,
    host_square,
    int_and_float,
    linearize_then_push,
    nn_gelu_loss,
    nn_logsumexp,
    nn_relu_loss,
    nn_softmax_loss,
    noisy,
    normalize_over_axis,
    params_loss,
    rule_uses_grad,
    sample_uniform,
    scalar_fn,
    scaled,
    scan_fn,
    scan_of_vmap,
    sin_times,
    solve_loss,
    switch_fn,
    two_arg_fn,
    vector_fn,
    vjp_then_pull,
    while_fn,
)

case("cond_grad_pos", lambda T: T.grad(cond_fn), 1.0)
case("cond_grad_neg", lambda T: T.grad(cond_fn), -1.0)
case("cond_vmap", lambda T: T.vmap(cond_fn), VEC)
case("cond_vmap_grad", lambda T: T.vmap(T.grad(cond_fn)), VEC)
case("cond_jit_grad", lambda T: T.jit(T.grad(cond_fn)), -2.0)
case("scan_grad", lambda T: T.grad(scan_fn), jnp.array([0.1, 0.2, -0.3, 1.0]))
case("scan_vmap", lambda T: T.vmap(scan_fn), jnp.array([[0.1, 0.2, 0.3], [1., 2., 3.]]))
case("scan_vmap_grad", lambda T: T.vmap(T.grad(scan_fn)),
     jnp.array([[0.1, 0.2, 0.3], [1., 2., 3.]]))
case("while_vmap", lambda T: T.vmap(while_fn), jnp.array([1., 3., 20.]))
case("while_jvp", lambda T: lambda x, t: T.jvp(while_fn, (x,), (t,)), 3., 1.)
case("while_grad_fails", lambda T: T.grad(while_fn), 3., raises=ValueError,
     doc="reverse-mode through while_loop is unsupported")
case("fori_grad", lambda T: T.grad(fori_fn), 0.7)
case("fori_vmap", lambda T: T.vmap(fori_fn), VEC)
case("fori_dynamic_vmap", lambda T: T.vmap(fori_dynamic_fn, in_axes=(None, 0)),
     1.0, jnp.array([1, 2, 3]))
case("fori_dynamic_jit_grad_fails", lambda T: T.jit(T.grad(fori_dynamic_fn)), 1.0, 3,
     raises=ValueError, doc="a traced trip count makes a while_loop: no reverse mode")
case("custom_vjp_grad", lambda T: T.grad(sin_times, (0, 1)), 0.5, 2.0)
case("custom_vjp_vmap", lambda T: T.vmap(sin_times), VEC, VEC)
case("custom_vjp_vmap_grad", lambda T: T.vmap(T.grad(sin_times)), VEC, VEC)
case("custom_vjp_clip_grad", lambda T: T.grad(clipped_cube), 1.0)
case("custom_vjp_jvp_fails", lambda T: lambda x, t: T.jvp(sin_times, (x, 1.), (t, 0.)), 1., 1.,
     raises=TypeError, doc="custom_vjp functions cannot be forward-differentiated")
case("nn_relu_grad", lambda T: T.grad(nn_relu_loss), NN_X)
case("nn_relu_vmap", lambda T: T.vmap(jax.nn.relu), NN_X)
case("nn_softmax_grad", lambda T: T.grad(nn_softmax_loss), NN_X)
case("nn_softmax_vmap", lambda T: T.vmap(jax.nn.softmax), NN_BATCH)
case("nn_gelu_grad", lambda T: T.grad(nn_gelu_loss), NN_X)
case("nn_gelu_vmap_grad", lambda T: T.vmap(T.grad(jax.nn.gelu)), NN_X)
case("nn_logsumexp_grad", lambda T: T.grad(nn_logsumexp), NN_X)
case("nn_logsumexp_vmap", lambda T: T.vmap(nn_logsumexp), NN_BATCH)
case("random_vmap_keys", lambda T: T.vmap(noisy, in_axes=(0, None)), KEYS, jnp.ones(2))
case("random_vmap_raw_keys", lambda T: T.vmap(sample_uniform), RAW_KEYS)
case("random_split_vmap", lambda T: T.vmap(jax.random.split), KEYS,
     doc="returns typed key arrays")
case("random_grad", lambda T: T.grad(lambda x, k: jnp.sum(noisy(k, x) ** 2)), VEC, KEYS[0])
case("checkpoint_grad", lambda T: T.grad(checkpointed), VEC)
case("checkpoint_vmap_grad", lambda T: T.vmap(T.grad(lambda x: checkpointed(x[None]))), VEC)
case("checkpoint_grad_grad",
     lambda T: T.grad(T.grad(lambda x: checkpointed(jnp.reshape(x, (1,))))), 0.3)

# =============================================================================
# Compositions of grad / vmap / jit, ours mixed with JAX's, and the other APIs
# =============================================================================

case("grad_vmap", lambda T: T.grad(lambda x: T.vmap(h)(x).sum()), VEC)
case("vmap_grad", lambda T: T.vmap(T.grad(h)), VEC)
case("grad_jit", lambda T: T.grad(T.jit(h)), 0.3)
case("jit_grad", lambda T: T.jit(T.grad(h)), 0.3)
case("vmap_jit", lambda T: T.vmap(T.jit(h)), VEC)
case("jit_vmap", lambda T: T.jit(T.vmap(h)), VEC)
case("vmap_vmap", lambda T: T.vmap(T.vmap(h)), MATRIX)
case("jit_jit", lambda T: T.jit(T.jit(h)), VEC)
case("grad_grad", lambda T: T.grad(T.grad(h)), 0.3)
case("jit_vmap_grad", lambda T: T.jit(T.vmap(T.grad(h))), VEC)
case("vmap_grad_grad", lambda T: T.vmap(T.grad(T.grad(h))), VEC)
case("grad_vmap_jit", lambda T: T.grad(lambda x: T.vmap(T.jit(h))(x).sum()), VEC)
case("vmap_jit_grad_axis1", lambda T: T.vmap(T.jit(T.grad(scalar_fn)), in_axes=1), MATRIX)
case("grad_pytree_params", lambda T: T.grad(params_loss), PARAMS, MATRIX)
case("vmap_pytree_params", lambda T: T.vmap(params_loss, in_axes=({"w": None, "b": 0}, None)),
     {"w": PARAMS["w"], "b": jnp.array([[0., 1.], [2., 3.], [4., 5.]])}, MATRIX)
case("value_and_grad_has_aux_dict", lambda T: T.value_and_grad(aux_fn, has_aux=True), 0.4)
case("vmap_out_axes_none", lambda T: T.vmap(lambda x, y: (x * y, y), in_axes=(0, None),
                                            out_axes=(0, None)), VEC, 2.0)
# ours mixed with JAX's
case("mix_jaxvmap_grad", lambda T: jax.vmap(T.grad(h)), VEC)
case("mix_vmap_jaxgrad", lambda T: T.vmap(jax.grad(h)), VEC)
case("mix_jaxjit_grad", lambda T: jax.jit(T.grad(h)), 0.3)
case("mix_grad_jaxjit", lambda T: T.grad(jax.jit(h)), 0.3)
case("mix_jaxgrad_vmap", lambda T: jax.grad(lambda x: T.vmap(h)(x).sum()), VEC)
case("mix_jaxvmap_jaxgrad_vmap",
     lambda T: jax.vmap(jax.grad(lambda x: T.vmap(h)(x).sum())), MATRIX)
case("mix_grad_jaxvmap_grad", lambda T: T.grad(lambda x: jax.vmap(T.grad(h))(x).sum()), VEC)
case("mix_jaxjit_vmap_jaxgrad", lambda T: jax.jit(T.vmap(jax.grad(h))), VEC)
# jvp, vjp, linearize, jacobians
case("jvp", lambda T: lambda x, t: T.jvp(h, (x,), (t,)), 0.3, 1.0)
case("jvp_vector", lambda T: lambda x, t: T.jvp(vector_fn, (x,), (t,)), VEC, jnp.ones(3))
case("jvp_has_aux", lambda T: lambda x, t: T.jvp(aux_fn, (x,), (t,), has_aux=True), 0.4, 1.0)
case("vmap_jvp", lambda T: T.vmap(lambda x: T.jvp(h, (x,), (1.0,))), VEC)
case("vjp", lambda T: lambda x: vjp_then_pull(T, vector_fn, x, cotangent=jnp.ones(3)), VEC)
case("vjp_two_args",
     lambda T: lambda x, y: vjp_then_pull(T, two_arg_fn, x, y, cotangent=jnp.ones(3)),
     VEC, jnp.array([2., 0.5]))
case("linearize", lambda T: lambda x, t: linearize_then_push(T, vector_fn, x, t),
     VEC, jnp.array([1., 0., -1.]))
case("jacfwd", lambda T: T.jacfwd(vector_fn), VEC)
case("jacrev", lambda T: T.jacrev(vector_fn), VEC)
case("jacrev_argnums", lambda T: T.jacrev(two_arg_fn, argnums=(0, 1)), VEC, jnp.array([2., .5]))
case("jacfwd_pytree", lambda T: T.jacfwd(params_loss), PARAMS, MATRIX)
case("hessian", lambda T: T.hessian(scalar_fn), VEC)
case("hessian_cubic", lambda T: T.hessian(cubic), 1.0)
case("jacfwd_jacrev", lambda T: T.jacfwd(T.jacrev(scalar_fn)), VEC)
case("vmap_hessian", lambda T: T.vmap(T.hessian(scalar_fn)), MATRIX)

# =============================================================================
# Less common callables and features
# =============================================================================

case("partial_grad", lambda T: T.grad(functools.partial(scaled, n=3.0)), 0.4)
case("partial_vmap", lambda T: T.vmap(functools.partial(scaled, n=3.0)), VEC)
case("callable_object_grad", lambda T: T.grad(Scaler(2.0)), 0.4)
case("bound_method_vmap", lambda T: T.vmap(Scaler(2.0).apply), VEC)
case("jnp_ufunc_vmap", lambda T: T.vmap(jnp.add, in_axes=(0, None)), MATRIX, VEC)
case("builtin_abs_grad", lambda T: T.grad(abs), -2.0)
case("kwargs_grad", lambda T: T.grad(scaled), 0.4, n=3.0)
case("vmap_axis_name_psum", lambda T: T.vmap(normalize_over_axis, axis_name="i"), VEC)
case("vmap_axis_size", lambda T: T.vmap(lambda x: x * 2., in_axes=None, axis_size=3), 1.5)
case("vmap_no_args", lambda T: T.vmap(lambda: 1.0), raises=ValueError)
case("switch_grad", lambda T: T.grad(switch_fn, 1), 1, 0.5)
case("switch_vmap", lambda T: T.vmap(switch_fn), jnp.array([0, 1, 2]), VEC)
case("custom_vmap", lambda T: T.vmap(custom_vmapped), VEC)
case("pure_callback_vmap", lambda T: T.vmap(host_square), VEC)
case("pure_callback_jit", lambda T: T.jit(host_square), VEC)
case("linalg_solve_grad", lambda T: T.grad(solve_loss, (0, 1)), SPD, VEC)
case("linalg_solve_vmap", lambda T: T.vmap(jnp.linalg.solve, in_axes=(None, 0)), SPD, MATRIX)
case("holomorphic_grad", lambda T: T.grad(lambda z: z ** 2 + 1j * z, holomorphic=True),
     jnp.complex64(1 + 2j))
case("allow_int_grad", lambda T: T.grad(int_and_float, (0, 1), allow_int=True), 0.3, 2)
case("int_grad_fails", lambda T: T.grad(int_and_float, 1), 0.3, 2, raises=TypeError)
case("constant_grad", lambda T: T.grad(lambda x: 1.0), 2.0)
case("unused_arg_vjp",
     lambda T: lambda x, y: vjp_then_pull(T, lambda a, b: a * 2., x, y, cotangent=1.0), 1., 2.)
case("stop_gradient_grad", lambda T: T.grad(lambda x: x * lax.stop_gradient(x) ** 2), 3.0)
case("scan_reverse_unroll_grad", lambda T: T.grad(lambda xs: lax.scan(
    lambda c, x: (c * x + 1., c), 1.0, xs, reverse=True, unroll=2)[0]), jnp.array([.5, 2., 3.]))
case("einsum_vmap_grad", lambda T: T.vmap(T.grad(lambda m: jnp.einsum("ij,ij->", m, m))),
     jnp.ones((2, 2, 3)))
case("random_fold_in_jit_vmap",
     lambda T: T.jit(T.vmap(lambda i: jax.random.normal(jax.random.fold_in(KEYS[0], i)))),
     jnp.arange(3))
case("mix_jaxjvp_vmap", lambda T: lambda x, t: jax.jvp(T.vmap(h), (x,), (t,)), VEC, VEC)
case("mix_jaxhessian_grad", lambda T: jax.hessian(lambda x: jnp.sum(T.grad(scalar_fn)(x))), VEC)
case("mix_linear_transpose_vmap",
     lambda T: lambda ct: jax.linear_transpose(T.vmap(lambda v: v * 3.), VEC)(ct), VEC)
case("mix_eval_shape_grad", lambda T: lambda x: jax.eval_shape(T.grad(scalar_fn), x), VEC)
case("jacrev_has_aux", lambda T: T.jacrev(aux_fn, has_aux=True), 0.4)
case("checkpoint_policy_grad", lambda T: T.grad(lambda x: jnp.sum(jax.checkpoint(
    lambda v: jnp.sin(v) @ jnp.cos(v).T, policy=jax.checkpoint_policies.nothing_saveable)(x))),
     MATRIX)

# Ours called from inside JAX's own tracing of control flow and custom rules.

case("nested_cond_of_grads_jit", lambda T: T.jit(cond_of_grads(T)), -0.5)
case("nested_cond_of_grads_vmap", lambda T: T.vmap(cond_of_grads(T)), VEC)
case("nested_scan_of_vmap_grad", lambda T: T.grad(lambda m: scan_of_vmap(T)(m)[0]), MATRIX)
case("nested_custom_jvp_rule_grad", lambda T: T.vmap(T.grad(rule_uses_grad)), VEC)
case("nested_jit_in_custom_vjp_bwd", lambda T: T.grad(lambda x: clip_gradient(T.jit(h)(x))), 2.)

case("vmap_jit_static_argnums", lambda T: T.vmap(T.jit(scaled, static_argnums=1),
                                                 in_axes=(0, None)), VEC, 3.0)
case("jit_static_argnames_vmap", lambda T: T.jit(T.vmap(scaled), static_argnames="n"), VEC,
     n=3.0, raises=ValueError, doc="vmap maps keyword arguments too, even static ones")
case("grad_jit_static_argnames", lambda T: T.grad(T.jit(scaled, static_argnames="n")), 0.4,
     n=3.0)

CASES_BY_NAME: dict[str, Case] = {c.name: c for c in CASES}


# =============================================================================
# Comparing outcomes: outcomes.py, imported here too
# =============================================================================

from outcomes import (
    Outcome as Outcome,
    assert_same_error as assert_same_error,
    assert_same_leaf as assert_same_leaf,
    assert_same_outcome as assert_same_outcome,
    assert_same_tree as assert_same_tree,
    normalized_message as normalized_message,
    outcome as outcome,
)
