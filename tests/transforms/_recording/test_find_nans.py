"""record(find_nans=True) (issue 33, items 3 and 4): the first call whose outputs hold a NaN
or Inf is replayed after it returns, and the first equation making one from finite inputs is
named with its stage, primitive, phase, level, line, input values and a hint; where
jax_debug_nans names a primitive, the first equation making a NaN is that primitive."""
from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transforms
from transforms import record


def where_trap(x):
    return jnp.sum(jnp.where(x > 0, jnp.sqrt(x), 0.0))


def double_where(x):
    safe = jnp.where(x > 0, x, 1.0)
    return jnp.sum(jnp.where(x > 0, jnp.sqrt(safe), 0.0))


def log_at_zero(x):
    return jnp.sum(jnp.log(x))


def zero_over_zero(x):
    return jnp.sum(x / x)


def norm_at_zero(x):
    return jnp.sqrt(jnp.sum(x * x))


def _inner(x):
    return jnp.log(x) * 2.0


def inner_jit(x):
    return jnp.sum(jax.jit(_inner)(x))


# (function, input, how it is transformed, what JAX's NaN check names, our first's rule)
CASES = [
    (where_trap, [0.0, 1.0], "grad", "mul", "where_gradient_trap"),
    (log_at_zero, [0.0, 1.0], "grad", None, "log_at_zero_or_below"),
    (zero_over_zero, [0.0, 1.0], "grad", "div", "div_by_zero"),
    (norm_at_zero, [0.0, 0.0], "grad", "mul", "div_by_zero"),
    (inner_jit, [-1.0, 1.0], "plain", "log", "log_at_zero_or_below"),
    (log_at_zero, [-1.0, 1.0], "jit", "log", "log_at_zero_or_below"),
]


def _run(kind, f, x):
    wrap = {"grad": transforms.grad, "jit": transforms.jit,
            "plain": lambda g: transforms.jit(lambda v: g(v))}[kind]
    return wrap(f)(x)


def _jax_names(kind, f, x):
    """The primitive jax_debug_nans names for this case, or None when it raises nothing."""
    wrap = {"grad": jax.grad, "jit": jax.jit, "plain": lambda g: jax.jit(lambda v: g(v))}[kind]
    with jax.debug_nans(True):
        try:
            jax.block_until_ready(wrap(f)(x))
        except FloatingPointError as e:
            found = re.search(r"invalid value \(nan\) encountered in (\w+)", str(e))
            return found.group(1) if found else "jit"
    return None


@pytest.mark.parametrize("f, x, kind, jax_names, rule", CASES,
                         ids=[f"{c[0].__name__}-{c[2]}" for c in CASES])
def test_the_first_equation_and_jax_debug_nans_agree(f, x, kind, jax_names, rule):
    x = jnp.array(x)
    expected = np.asarray(_run(kind, f, x))
    with record(find_nans=True) as session:
        got = _run(kind, f, x)
    assert np.array_equal(np.asarray(got), expected, equal_nan=True)  # nothing changed
    (call,) = [c for c in session.calls if c.nonfinite]
    found = {r.kind: r for r in call.nonfinite}
    first = found["first"]
    assert first.rule == rule, first
    assert first.source is not None and first.source.file == __file__
    assert all(s is None or s.finite for s in first.inputs)
    assert first.stage in {s.name for s in call.stages}
    named = _jax_names(kind, f, x)
    assert named == jax_names
    if named is not None and named != "jit":
        # where JAX names a primitive, our first NaN-making equation is it
        assert found["first_nan"].primitive == named


def test_the_where_trap_is_named_in_the_forward_with_its_fix():
    with record(find_nans=True) as session:
        transforms.grad(where_trap)(jnp.array([0.0, 1.0]))
    first, first_nan = session.calls[0].nonfinite
    assert (first.primitive, first.phase, first.level) == ("div", "forward", "grad#1")
    assert "double where" in first.hint
    assert first.inputs[1].text == "[0. 1.]" and first.outputs[0].inf == 1
    assert (first_nan.primitive, first_nan.phase) == ("mul", "backward")


def test_the_double_where_fix_makes_no_nan():
    with record(find_nans=True) as session:
        g = transforms.grad(double_where)(jnp.array([0.0, 1.0]))
    assert np.isfinite(np.asarray(g)).all()
    assert not any(c.nonfinite for c in session.calls)


def test_a_nan_in_the_inputs_is_said_so_and_only_the_first_call_is_replayed():
    with record(find_nans=True) as session:
        transforms.grad(log_at_zero)(jnp.array([np.nan, 1.0]))
        transforms.grad(log_at_zero)(jnp.array([0.0, 1.0]))
    assert [r.kind for r in session.calls[0].nonfinite] == ["inputs"]
    assert session.calls[0].nonfinite[0].rule == "nan_in_inputs"
    assert not session.calls[1].nonfinite


def test_calls_sharing_stages_are_replayed_too():
    with record(find_nans=True) as session:
        for v in (1.0, 2.0, 0.0):
            transforms.grad(log_at_zero)(jnp.array([v, 1.0]))
    assert [bool(c.nonfinite) for c in session.calls] == [False, False, True]
    assert session.calls[2].stages is session.calls[0].stages  # still shared
    assert session.calls[2].nonfinite[0].primitive == "log"


def _scoped_log(x):
    with jax.named_scope("inner"):
        return jnp.log(x) * 2.0


def scoped_inner_jit(x):
    with jax.named_scope("model"):
        return jnp.sum(jax.jit(_scoped_log)(x))


def test_a_finding_keeps_its_scope_path_through_the_jits_descended_into():
    with record(find_nans=True) as session:
        transforms.jit(scoped_inner_jit)(jnp.array([-1.0, 1.0]))
    first = session.calls[0].nonfinite[0]
    assert (first.primitive, first.path, first.name_stack, first.scope) == (
        "log", ("jit[name=_scoped_log]",), "inner", "model/inner")


def test_findings_survive_a_dump():
    from transforms.model import loads
    with record(find_nans=True) as session:
        transforms.grad(where_trap)(jnp.array([0.0, 1.0]))
    loaded = loads(session.to_json_text())
    assert loaded.calls[0].nonfinite == session.calls[0].nonfinite
