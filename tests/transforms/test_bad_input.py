"""Bad input: ours raises exactly what JAX raises, records it, and leaves JAX usable."""
from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from corpus import ABSOLUTE_IF_LINE, absolute_if, assert_same_error, outcome
from jax._src import core as jax_src_core

import transforms


def sin(x):
    return jnp.sin(x)


def vector_out(x):
    return jnp.sin(x) * 2.


def two(x, y):
    return x * y


def no_aux(x):
    return jnp.sin(x)


def three_outputs(x):
    return jnp.sin(x), 1, 2


def star_args(*xs):
    return sum(xs)


ONES3 = jnp.ones(3)

# name -> build(T): a thunk that fails the same way under jax and transforms.
BAD = {
    "grad_not_callable": lambda T: T.grad(5),
    "value_and_grad_not_callable": lambda T: T.value_and_grad(None),
    "vmap_not_callable": lambda T: T.vmap("abc"),
    "jit_not_callable": lambda T: T.jit(3),
    "jacfwd_not_callable": lambda T: T.jacfwd(1),
    "jacrev_not_callable": lambda T: T.jacrev([]),
    "hessian_not_callable": lambda T: T.hessian(2.0),
    "jvp_not_callable": lambda T: T.jvp(1, (1.,), (1.,)),
    "vjp_not_callable": lambda T: T.vjp(1, 1.),
    "linearize_not_callable": lambda T: T.linearize(1, 1.),
    "grad_argnums_out_of_range": lambda T: T.grad(sin, argnums=5)(1.0),
    "grad_argnums_negative": lambda T: T.grad(sin, argnums=-3)(1.0),
    "grad_argnums_not_int": lambda T: T.grad(sin, argnums=1.5)(1.0),
    "jacrev_argnums_out_of_range": lambda T: T.jacrev(sin, argnums=2)(1.0),
    "grad_of_non_scalar": lambda T: T.grad(vector_out)(ONES3),
    "grad_of_int_input": lambda T: T.grad(sin)(1),
    "vmap_in_axes_too_long": lambda T: T.vmap(two, in_axes=(0, 0, 0))(ONES3, ONES3),
    "vmap_in_axes_too_short": lambda T: T.vmap(two, in_axes=(0,))(ONES3, ONES3),
    "vmap_inconsistent_sizes": lambda T: T.vmap(two)(ONES3, jnp.ones(4)),
    "vmap_inconsistent_sizes_star_args": lambda T: T.vmap(star_args)(ONES3, jnp.ones(2)),
    "vmap_in_axis_out_of_range": lambda T: T.vmap(sin, in_axes=2)(ONES3),
    "vmap_in_axes_wrong_type": lambda T: T.vmap(sin, in_axes="x")(ONES3),
    "vmap_of_scalar": lambda T: T.vmap(sin)(1.0),
    "vmap_out_axis_out_of_range": lambda T: T.vmap(sin, out_axes=3)(ONES3),
    "has_aux_not_a_pair": lambda T: T.grad(no_aux, has_aux=True)(1.0),
    "has_aux_triple": lambda T: T.grad(three_outputs, has_aux=True)(1.0),
    "value_and_grad_has_aux_not_a_pair": lambda T: T.value_and_grad(no_aux, has_aux=True)(1.0),
    "jvp_shape_mismatch": lambda T: T.jvp(sin, (1.0,), (ONES3,)),
    "jvp_primals_not_tuple": lambda T: T.jvp(sin, 1.0, 1.0),
    "vjp_cotangent_mismatch": lambda T: T.vjp(vector_out, ONES3)[1](jnp.ones(4)),
    "vmap_absolute_if": lambda T: T.vmap(absolute_if)(jnp.arange(-2.0, 3.0)),
    "jit_absolute_if": lambda T: T.jit(absolute_if)(1.0),
    "vmap_grad_absolute_if": lambda T: T.vmap(T.grad(absolute_if))(ONES3),
    "user_exception_in_vmap": lambda T: T.vmap(_raises_key_error)(ONES3),
    "grad_of_deleted_array": lambda T: T.grad(lambda x: jnp.sum(x))(_donated()),
    "vmap_of_deleted_array": lambda T: T.vmap(sin)(_donated()),
    "jit_of_deleted_array": lambda T: T.jit(sin)(_donated()),
    "jit_unhashable_static_arg": lambda T: T.jit(two, static_argnums=0)(ONES3, 1.0),
}

# JAX's pullback is returned unwrapped (documented): calling it records nothing.
# transforms.jit is JAX's own jitted object: what fails before tracing starts
# (argument checks) runs no code of ours, so it is not recorded.
NOT_RECORDED = {"vjp_cotangent_mismatch", "jit_of_deleted_array", "jit_unhashable_static_arg"}


# JAX's own error for a donated array depends on the state of its caches: its C++
# dispatch path, once warm, raises PJRT's ValueError ("Buffer has been deleted or
# donated"); cold, its Python path raises RuntimeError ("Array has been deleted").
# A record() block keys JAX's jit caches afresh (a function traced before the block
# is traced again, and recorded, the first time the block calls it), so each side
# is warmed the same way, where it runs, before the call that must fail.
WARM_FIRST = {
    "grad_of_deleted_array": lambda T: T.grad(lambda x: jnp.sum(x))(ONES3),
    "vmap_of_deleted_array": lambda T: T.vmap(sin)(ONES3),
    "jit_of_deleted_array": lambda T: T.jit(sin)(ONES3),
}


def _bad_call(name: str, module) -> None:
    """BAD[name] with JAX's caches for it in the same state wherever it runs."""
    if name in WARM_FIRST:
        WARM_FIRST[name](module)
    BAD[name](module)()


def _donated():
    """An array whose buffer was donated to a jitted call: JAX refuses to use it."""
    x = jnp.ones(3)
    jax.jit(lambda a: a * 2, donate_argnums=0)(x)
    assert x.is_deleted()
    return x


def _raises_key_error(x):
    return {"a": x}["b"]


def _qualified_type_name(cls: type) -> str:
    if cls.__module__ == "builtins":
        return cls.__name__
    if getattr(jax.errors, cls.__name__, None) is cls:
        return f"jax.errors.{cls.__name__}"
    return f"{cls.__module__}.{cls.__qualname__}"


@pytest.fixture(autouse=True)
def _after_a_failure_jax_still_works():
    yield
    assert jax_src_core.trace_state_clean()
    assert transforms.grad(sin)(0.0) == 1.0
    np.testing.assert_array_equal(transforms.vmap(sin)(jnp.zeros(2)), [0., 0.])


def _jax_error(name: str) -> BaseException:
    theirs = outcome(lambda: _bad_call(name, jax))
    assert theirs.error is not None, f"{name}: JAX accepted it"
    return theirs.error


@pytest.mark.parametrize("name", sorted(BAD))
def test_same_error_as_jax_outside_record(name):
    theirs = _jax_error(name)
    ours = outcome(lambda: _bad_call(name, transforms))
    assert ours.error is not None, f"ours returned {ours.value!r}"
    assert_same_error(ours.error, theirs)


@pytest.mark.parametrize("name", sorted(BAD))
def test_same_error_as_jax_inside_record_and_recorded(name):
    theirs = _jax_error(name)
    with transforms.record() as session:
        ours = outcome(lambda: _bad_call(name, transforms))
    assert ours.error is not None, f"ours returned {ours.value!r}"
    assert_same_error(ours.error, theirs)
    if name in NOT_RECORDED:
        return
    failed = [c for c in session.calls if not c.ok]
    assert len(failed) == 1, session.calls
    (error,) = failed[0].errors
    assert error.type_name == _qualified_type_name(type(ours.error))
    assert error.message == str(ours.error)
    call = failed[0]
    assert error.level is None or 0 <= error.level < len(call.levels)
    assert error.step is None or 0 <= error.step < len(call.steps)


def test_bad_input_is_recorded_against_the_callers_function_name():
    with transforms.record() as session:
        with pytest.raises(TypeError):
            transforms.grad(vector_out)(ONES3)
    (call,) = session.calls
    assert (call.transform, call.function) == ("grad", "vector_out")
    assert not call.ok


def test_non_callable_is_recorded_as_a_failed_call():
    with transforms.record() as session:
        with pytest.raises(TypeError, match="Expected a callable value, got 5"):
            transforms.grad(5)
    (call,) = session.calls
    assert call.transform == "grad" and not call.ok
    assert call.errors[0].message == "Expected a callable value, got 5"
    assert call.steps == ()


def test_vmap_of_python_if_keeps_the_steps_before_the_failure():
    """Seed 003: `if x > 0` under vmap, recorded up to the failure."""
    xs = jnp.arange(-2.0, 3.0)
    with transforms.record() as session:
        with pytest.raises(jax.errors.TracerBoolConversionError) as info:
            transforms.vmap(absolute_if)(xs)
    with pytest.raises(jax.errors.TracerBoolConversionError) as jax_info:
        jax.vmap(absolute_if)(xs)
    assert_same_error(info.value, jax_info.value)
    assert str(info.value).startswith(
        "Attempted boolean conversion of traced array with shape bool[].")
    (call,) = session.calls
    assert not call.ok
    (error,) = call.errors
    assert error.type_name == "jax.errors.TracerBoolConversionError"
    assert error.message == str(info.value)
    # The comparison `x > 0` was recorded before the failure, at the vmap level.
    assert call.steps, "steps before the failure are kept"
    vmap_level = [lv.index for lv in call.levels if lv.label == "vmap#1"]
    assert error.level in vmap_level
    assert error.step is not None and 0 <= error.step < len(call.steps)
    failing = call.steps[error.step]
    assert failing.kind != "error"
    assert failing.source.line == ABSOLUTE_IF_LINE
    assert failing.outputs[0].aval == "bool[]"
    assert failing.outputs[0].child("val").aval == "bool[5]"
    assert error.source is not None
    assert error.source.file == inspect.getsourcefile(absolute_if)
    assert (error.source.line, error.source.function) == (ABSOLUTE_IF_LINE, "absolute_if")
    # No step after the failure: the `return` lines never ran.
    assert all(s.source is None or s.source.line <= ABSOLUTE_IF_LINE for s in call.steps)


def test_error_in_nested_grad_under_vmap_names_the_inner_level():
    with transforms.record() as session:
        with pytest.raises(jax.errors.TracerBoolConversionError):
            transforms.vmap(transforms.grad(absolute_if))(ONES3)
    (call,) = session.calls
    (error,) = call.errors
    assert call.levels[error.level].label == "vmap#1/grad#2"
    assert (error.source.line, error.source.function) == (ABSOLUTE_IF_LINE, "absolute_if")


def test_user_exception_inside_a_transform_is_recorded_with_its_line():
    with transforms.record() as session:
        with pytest.raises(KeyError):
            transforms.vmap(_raises_key_error)(ONES3)
    (error,) = session.calls[0].errors
    assert error.type_name == "KeyError" and error.message == "'b'"
    assert error.source.function == "_raises_key_error"
    assert error.source.line == _raises_key_error.__code__.co_firstlineno + 1


def test_a_failure_does_not_end_the_session():
    with transforms.record() as session:
        with pytest.raises(TypeError):
            transforms.grad(vector_out)(ONES3)
        out = transforms.grad(sin)(0.5)
    assert out == jax.grad(sin)(0.5)
    assert [c.ok for c in session.calls] == [False, True]
    assert [c.index for c in session.calls] == [0, 1]


def test_seed002_primal_tangent_mismatch_message():
    """Seed 002: the custom_jvp rule returns a Tangent for a Primal output."""
    from corpus import CASES_BY_NAME
    c = CASES_BY_NAME["seed002_primal_tangent_grad"]
    with pytest.raises(TypeError) as theirs:
        c.run(jax)
    with transforms.record() as session:
        with pytest.raises(TypeError) as ours:
            c.run(transforms)
    assert str(ours.value) == str(theirs.value)
    assert str(ours.value).startswith(
        "Custom JVP rule init_jvp for function init must produce primal and tangent outputs "
        "with equal container (pytree) structures")
    (call,) = session.calls
    (error,) = call.errors
    assert error.type_name == "TypeError" and error.message == str(ours.value)
