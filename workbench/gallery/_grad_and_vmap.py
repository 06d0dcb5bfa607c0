"""Seed 003, "Transformations: grad and vmap": every example of the page, recorded."""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.test_util import check_grads

import transforms as T

from ._registry import example, expect_failure

# --- the page's functions and data, as the page writes them ------------------


def cubic(x):
    return x**3 + 2*x**2 - 3*x + 1


def sigmoid(x):
    return 0.5 * (jnp.tanh(x / 2) + 1)


def predict(W, b, inputs):
    """Outputs probability of a label being true."""
    return sigmoid(jnp.dot(inputs, W) + b)


INPUTS = jnp.array([[0.52, 1.12, 0.77],
                    [0.88, -1.08, 0.15],
                    [0.52, 0.06, -1.30],
                    [0.74, -2.49, 1.39]])
TARGETS = jnp.array([True, True, False, True])
W = jnp.array([0.1, 0.4, -0.3])
b = 0.5


def loss(W, b):
    """Training loss is the negative log-likelihood of the training examples."""
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
        output.append(jnp.dot(x[i-1:i+2], w))
    return jnp.array(output)


def manually_batched_convolve(xs, ws):
    output = []
    for i in range(xs.shape[0]):
        output.append(convolve(xs[i], ws[i]))
    return jnp.stack(output)


x = jnp.arange(5.0)
w = jnp.array([2., 3., 4.])
xs = jnp.stack([x, x])
ws = jnp.stack([w, w])


def dist(x, y):
    return jnp.sqrt(jnp.sum((x - y) ** 2))


def all_pairs(f):
    return T.vmap(T.vmap(f, in_axes=(None, 0)), in_axes=(0, None))


def absolute_if(x):
    if x > 0:  # needs one answer, but x stands for a whole batch of values
        return x
    else:
        return -x


def absolute_where(x):
    return jnp.where(x > 0, x, -x)


def piecewise(x):
    if x < 3:
        return 3. * x ** 2
    else:
        return -4. * x


def sqrt_newton(a):
    x = a
    while abs(x * x - a) > 1e-6:  # data-dependent loop
        x = 0.5 * (x + a / x)
    return x


def sum_sq(x):
    return jnp.sum(x ** 2)


# --- the examples ------------------------------------------------------------


@example("grad of tanh", "003")
def grad_tanh():
    """jax.grad takes a scalar-valued function and returns a new function that computes its
    gradient: grad(jnp.tanh)(2.0) is 0.07065082. The recording shows tanh's forward step under
    the grad level and the backward pass that JAX's transpose emitted for it."""
    grad_tanh = T.grad(jnp.tanh)
    print(grad_tanh(2.0))


@example("Higher derivatives: grad of grad of grad", "003")
def higher_derivatives():
    """Since grad maps functions to functions, it can be applied repeatedly: the first, second
    and third derivatives of x**3 + 2x**2 - 3x + 1 at 1 are 4, 10 and 6. Each extra grad adds a
    level (grad#1/grad#2/grad#3), and the stages show the program growing with each one."""
    f = cubic
    dfdx = T.grad(f)
    d2fdx = T.grad(dfdx)
    d3fdx = T.grad(d2fdx)
    print(dfdx(1.0))   # 3x² + 4x - 3 evaluated at 1, i.e. 4
    print(d2fdx(1.0))  # 6x + 4 evaluated at 1, i.e. 10
    print(d3fdx(1.0))  # 6


@example("Logistic regression: gradients with argnums", "003")
def logistic_argnums():
    """By default grad differentiates with respect to the first argument; argnums selects
    others, or several at once. The logistic regression loss is differentiated with respect
    to the weights W (argnums=0, the default), the bias b (argnums=1), and both ((0, 1)):
    one recorded call each, with the argnums in the call's options."""
    W_grad = T.grad(loss, argnums=0)(W, b)
    print(f'{W_grad=}')
    W_grad = T.grad(loss)(W, b)
    print(f'{W_grad=}')
    b_grad = T.grad(loss, 1)(W, b)
    print(f'{b_grad=}')
    W_grad, b_grad = T.grad(loss, (0, 1))(W, b)
    print(f'{W_grad=}')
    print(f'{b_grad=}')


@example("value_and_grad: the loss and its gradient in one pass", "003")
def logistic_value_and_grad():
    """value_and_grad computes the loss value as well as its gradient, for example to log
    training progress: one pass, one recorded call, the value 3.5066924."""
    loss_value, Wb_grad = T.value_and_grad(loss, (0, 1))(W, b)
    print(loss_value)


@example("has_aux: returning predictions alongside the loss", "003")
def logistic_has_aux():
    """A function can return (scalar_output, aux_data) with has_aux=True: grad differentiates
    the scalar and passes the auxiliary predictions through untouched."""
    W_grad, preds = T.grad(loss_and_preds, has_aux=True)(W, b)
    print(preds)


@example("Checking derivatives numerically", "003")
def logistic_check_grads():
    """Derivatives are easy to check against finite differences: the numerical derivative with
    respect to b (-0.76293945) against the recorded autodiff one (-0.7629071). JAX's
    check_grads does this automatically to any order; it calls JAX's own jvp/vjp, so only the
    autodiff gradient above is recorded here."""
    eps = 1e-4
    b_grad_numerical = (loss(W, b + eps / 2.) - loss(W, b - eps / 2.)) / eps
    print('b_grad_numerical', b_grad_numerical)
    print('b_grad_autodiff', T.grad(loss, 1)(W, b))
    check_grads(loss, (W, b), order=2)  # check up to 2nd order derivatives
    print('check_grads(loss, (W, b), order=2): passed')


@example("convolve under vmap, against a Python loop", "003")
def convolve_vmap():
    """vmap transforms a function written for single inputs into one that works on batches.
    The Python loop over the batch gives the right answer one example at a time; vmap(convolve)
    gives the same answer with every operation acting on the whole batch at once: the steps
    are recorded with VmapTracers whose batched values have the batch axis."""
    print(convolve(x, w))
    print(manually_batched_convolve(xs, ws))
    auto_batch_convolve = T.vmap(convolve)
    print(auto_batch_convolve(xs, ws))


@example("Choosing axes with in_axes and out_axes", "003")
def convolve_axes():
    """in_axes and out_axes override vmap's default of mapping the leading axis: with the
    batch as the second axis (in_axes=1, out_axes=1), and with in_axes=(0, None) to convolve a
    batch of xs against one shared w (None means the argument is not mapped)."""
    auto_batch_convolve_v2 = T.vmap(convolve, in_axes=1, out_axes=1)
    xst = jnp.transpose(xs)
    wst = jnp.transpose(ws)
    print(auto_batch_convolve_v2(xst, wst))
    batch_convolve_v3 = T.vmap(convolve, in_axes=(0, None))
    print(batch_convolve_v3(xs, w))


@example("all_pairs: vmap of vmap", "003")
def all_pairs_dist():
    """Nesting vmap gives concise "all pairs" computations: the distance between every pair of
    points. Two vmap levels (vmap#1/vmap#2), the inner mapping y, the outer mapping x."""
    points = jnp.array([[0., 0.], [1., 0.], [0., 2.]])
    print(all_pairs(dist)(points, points))


@example("Per-example gradients: vmap of grad", "003")
def per_example_grads():
    """Composing vmap with grad gives the gradient of the logistic regression loss for each
    example separately: write the per-example loss, differentiate it, then vectorize the
    derivative. Each user operation is recorded at vmap#1/grad#2, at vmap#1 and at eval#0."""
    per_example_grads = T.vmap(T.grad(example_loss, (0, 1)), in_axes=(None, None, 0, 0))
    W_grads, b_grads = per_example_grads(W, b, INPUTS, TARGETS)
    print(W_grads)  # one gradient per example
    print(b_grads)


@example("Printing tracers under vmap, grad and jit", "003")
def print_tracers():
    """Printing an argument inside a transformed function shows the tracer that stands in for
    it: a VmapTracer carrying the batch under vmap, a GradTracer with one concrete primal under
    grad, a JitTracer with only a type under jit. print runs once per trace, not once per
    element: it is a side effect at trace time. (Its stages come from those same traces:
    the workbench never runs f again, so each print happens once, as without it.)"""
    def f(x):
        print("x =", x)
        print("jax.typeof(x) =", jax.typeof(x))
        return x * 2
    T.vmap(f)(jnp.arange(3))
    T.grad(f)(3.0)
    T.jit(f)(3.0)


@example("Peeking at vmap's batch through .val", "003")
def tracer_val():
    """vmap's tracers know the whole batch of values: .val (unsupported internals) shows it
    mid-trace. What traced code cannot do is specialize on those values."""
    T.vmap(lambda x: print(x.val))(jnp.arange(3.0))


@example("What a function traces to: .trace(...).jaxpr", "003")
def trace_jaxpr():
    """jit(g).trace(1.0).jaxpr runs only jit's tracing step and shows the jaxpr: just the JAX
    operations (sin, mul), every variable annotated with its JAX type; nothing else about the
    Python function is kept."""
    def g(x):
        return jnp.sin(x) * 2.0
    print(T.jit(g).trace(1.0).jaxpr)


@example("A Python loop against vmap: the jaxprs", "003")
def loop_vs_vmap():
    """The jaxpr of convolve has three windows, three dot products, one concatenate.
    vmap(convolve) is the same program, operation for operation, with a batch axis added to each.
    The Python-loop version holds a full copy of the body per batch element: six dot_generals
    for a batch of two, growing linearly with the batch, while vmap's stays the same size. The
    growth (equations per batch size, 1 to 4) is kept on the vmap(convolve) call."""
    print(T.jit(convolve).trace(x, w).jaxpr)
    print(T.jit(T.vmap(convolve)).trace(xs, ws).jaxpr)
    print(T.jit(manually_batched_convolve).trace(xs, ws).jaxpr)
    print(T.vmap(convolve)(xs, ws))
    # Kept on the vmap(convolve) call just recorded: program size at batch 1 to 4.
    growth = T.growth({"Python loop": manually_batched_convolve, "vmap": T.vmap(convolve)},
                      lambda n: (jnp.stack([x] * n), jnp.stack([w] * n)), sizes=(1, 2, 3, 4),
                      title="equations: manually_batched_convolve vs vmap(convolve)")
    looped, batched = growth.series
    for p, q in zip(looped.points, batched.points):
        print(f"batch {p.size}: loop {p.eqn_count} equations, vmap {q.eqn_count} "
              f"(dot_general: {p.count('dot_general')} vs {q.count('dot_general')})")


@example("absolute under vmap: a Python `if` fails, jnp.where works", "003", shows_failure=True)
def absolute_vmap():
    """Traced code cannot take one control-flow branch based on one element's value: under vmap
    `if x > 0` needs one answer for a whole batch, and JAX raises TracerBoolConversionError at
    the comparison's boolean conversion (recorded as the failing step, with the user's line).
    The fix expresses the choice as an array operation, jnp.where, which computes a
    per-element answer."""
    with expect_failure(jax.errors.TracerBoolConversionError):
        T.vmap(absolute_if)(jnp.arange(-2.0, 3.0))
    print(T.vmap(absolute_where)(jnp.arange(-2.0, 3.0)))


@example("grad through Python control flow: `if` and Newton's sqrt", "003")
def grad_control_flow():
    """Applied on its own, grad evaluates the function with tracers that carry one concrete
    value, so data-dependent Python control flow works: each call differentiates the branch
    actually taken (12 at x=2, -4 at x=4), and the loop of Newton's method for square roots,
    whose trip count depends on the input, differentiates to 1/(2*sqrt(2))."""
    print(T.grad(piecewise)(2.0))  # differentiates the 3x² branch: 6x at x=2
    print(T.grad(piecewise)(4.0))  # differentiates the -4x branch
    print(sqrt_newton(2.0))
    print(T.grad(sqrt_newton)(2.0))  # 1/(2√2) ≈ 0.3536


@example("The same control flow failing under jit(grad) and vmap(grad)", "003",
         shows_failure=True)
def jit_grad_control_flow():
    """The constraints return the moment grad is composed with a transformation that traces
    abstractly: under jit(grad(f)) the tracer carries no value, and under vmap(grad(f)) a
    batch, so the `if` fails again with TracerBoolConversionError and needs jnp.where or
    lax.cond."""
    with expect_failure(jax.errors.TracerBoolConversionError):
        T.jit(T.grad(piecewise))(2.0)
    with expect_failure(jax.errors.TracerBoolConversionError):
        T.vmap(T.grad(piecewise))(jnp.array([2.0, 4.0]))


@example("jit: sum_sq compiled", "003")
def sum_sq_jit():
    """jit records the function's operations once, hands them to XLA and caches the compiled
    result by input types. The recording holds the one trace, and the stages the StableHLO,
    the optimised HLO and XLA's cost and memory analysis; the second call is cached and
    records nothing."""
    jitted = T.jit(sum_sq)
    print(jitted(jnp.arange(3.0)))
    print(jitted(jnp.arange(3.0) + 1))  # cached: no new trace
