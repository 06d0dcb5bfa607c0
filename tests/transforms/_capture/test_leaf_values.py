"""A concrete leaf's value text (`transforms._capture._values.leaf_value`) against numpy's own
statistics (the recorder computes them with ufunc reductions, not ndarray's methods), and
scalar literals described once per exact value."""
from __future__ import annotations

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from transforms._capture._values import SMALL_VALUE_SIZE, describe_concrete, leaf_value


def _g(v) -> str:
    return f"{float(v):.3g}"


def _numpy_says(a: np.ndarray) -> str | None:
    """The text, from ndarray.mean/std/min/max (the mean and spread in float64)."""
    if a.dtype == np.bool_:
        return f"true: {int(a.sum()):,} of {a.size:,}"
    if a.dtype.kind not in "iuf":
        return None
    finite = a[np.isfinite(a)] if a.dtype.kind == "f" else a.reshape(-1)
    if finite.size == 0:
        text = "no finite values"
    else:
        text = (f"≈{_g(finite.mean(dtype=np.float64))} ±{_g(finite.std(dtype=np.float64))} "
                f"[≥{_g(finite.min())}, ≤{_g(finite.max())}]")
    if finite.size < a.size:
        nan, inf = int(np.isnan(a).sum()), int(np.isinf(a).sum())
        text += (f" nan:{nan:,}" if nan else "") + (f" inf:{inf:,}" if inf else "")
    return text


def _arrays():
    rng = np.random.default_rng(7)
    for trial in range(140):
        dtype = [np.float32, np.float64, np.float16, np.int32, np.int8, np.uint8,
                 np.bool_][trial % 7]
        shape = tuple(int(n) for n in rng.integers(3, 30, size=1 + trial % 3))
        if np.prod(shape) <= SMALL_VALUE_SIZE:  # small values are printed, not summarized
            shape = (*shape, 5)
        scale = 10.0 ** int(rng.integers(-5, 4 if dtype is np.float16 else 6))
        if np.dtype(dtype).kind == "f":
            a = (rng.standard_normal(shape) * scale + rng.standard_normal() * scale)
            if trial % 5 == 0:
                a.flat[:: 7] = [np.nan, np.inf, -np.inf][trial % 3]
            yield a.astype(dtype)
        elif dtype is np.bool_:
            yield rng.random(shape) < 0.3
        else:
            yield rng.integers(0, 100, size=shape).astype(dtype)


@pytest.mark.parametrize("a", list(_arrays()), ids=lambda a: f"{a.dtype}{list(a.shape)}")
def test_statistics_are_numpys(a):
    assert a.size > SMALL_VALUE_SIZE
    x = jnp.asarray(a)
    assert leaf_value(x, describe_concrete(x)) == _numpy_says(np.asarray(x))


def test_leaves_without_statistics():
    for a in (np.ones((4, 4), ml_dtypes.bfloat16), np.ones((4, 4), np.complex64)):
        x = jnp.asarray(a)
        assert leaf_value(x, describe_concrete(x)) is None
    all_nan = jnp.full((3, 4), jnp.nan)
    assert leaf_value(all_nan, describe_concrete(all_nan)) == "no finite values nan:12"


def test_scalar_literals_keep_their_exact_values():
    # Scalars' records are shared by class, aval and exact value: 0.0 == -0.0, 1 == True.
    from transforms._capture._describe import Describer
    describer = Describer({})
    literals = [0.0, -0.0, 1, True, 1.0, float("nan"), float("nan"), 2.5, np.float32(2.5),
                1 + 0j, complex(1, -0.0), jnp.float32(2.5)]
    twice = [describer.describe(x) for x in literals + literals]
    assert twice[:len(literals)] == twice[len(literals):]
    assert [r.value for r in twice[:len(literals)]] == [
        describe_concrete(x).value for x in literals]
    assert [r.value for r in twice[:4]] == ["0.0", "-0.0", "1", "True"]
