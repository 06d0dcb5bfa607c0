"""transforms.jit is jax.jit: same staged objects, caching, static and donated
arguments, decorator forms; and no frame of ours in user tracebacks."""
from __future__ import annotations

import inspect
import os
import traceback
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from corpus import WK, X, assert_same_error, assert_same_tree, convolve, outcome, sin_twice

import transforms

TRANSFORMS_DIR = os.path.dirname(os.path.abspath(transforms.__file__)) + os.sep
X3 = jnp.arange(3.0)


def scaled(x, n=2):
    return jnp.sin(x) * n


@pytest.fixture(params=[False, True], ids=["plain", "recorded"])
def recorded(request):
    if request.param:
        with transforms.record() as session:
            yield session
    else:
        yield None


def test_outside_a_block_a_jitted_call_is_jaxs_own_jitted_object():
    """No frame of ours on the hot path: the call goes straight to JAX's C++ dispatch."""
    ours = transforms.jit(scaled)
    assert ours._call_target() is ours._jitted
    assert type(ours._jitted) is type(jax.jit(scaled))
    assert ours._jitted.__wrapped__ is ours.__wrapped__ is scaled
    with transforms.record():
        assert ours._call_target() is not ours._jitted  # the block sees its trace


def test_lower_as_text_is_jaxs(recorded):
    ours = transforms.jit(convolve).lower(X, WK).as_text()
    assert ours == jax.jit(convolve).lower(X, WK).as_text()
    assert "module @jit_convolve" in ours


def test_lower_compile_runs(recorded):
    compiled = transforms.jit(scaled).lower(X3).compile()
    np.testing.assert_array_equal(compiled(X3), jax.jit(scaled)(X3))


def test_trace_jaxpr_is_jaxs(recorded):
    ours = transforms.jit(sin_twice).trace(1.0).jaxpr
    theirs = jax.jit(sin_twice).trace(1.0).jaxpr
    assert str(ours) == str(theirs)
    assert [e.primitive.name for e in ours.jaxpr.eqns] == ["sin", "mul"]
    assert str(transforms.jit(transforms.vmap(convolve)).trace(X[None], WK[None]).jaxpr) == \
        str(jax.jit(jax.vmap(convolve)).trace(X[None], WK[None]).jaxpr)


def test_eval_shape_is_jaxs(recorded):
    ours = transforms.jit(scaled).eval_shape(X3)
    theirs = jax.jit(scaled).eval_shape(X3)
    assert ours == theirs == jax.ShapeDtypeStruct((3,), jnp.float32)


def test_clear_cache_forces_a_retrace():
    traces = []

    def f(x):
        traces.append(1)
        return x + 1

    jitted = transforms.jit(f)
    jitted(X3)
    jitted(X3)
    assert len(traces) == 1
    jitted.clear_cache()
    jitted(X3)
    assert len(traces) == 2


@pytest.mark.parametrize("module", [jax, transforms], ids=["jax", "transforms"])
def test_no_retrace_for_the_same_types(module, recorded):
    traces = []

    def f(x, y):
        traces.append((x.shape, y.shape))
        return x * y

    jitted = module.jit(f)
    jitted(X3, X3)
    jitted(X3 + 1, X3 * 2)  # same shapes and dtypes
    assert len(traces) == 1
    jitted(jnp.ones(4), jnp.ones(4))
    jitted(jnp.ones(4), jnp.ones(4))
    assert len(traces) == 2
    jitted(jnp.ones(4, jnp.int32), jnp.ones(4, jnp.int32))
    assert len(traces) == 3
    assert jitted._cache_size() == 3
    if recorded is not None and module is transforms:
        assert [c.transform for c in recorded.calls] == ["jit"] * 3


def test_cache_counts_match_jax():
    # NB: a function of its own: JAX's caches are keyed on the record() block, and
    # `scaled` was called in earlier tests' blocks (by jax.jit(scaled) only).
    def scaled(x, n=2):
        return jnp.sin(x) * n

    ours, theirs = transforms.jit(scaled), jax.jit(scaled)
    for x in (X3, X3 + 1, jnp.ones(2), 1.0, 2.0, jnp.ones(2, jnp.int32)):
        assert_same_tree(ours(x), theirs(x))
    assert ours._cache_size() == theirs._cache_size()


@pytest.mark.parametrize("module", [jax, transforms], ids=["jax", "transforms"])
def test_static_argnums_and_argnames(module, recorded):
    traces = []

    def f(x, n):
        traces.append(n)
        return x * n

    by_num = module.jit(f, static_argnums=1)
    np.testing.assert_array_equal(by_num(X3, 2), X3 * 2)
    np.testing.assert_array_equal(by_num(X3, 2), X3 * 2)
    np.testing.assert_array_equal(by_num(X3, 3), X3 * 3)
    assert traces == [2, 3]
    by_name = module.jit(f, static_argnames="n")
    np.testing.assert_array_equal(by_name(X3, n=4), X3 * 4)
    np.testing.assert_array_equal(by_name(X3, n=4), X3 * 4)
    assert traces == [2, 3, 4]
    if recorded is not None and module is transforms:
        assert len(recorded.calls) == 3
        assert [c.options for c in recorded.calls] == [(("static_argnums", "1"),)] * 2 + [
            (("static_argnames", "'n'"),)]


def test_static_argnums_errors_match_jax():
    def f(x, n):
        return x * n

    for call in (lambda T: T.jit(f, static_argnums=0)(X3, 1),  # unhashable static
                 lambda T: T.jit(f, static_argnums=1)(X3, n=2)):  # n passed by keyword
        theirs = outcome(lambda: call(jax))
        ours = outcome(lambda: call(transforms))
        if theirs.error is None:
            assert_same_tree(ours.value, theirs.value)
        else:
            assert_same_error(ours.error, theirs.error)
    assert outcome(lambda: jax.jit(f, static_argnums=0)(X3, 1)).error is not None


@pytest.mark.parametrize("module", [jax, transforms], ids=["jax", "transforms"])
@pytest.mark.parametrize("how", ["donate_argnums", "donate_argnames"])
def test_donation(module, how, recorded):
    def f(x, y):
        return x * 2 + y

    kwargs = {"donate_argnums": 0} if how == "donate_argnums" else {"donate_argnames": "x"}
    x, y = jnp.arange(3.0), jnp.ones(3)
    jitted = module.jit(f, **kwargs)
    expected_deleted = _donation_deletes(how)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Some donated buffers were not usable")
        out = jitted(x, y)
    np.testing.assert_array_equal(out, [1., 3., 5.])
    assert (x.is_deleted(), y.is_deleted()) == (expected_deleted, False)
    info = jitted.lower(jnp.ones(3), jnp.ones(3)).args_info
    assert [a.donated for a in info[0]] == [True, False]


def _donation_deletes(how: str) -> bool:
    """Whether JAX itself deletes a donated CPU buffer here."""
    x = jnp.arange(3.0)
    kwargs = {"donate_argnums": 0} if how == "donate_argnums" else {"donate_argnames": "x"}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Some donated buffers were not usable")
        jax.jit(lambda x, y: x * 2 + y, **kwargs)(x, jnp.ones(3))
    return x.is_deleted()


def test_decorator_forms():
    @transforms.jit
    def sum_sq(x):
        return jnp.sum(x ** 2)

    assert sum_sq(X3) == 5.0
    assert sum_sq._call_target() is sum_sq._jitted and type(sum_sq._jitted) is type(jax.jit(scaled))

    @transforms.jit(static_argnums=1)
    def power(x, n):
        return x ** n

    @jax.jit(static_argnums=1)
    def jax_power(x, n):
        return x ** n

    assert_same_tree(power(X3, 3), jax_power(X3, 3))
    assert_same_tree(transforms.jit(static_argnames="n")(scaled)(X3, n=3),
                     jax.jit(static_argnames="n")(scaled)(X3, n=3))


_JIT_MISUSE = {
    "fun_by_keyword": lambda T: T.jit(fun=scaled),
    "static_argnums_positional": lambda T: T.jit(scaled, 1),
    "none": lambda T: T.jit(None),
    "unknown_keyword": lambda T: T.jit(scaled, nonsense=1),
    "unknown_keyword_decorator_form": lambda T: T.jit(nonsense=1),
    "static_argnames_not_a_parameter_then_call": lambda T: T.jit(scaled, static_argnames="m")(
        X3),
}


@pytest.mark.parametrize("name", sorted(_JIT_MISUSE))
def test_jit_misuse_fails_like_jax(name):
    theirs = outcome(lambda: _JIT_MISUSE[name](jax))
    ours = outcome(lambda: _JIT_MISUSE[name](transforms))
    if theirs.error is None:
        assert ours.error is None, repr(ours.error)
    else:
        assert ours.error is not None, f"JAX raised {theirs.error!r}; ours returned {ours.value!r}"
        assert_same_error(ours.error, theirs.error)


def test_decorator_form_is_recorded():
    @transforms.jit(static_argnums=1)
    def power(x, n):
        return x ** n

    with transforms.record() as session:
        power(X3, 2)
    (call,) = session.calls
    assert (call.transform, call.function) == (
        "jit", "test_decorator_form_is_recorded.<locals>.power")
    assert call.source.file == __file__


def test_wrapper_metadata_matches_jax():
    for name in ("grad", "value_and_grad", "vmap", "jit", "jacfwd", "jacrev", "hessian"):
        ours, theirs = getattr(transforms, name)(scaled), getattr(jax, name)(scaled)
        for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
            assert getattr(ours, attr, None) == getattr(theirs, attr, None), (name, attr)
        assert inspect.signature(ours) == inspect.signature(theirs), name
        assert inspect.unwrap(ours) is scaled, name
    for name in ("grad", "vmap", "jit", "jvp", "vjp", "linearize", "jacfwd", "hessian"):
        assert getattr(transforms, name).__doc__ == getattr(jax, name).__doc__
        assert getattr(transforms, name).__name__ == name


def test_wrapped_attribute_is_the_users_function():
    """jax.<t>(f).__wrapped__ is f; code that unwraps one level must get f back."""
    names = ("grad", "value_and_grad", "vmap", "jit", "jacfwd", "jacrev")
    assert [n for n in names if getattr(jax, n)(scaled).__wrapped__ is not scaled] == []
    assert [n for n in names if getattr(transforms, n)(scaled).__wrapped__ is not scaled] == []


# --- tracebacks -----------------------------------------------------------------------

def _user_fails(x):
    raise ValueError("user code failed")


def _user_fails_in_op(x):
    return jnp.dot(x, jnp.ones(7))  # shapes (3,) and (7,) do not match


_FAILING = {
    "grad": (lambda: transforms.grad(_user_fails), 1.0),
    "jit": (lambda: transforms.jit(_user_fails), 1.0),
    "vmap": (lambda: transforms.vmap(_user_fails), X3),
    "vmap_grad": (lambda: transforms.vmap(transforms.grad(_user_fails)), X3),
    "jit_vmap_grad": (lambda: transforms.jit(transforms.vmap(transforms.grad(_user_fails))), X3),
    "value_and_grad": (lambda: transforms.value_and_grad(_user_fails), 1.0),
    "jacrev": (lambda: transforms.jacrev(_user_fails), X3),
    "jit_op": (lambda: transforms.jit(_user_fails_in_op), X3),
    "vmap_op": (lambda: transforms.vmap(_user_fails_in_op), jnp.ones((2, 3))),
    "grad_jit_op": (lambda: transforms.grad(transforms.jit(
        lambda x: jnp.sum(_user_fails_in_op(x)))), X3),
}


@pytest.mark.parametrize("name", sorted(_FAILING))
def test_tracebacks_have_no_frame_from_transforms(name, recorded):
    build, arg = _FAILING[name]
    with pytest.raises((ValueError, TypeError)) as info:
        build()(arg)
    text = "".join(traceback.format_exception(info.value))
    assert TRANSFORMS_DIR not in text, text
    frames = traceback.extract_tb(info.value.__traceback__)
    assert all(not f.filename.startswith(TRANSFORMS_DIR) for f in frames)
    # The user's own frames are still there.
    assert any(f.name in ("_user_fails", "_user_fails_in_op") for f in frames), text
    if recorded is not None:
        assert recorded.calls and not recorded.calls[-1].ok


def test_traceback_of_the_same_failure_matches_jax_frame_for_frame():
    def names(module):
        with pytest.raises(ValueError) as info:
            module.vmap(module.grad(_user_fails))(X3)
        return [(f.filename, f.name) for f in traceback.extract_tb(info.value.__traceback__)
                if f.filename != __file__]
    assert names(transforms) == names(jax)


@pytest.mark.parametrize("method", ["trace", "lower", "eval_shape"])
def test_ahead_of_time_methods_record_a_trace_jax_cached_before_the_block(method):
    """The gallery's loop_vs_vmap prints `T.jit(f).trace(...)`: recorded though JAX had it."""
    def doubled_sin(x):
        return jnp.sin(x) * 2

    ours = transforms.jit(doubled_sin)
    ours.trace(X3)
    ours(X3)
    with transforms.record() as session:
        getattr(ours, method)(X3)
    assert [(c.transform, c.function.split(".")[-1]) for c in session.calls] == [
        ("jit", "doubled_sin")]


def test_static_argnums_and_argnames_that_disagree_are_taken_as_given_in_a_block():
    """JAX's api_test test_jit_with_mismatched_static_argnames, inside record(): given both,
    jit takes them as they are; which arguments it traces is JAX's (the oracle: jax.jit
    outside a block; it differs between releases)."""
    from jax import core

    import transforms as T

    def run(jit):
        seen: list = []

        def made():  # a function object per jit: no trace of one answers the other's call
            def f(x, y):
                seen.append((isinstance(x, core.Tracer), isinstance(y, core.Tracer)))
                return 1
            return f

        f_nums = jit(made(), static_argnums=1, static_argnames=())
        f_nums(2, "foo")
        f_nums(1, y=2)
        f_mixed = jit(made(), static_argnums=(1,), static_argnames="x")
        f_mixed(2, "foo")
        f_mixed(1, y=3)
        return seen

    expected = run(jax.jit)
    with T.record():
        assert run(T.jit) == expected
