"""Every corpus case gives exactly JAX's outcome: outside a record block, inside
one, and with inline_jnp=True (values to float32 rounding there, see below).

The oracle is the same case built from the `jax` module itself. An outcome is
a result (same pytree structure, leaf types, dtypes, shapes, weak types and
values) or an exception (same type, same message).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from corpus import (
    CASES,
    CASES_BY_NAME,
    B,
    W,
    assert_same_outcome,
    loss,
    normalized_message,
    outcome,
    piecewise,
    sqrt_newton,
)
from jax._src import core as jax_src_core
from jax.test_util import check_grads
from sweeps import sweep

import transforms

IDS = [c.name for c in CASES]


@functools.cache
def oracle(name: str):
    return outcome(lambda: CASES_BY_NAME[name].run(jax))


@functools.cache
def oracle_jaxpr(name: str):
    c = CASES_BY_NAME[name]
    return outcome(lambda: str(jax.make_jaxpr(c.build(jax))(*c.args, **c.kwargs)))


@pytest.fixture(autouse=True)
def _trace_state_stays_clean():
    yield
    assert jax_src_core.trace_state_clean()


@pytest.mark.parametrize("case", sweep(CASES, IDS))
def test_oracle_behaves_as_the_corpus_says(case):
    """Guards the corpus itself: a case meant to fail fails under JAX, with that type."""
    result = oracle(case.name)
    if case.raises is None:
        assert result.error is None, repr(result.error)
    else:
        assert type(result.error) is case.raises, repr(result.error)


@pytest.mark.parametrize("case", sweep(CASES, IDS))
def test_same_as_jax_outside_record(case):
    assert_same_outcome(outcome(lambda: case.run(transforms)), oracle(case.name))


def _assert_session_matches(session, ours) -> None:
    assert session.calls, "a call through transforms inside record() is recorded"
    if ours.error is None:
        assert all(call.ok for call in session.calls), [c.errors for c in session.calls]
    else:
        errors = [e for call in session.calls for e in call.errors]
        assert errors, "the failure is recorded"
        last = errors[-1]
        assert last.type_name.rsplit(".", 1)[-1] == type(ours.error).__name__
        assert last.message == str(ours.error)


@pytest.mark.parametrize("case", sweep(CASES, IDS))
def test_same_as_jax_inside_record(case):
    with transforms.record() as session:
        ours = outcome(lambda: case.run(transforms))
    assert_same_outcome(ours, oracle(case.name))
    _assert_session_matches(session, ours)


# With inline_jnp=True the recorder evaluates jnp wrappers' bodies op by op
# instead of binding the compiled wrapper: values may differ in the last
# float32 bit (see test_inline_jnp_results_are_bit_exact), so compare them to
# float32 rounding here; errors must still be identical.
@pytest.mark.parametrize("case", sweep(CASES, IDS))
def test_same_as_jax_inside_record_inline_jnp(case):
    with transforms.record(inline_jnp=True) as session:
        ours = outcome(lambda: case.run(transforms))
    assert_same_outcome(ours, oracle(case.name), rtol=1e-6, atol=1e-6)
    _assert_session_matches(session, ours)


@pytest.mark.xfail(strict=True, reason="BUG: inline_jnp=True evaluates jnp wrappers op by op, "
                   "so results differ from JAX's in the last float32 bit")
def test_inline_jnp_results_are_bit_exact():
    c = CASES_BY_NAME["jvp_vector"]
    with transforms.record(inline_jnp=True):
        ours = outcome(lambda: c.run(transforms))
    assert_same_outcome(ours, oracle(c.name))


@pytest.mark.parametrize("recorded", [False, True], ids=["plain", "recorded"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_same_jaxpr_as_jax(case, recorded):
    """Recording must not change the program JAX stages (or the error it raises)."""
    def staged():
        return str(jax.make_jaxpr(case.build(transforms))(*case.args, **case.kwargs))
    if recorded:
        with transforms.record():
            ours = outcome(staged)
    else:
        ours = outcome(staged)
    assert_same_outcome(ours, oracle_jaxpr(case.name))


# --- messages ------------------------------------------------------------------

def test_normalized_message_only_blanks_object_ids():
    e = ValueError("This BatchTracer with object id 1234 was created on line 7")
    assert normalized_message(e) == "This BatchTracer with object id <id> was created on line 7"


def test_tracer_error_messages_name_the_user_line():
    """JAX's 'created on line' points at user code, not at the transforms package."""
    c = CASES_BY_NAME["seed003_absolute_if_vmap"]
    for run in (lambda: c.run(transforms), lambda: _recorded(c),
                lambda: _recorded(c, inline_jnp=True)):
        error = outcome(run).error
        assert isinstance(error, jax.errors.TracerBoolConversionError)
        assert "/transforms/" not in str(error)
        assert "corpus.py" in str(error) and "(absolute_if)" in str(error)


def _recorded(c, **options):
    with transforms.record(**options):
        return c.run(transforms)


# --- numerical derivative checks (seed 003) -------------------------------------

@pytest.mark.parametrize("recorded", [False, True], ids=["plain", "recorded"])
def test_check_grads_of_our_grad(recorded):
    """jax.test_util.check_grads differentiates our grad numerically and with JAX's AD."""
    f = transforms.grad(loss, 1)
    if recorded:
        with transforms.record() as session:
            check_grads(f, (W, B), order=1, modes=("fwd", "rev"))
        assert session.calls and all(c.ok for c in session.calls)
    else:
        check_grads(f, (W, B), order=1, modes=("fwd", "rev"))


def test_check_grads_catches_a_wrong_gradient():
    """check_grads through ours can fail: a deliberately wrong JVP rule is caught."""
    @jax.custom_jvp
    def wrong(x):
        return jnp.sin(x)

    wrong.defjvp(lambda primals, tangents: (jnp.sin(primals[0]), 2. * tangents[0]))
    with pytest.raises(AssertionError):
        check_grads(transforms.vmap(wrong), (jnp.array([0.3, 0.5]),), order=1, modes=("rev",))
    check_grads(transforms.vmap(jnp.sin), (jnp.array([0.3, 0.5]),), order=1, modes=("rev",))


def test_seed_gradient_values():
    """The numbers printed in seed 003, from ours."""
    np.testing.assert_allclose(transforms.grad(jnp.tanh)(2.0), 0.07065082, rtol=1e-6)
    d = transforms.grad
    f = lambda x: x**3 + 2*x**2 - 3*x + 1  # noqa: E731
    assert (d(f)(1.0), d(d(f))(1.0), d(d(d(f)))(1.0)) == (4.0, 10.0, 6.0)
    np.testing.assert_allclose(transforms.grad(loss, 1)(W, B), -0.7629071, rtol=1e-5)
    np.testing.assert_allclose(transforms.grad(loss)(W, B),
                               [-0.72034794, 1.9374751, -2.226889], rtol=1e-5)
    value, _ = transforms.value_and_grad(loss, (0, 1))(W, B)
    np.testing.assert_allclose(value, 3.5066924, rtol=1e-6)
    assert transforms.grad(piecewise)(2.0) == 12.0
    assert transforms.grad(piecewise)(4.0) == -4.0
    np.testing.assert_allclose(transforms.grad(sqrt_newton)(2.0), 0.35355338, rtol=1e-6)


# --- side effects and JAX's own checks ---------------------------------------------

def _scoped_print(x):
    with jax.named_scope("my_scope"):
        y = jnp.sin(x)
    jax.debug.print("y={y}", y=y)
    return y * 2


_PRINTING = {
    "vmap": lambda T: T.vmap(_scoped_print),
    "jit": lambda T: T.jit(_scoped_print),
    "vmap_grad": lambda T: T.vmap(T.grad(lambda x: _scoped_print(x).sum())),
}


@pytest.mark.parametrize("name", sorted(_PRINTING))
def test_debug_print_prints_what_jax_prints(name, capsys):
    x = jnp.array([0.5, -1.0, 2.0])
    expected = _PRINTING[name](jax)(x)
    jax.effects_barrier()
    theirs = capsys.readouterr().out
    assert theirs.count("y=") >= 1
    for recorded in (False, True):
        if recorded:
            with transforms.record():
                ours = _PRINTING[name](transforms)(x)
        else:
            ours = _PRINTING[name](transforms)(x)
        jax.effects_barrier()
        assert capsys.readouterr().out == theirs
        assert_same_outcome(outcome(lambda: ours), outcome(lambda: expected))


_LEAK_CHECKED = ["seed002_log1pexp_jit_grad", "scan_vmap_grad", "custom_vjp_vmap_grad",
                 "jit_vmap_grad", "nested_custom_jvp_rule_grad", "vjp",
                 "seed003_absolute_if_vmap"]


@pytest.mark.parametrize("name", [  # the quick run checks the quickest, vjp
    pytest.param(n, marks=() if n == "vjp" else pytest.mark.slow) for n in _LEAK_CHECKED])
def test_recording_leaks_no_tracers(name):
    """Under jax.checking_leaks(), recording keeps no tracer alive past its trace."""
    c = CASES_BY_NAME[name]
    with jax.checking_leaks():
        theirs = outcome(lambda: c.run(jax))
    with jax.checking_leaks():
        with transforms.record() as session:
            ours = outcome(lambda: c.run(transforms))
    assert_same_outcome(ours, theirs)
    assert session.calls
