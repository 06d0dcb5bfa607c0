"""Levels named as their authors wrote them (issue 39, item 4): a jaxpr JAX traces for a
control-flow primitive is named for what it traces (`while_body#3 (body)`, not `jaxpr#3`), a
level tracing another function than the call's says which (`jit#2 (tree_bias_correction)`),
a custom rule's level whose run another level recorded says where its steps are, and a
functools.partial is named for its function."""
from __future__ import annotations

import functools
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

import transforms as T
from transforms.model import load
from workbench.analysis import call_label
from workbench.cli._summary import summarize_call
from workbench.run._runner import jax_patched

pytest.importorskip("flax")  # library_programs imports the libraries its programs use
pytest.importorskip("diffrax")
pytest.importorskip("numpyro")

from library_programs import newton_loss  # sqrt(a) by Newton's method in lax.custom_root


def level_lines(call) -> list[str]:
    """`workbench show`'s level rows of the call."""
    return [line for line in summarize_call(call)[1:] if "Trace  " in line]


# --- a jaxpr traced for a control-flow primitive: named for what it traces ---------------

# JAX 0.10's lax.custom_root is a custom_jvp (_custom_root, _root_jvp); from 0.11 a primitive
# of its own, differentiated by JAX (its body traced again, closure-converted).
CUSTOM_JVP_ROOT = "custom_jvp_call" in str(jax.make_jaxpr(newton_loss)(2.0))


def test_a_while_body_and_the_custom_rules_are_named_for_what_they_trace():
    jax.clear_caches()  # what JAX traces again (and so what is recorded) depends on them
    with T.record() as session, jax_patched():
        assert jax.grad(jax.jit(newton_loss))(2.0) == 1.0
    lines = level_lines(session.calls[0])
    assert lines[:3] == [
        "  eval#0  EvalTrace  3 steps",
        "    grad#1  LinearizeTrace  1 step",
        "      grad#1/jit#2  DynamicJaxprTrace  2 steps",
    ]
    if not CUSTOM_JVP_ROOT:
        assert lines[3] == "        grad#1/jit#2/while_body#3 (body)  DynamicJaxprTrace  3 steps"
        assert lines[4].startswith("          grad#1/jit#2/while_body#3/grad#4 (")
        return
    assert lines[3:] == [
        "        grad#1/jit#2/while_body#3 (body)  DynamicJaxprTrace  6 steps",
        "          grad#1/jit#2/while_body#3/grad#4 (newton_sqrt.<locals>.f)  LinearizeTrace  "
        "2 steps",
        "        grad#1/jit#2/custom_jvp_fun#3 (_custom_root)  DynamicJaxprTrace  1 step",
        "        grad#1/jit#2/custom_jvp_rule#3 (_root_jvp)  DynamicJaxprTrace  11 steps",
        "          grad#1/jit#2/custom_jvp_rule#3/custom_jvp_fun#4 (_custom_root)  "
        "DynamicJaxprTrace  1 step",
    ]
    body = next(lv for lv in session.calls[0].levels if lv.label.endswith("while_body#3"))
    assert (body.kind, body.function) == ("jaxpr", "body")  # the trace's kind, as data


def test_a_scan_body_is_named_scan():
    def cumulative(xs):
        def step(carry, x):
            return carry + jax.grad(jnp.sin)(x), carry
        return jax.lax.scan(step, 0.0, xs)[0]
    with T.record() as session, jax_patched():
        jax.jit(cumulative)(jnp.ones(3))
    assert [lv.label for lv in session.calls[0].levels] == [
        "jit#1", "jit#1/scan#2", "jit#1/scan#2/grad#3"]
    assert level_lines(session.calls[0])[1].startswith(
        "      jit#1/scan#2 (step)  DynamicJaxprTrace")  # JAX's name for it: short


# --- a jit inside a jit: named for its function (optax's tree_bias_correction) -----------

def test_a_jit_inside_a_jit_is_named_for_its_function():
    with jax_patched():  # as optax defines it, imported while `workbench run` runs
        @functools.partial(jax.jit, inline=True)
        def tree_bias_correction(moment, decay, count):
            return jax.tree.map(lambda t: t / (1 - decay ** count).astype(t.dtype), moment)

    def step(mu, count):
        return tree_bias_correction(mu, 0.9, count)
    with T.record() as session, jax_patched():
        jax.jit(step)({"w": jnp.ones(3)}, jnp.int32(1))
    assert level_lines(session.calls[0]) == [
        "    jit#1  DynamicJaxprTrace  1 step",
        "      jit#1/jit#2 (test_a_jit_inside_a_jit_is_named_for_its_function.<locals>."
        "tree_bias_correction)  DynamicJaxprTrace  3 steps",
    ]


# --- a custom rule wrapped by two traces: one run, its steps at one level ----------------

def relu_loss(w, x):
    return jnp.sum(jax.nn.relu(w * x) ** 2)


@pytest.mark.parametrize("program, lines", [
    (lambda: T.value_and_grad(relu_loss)(jnp.ones(3), jnp.arange(3.0) - 1), [
        "  eval#0  EvalTrace  16 steps",
        "    value_and_grad#1  LinearizeTrace  5 steps",
        "      value_and_grad#1/custom_jvp_rule#2 (relu's defjvps)  "
        "JaxprTrace  5 steps",
        "        value_and_grad#1/custom_jvp_rule#2/custom_jvp_fun#3 (relu)  EvalTrace  1 step",
        "    custom_jvp_fun#1 (relu)  EvalTrace  0 steps (its run's steps are at "
        "value_and_grad#1/custom_jvp_rule#2/custom_jvp_fun#3: one run of relu, wrapped by two "
        "traces)",
    ]),
    (lambda: T.jit(T.grad(relu_loss))(jnp.ones(3), jnp.arange(3.0) - 1), [
        "    jit#1  DynamicJaxprTrace  15 steps",
        "      jit#1/grad#2  LinearizeTrace  4 steps",
        "        jit#1/grad#2/custom_jvp_rule#3 (relu's defjvps)  JaxprTrace  "
        "5 steps",
        "          jit#1/grad#2/custom_jvp_rule#3/custom_jvp_fun#4 (relu)  DynamicJaxprTrace  "
        "1 step",
        "      jit#1/custom_jvp_fun#2 (relu)  DynamicJaxprTrace  0 steps (its run's steps are at "
        "jit#1/grad#2/custom_jvp_rule#3/custom_jvp_fun#4: one run of relu, wrapped by two "
        "traces)",
    ]),
], ids=["value_and_grad", "jit_grad"])
def test_a_rule_run_wrapped_by_two_traces_says_where_its_steps_are(program, lines):
    """The rule's JaxprTrace forwards relu's custom_jvp_call (known inputs) to the trace
    below: each recorder wraps relu's body, which runs once, inside both levels."""
    with T.record() as session:
        program()
    call = session.calls[0]
    assert level_lines(call) == lines
    empty = next(lv for lv in call.levels if lv.ran_as is not None)
    assert call.levels[empty.ran_as].label == lines[-1].split("steps are at ")[1].split(":")[0]


def test_a_rule_level_holding_steps_of_its_own_is_no_pass_through():
    """With a vmap inside, relu's rule opens at the vmap's level inside the rule's level below
    it, before any step; the lower one then records what the vmap emitted: its own part."""
    xs = jnp.arange(6.0).reshape(2, 3) - 2

    def loss(w):
        return jnp.sum(jax.vmap(lambda x: jax.nn.relu(w * x))(xs))
    with T.record() as session, jax_patched():
        jax.jit(jax.value_and_grad(loss))(jnp.ones(3))
    assert level_lines(session.calls[0])[5:] == [
        "        jit#1/value_and_grad#2/custom_jvp_rule#3 (relu's defjvps)  "
        "JaxprTrace  6 steps",
        "          jit#1/value_and_grad#2/custom_jvp_rule#3/custom_jvp_fun#4 (relu)  "
        "DynamicJaxprTrace  1 step",
        "      jit#1/custom_jvp_fun#2 (relu)  DynamicJaxprTrace  0 steps (its run's steps are at "
        "jit#1/value_and_grad#2/custom_jvp_rule#3/custom_jvp_fun#4: one run of relu, wrapped by "
        "two traces)",
    ]


def test_a_rule_that_records_its_own_steps_has_no_note():
    @jax.custom_jvp
    def f(x):
        return jnp.sin(x)
    f.defjvp(lambda p, t: (f(p[0]), jnp.cos(p[0]) * t[0]))
    with T.record() as session:
        T.jit(f)(1.0)
    assert all(lv.ran_as is None for lv in session.calls[0].levels)


# --- a rule written by defjvps: named for the function it differentiates ------------------

@jax.custom_jvp
def scaled_sin(x, y):
    return jnp.sin(x) * y


def d_scaled_sin_dx(x_dot, out, x, y):
    return jnp.cos(x) * x_dot * y


scaled_sin.defjvps(d_scaled_sin_dx, lambda y_dot, out, x, y: jnp.sin(x) * y_dot)


def test_a_defjvps_rule_is_named_for_its_function():
    """defjvps wraps the tangent functions in a closure of JAX's (`custom_jvp.defjvps.
    <locals>.jvp` on every release): the rule's level is named for the function."""
    with T.record() as session:
        T.grad(scaled_sin)(1.0, 2.0)
    labels = [f"{lv.label} ({lv.function})" for lv in session.calls[0].levels if lv.function]
    assert labels == ["grad#1 (scaled_sin)", "grad#1/custom_jvp_rule#2 (scaled_sin's defjvps)",
                      "custom_jvp_fun#1 (scaled_sin)",
                      "grad#1/custom_jvp_rule#2/custom_jvp_fun#3 (scaled_sin)"]


def test_a_defjvp_rule_keeps_its_own_name():
    @jax.custom_jvp
    def f(x):
        return jnp.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        return f(primals[0]), jnp.cos(primals[0]) * tangents[0]

    with T.record() as session:
        T.grad(f)(1.0)
    assert [lv.function for lv in session.calls[0].levels if lv.kind == "custom_jvp_rule"] == [
        "test_a_defjvp_rule_keeps_its_own_name.<locals>.f_jvp"]


# --- a functools.partial: named for its function ----------------------------------------

def potential_energy(model, params):
    return jnp.sum(params ** 2) * model


def test_a_partial_is_named_for_its_function():
    with T.record() as session:
        T.value_and_grad(functools.partial(functools.partial(potential_energy), 2.0))(
            jnp.ones(2))
    call = session.calls[0]
    assert call_label(call) == "value_and_grad(potential_energy)"
    assert [s.name for s in call.stages][:1] == ["f"]


def test_equinox_filter_value_and_grad_is_named_for_the_users_function():
    """equinox differentiates a closure of its wrapper (`fun_value_and_grad`), whose `self`
    wraps the user's function."""
    eqx = pytest.importorskip("equinox")
    model = [eqx.nn.Linear(3, 4, key=jax.random.key(0)), jax.nn.relu]
    with T.record() as session:
        with jax_patched():
            eqx.filter_value_and_grad(layers_loss)(model, jnp.ones(3))
    assert [call_label(c) for c in session.calls] == ["value_and_grad(layers_loss)"]
    # and its trees by the user's parameters: the closure's _diff_x and *args are model and x
    trees = [(t.role, t.name) for t in session.calls[0].trees]
    assert ("input", "model") in trees and ("input", "x") in trees, trees
    assert ("gradient", "model") in trees, trees
    assert not [name for _, name in trees if name.startswith(("_diff", "_nondiff", "args["))]


def layers_loss(model, x):
    return jnp.sum(model[1](model[0](x)))


NUMPYRO_SCRIPT = """
import jax, jax.numpy as jnp
import numpyro, numpyro.distributions as dist
from numpyro.infer.util import initialize_model
def model(x, y=None):
    w = numpyro.sample("w", dist.Normal(0, 1).expand([2]))
    numpyro.sample("y", dist.Bernoulli(logits=x @ w), obs=y)
initialize_model(jax.random.PRNGKey(1), model, model_args=(jnp.ones((4, 2)), jnp.ones(4)))
"""


@pytest.mark.slow
def test_numpyros_potential_energy_is_named_as_numpyro_wrote_it(tmp_path):
    pytest.importorskip("numpyro")
    script, out = tmp_path / "logistic.py", tmp_path / "logistic.json"
    script.write_text(NUMPYRO_SCRIPT)
    subprocess.run([sys.executable, "-m", "workbench", "dump", str(script), "-o", str(out)],
                   check=True, capture_output=True, timeout=300)
    labels = [call_label(c) for c in load(out).calls]
    assert labels and set(labels) == {"value_and_grad(potential_energy)"}
