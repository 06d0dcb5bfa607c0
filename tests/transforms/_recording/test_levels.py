"""Levels, phases and causes: how one user op is seen at every level."""
import jax
import jax.numpy as jnp
import pytest

import transforms as T


@jax.custom_vjp
def clip_gradient(x):
    return x


def _clip_fwd(x):
    return x, jnp.sin(x)


def _clip_bwd(residual, g):
    return (jnp.clip(g, -1.0, 1.0) * residual,)


clip_gradient.defvjp(_clip_fwd, _clip_bwd)


def _levels(call):
    return [(level.label, level.kind, level.trace_type) for level in call.levels]


def test_custom_vjp_fwd_and_bwd_bodies_are_sub_levels():
    def f(x):
        return clip_gradient(x) * 5.0
    with T.record(inline_jnp=True) as session:
        out = T.grad(f)(3.0)
    assert out == jax.grad(f)(3.0)
    call = session.calls[0]
    assert _levels(call) == [
        ("eval#0", "eval", "EvalTrace"),
        ("grad#1", "grad", "LinearizeTrace"),
        ("grad#1/custom_vjp_fwd#2", "custom_vjp_fwd", "EvalTrace"),
        ("grad#1/custom_vjp_bwd#2", "custom_vjp_bwd", "EvalTrace"),
    ]
    assert [s.title for s in call.steps_at(2)] == ["sin"]
    # jnp.clip is a plain jit (not inline), so it stays a call step.
    assert [s.title for s in call.steps_at(3)] == ["jit[name=clip]", "mul"]
    assert {s.phase for s in call.steps_at(3)} == {"rule"}


def test_vmap_of_grad_sees_one_op_at_three_levels_with_causes():
    with T.record(inline_jnp=True) as session:
        T.vmap(T.grad(jnp.sin))(jnp.arange(3.0))
    call = session.calls[0]
    assert [level.label for level in call.levels] == ["eval#0", "vmap#1", "vmap#1/grad#2"]
    first = call.steps[0]
    assert (first.primitive, call.levels[first.level].label, first.cause) == ("sin", "vmap#1/grad#2", None)
    # What grad emitted (sin and cos of the primal) is seen at vmap#1, caused by step 0 ...
    emitted = [s for s in call.steps if s.cause == 0]
    assert {call.levels[s.level].label for s in emitted} == {"vmap#1"}
    assert sorted(s.primitive for s in emitted) == ["cos", "sin"]
    # ... and what vmap emitted for those at eval#0, caused by them.
    for s in emitted:
        below = [t for t in call.steps if t.cause == s.index]
        assert [(t.primitive, call.levels[t.level].label) for t in below] == [(s.primitive, "eval#0")]


def test_backward_pass_steps_are_marked_and_point_at_the_call_line():
    with T.record(inline_jnp=True) as session:
        T.grad(lambda x: jnp.sin(x) * 2.0)(1.0)
        line = _line() - 1
    call = session.calls[0]
    backward = [s for s in call.steps if s.phase == "backward"]
    assert backward and all(call.levels[s.level].label == "eval#0" for s in backward)
    assert "mul" in [s.primitive for s in backward]
    assert all(s.source.line == line for s in backward)
    assert any(s.name_stack == "transpose(jvp())" for s in backward)


def _line():
    import sys
    return sys._getframe(1).f_lineno


def test_a_users_inner_jit_keeps_its_jaxpr_text_but_jnp_wrappers_do_not():
    inner = jax.jit(lambda y: jnp.sin(y) + 1.0)
    with T.record() as session:
        T.grad(lambda x: inner(x) * 2.0)(1.0)
    steps = session.calls[0].steps
    user_jit = [s for s in steps if s.title == "jit[name=<lambda>]"]
    wrappers = [s for s in steps if s.title == "jit[name=multiply]"]
    assert user_jit and wrappers
    assert all(s.subjaxprs[0].text.startswith("{ lambda") for s in user_jit)
    assert all("sin" in s.subjaxprs[0].text for s in user_jit if s.phase == "forward")
    # At the default detail a jnp wrapper's body is named in its params only.
    assert all(s.subjaxprs == () and ("jaxpr", "{jaxpr: mul}") in s.params for s in wrappers)
    with T.record(detail="full") as full:
        T.grad(lambda x: inner(x) * 2.0)(1.0)
    full_steps = [s for s in full.calls[0].steps if s.primitive == "jit"]
    assert full_steps and all(s.subjaxprs and s.subjaxprs[0].text.startswith("{ lambda")
                              for s in full_steps)


def test_record_rejects_an_unknown_detail():
    with pytest.raises(ValueError, match="'default' or 'full', got 'most'"):
        with T.record(detail="most"):
            pass


def test_jax_transformation_between_ours_is_recorded_as_a_level():
    with T.record(inline_jnp=True) as session:
        out = T.jit(lambda x: jax.vmap(T.grad(jnp.sin))(x))(jnp.arange(3.0))
    assert jnp.allclose(out, jnp.cos(jnp.arange(3.0)))
    labels = [(level.label, level.options) for level in session.calls[0].levels]
    assert labels == [("jit#1", ()), ("jit#1/vmap#2", (("origin", "'jax'"),)),
                      ("jit#1/vmap#2/grad#3", (("argnums", "0"), ("has_aux", "False")))]


def test_jaxpr_texts_are_plain_where_jax_would_colour_them(monkeypatch):
    # JAX colours jaxprs when stdout is a terminal (decided at import); a
    # recording made in a terminal must not keep the escape codes.
    from jax._src import pretty_printer
    monkeypatch.setattr(pretty_printer, "CAN_USE_COLOR", True)
    assert "\x1b[" in str(jax.make_jaxpr(jnp.sin)(1.0))
    with T.record(stages=True, detail="full") as session:
        T.grad(lambda x: jnp.sin(x) * 2.0)(1.0)
    call = session.calls[0]
    texts = [s.jaxpr.text for s in call.stages if s.jaxpr is not None]
    texts += [j.text for step in call.steps for j in step.subjaxprs]
    assert texts and not [t for t in texts if "\x1b[" in t]
