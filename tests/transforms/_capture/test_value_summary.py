"""A concrete array's ValueSummary (transforms._capture._value_summary) against NumPy's own
print and statistics; its one-line text (ValueSummary.describe); the model keeps it through a
dump."""
from __future__ import annotations

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from transforms._capture._value_summary import PRINTED_SIZE, summarize_array
from transforms.model import ValueSummary


@pytest.mark.parametrize("a", [
    np.arange(12, dtype=np.float32).reshape(3, 4),
    np.array([1.5, -2.0, 0.0], np.float64),
    np.arange(PRINTED_SIZE, dtype=np.int32),
    np.array(True),
    np.float32(3.25),
])
def test_small_arrays_are_printed_as_numpy_prints_them(a):
    s = summarize_array(jnp.asarray(a))
    assert s is not None and s.text == str(np.asarray(jnp.asarray(a)))
    assert s.describe() == s.text.replace("\n", "")


def test_big_arrays_get_statistics_with_nan_inf_and_zero_counts():
    a = np.linspace(-1, 1, 1001).astype(np.float32)
    a[:3] = 0.0
    a[10], a[11] = np.nan, np.inf
    s = summarize_array(a)
    assert s is not None and s.text == "" and s.shape == (1001,) and s.dtype == "float32"
    finite = a[np.isfinite(a)]
    assert s.min == float(finite.min()) and s.max == float(finite.max())
    assert s.mean == pytest.approx(finite.mean(dtype=np.float64))
    assert s.std == pytest.approx(finite.std(dtype=np.float64))
    assert (s.nan, s.inf, s.zeros) == (1, 1, int((a == 0).sum()))
    assert not s.finite
    assert s.describe().endswith(f"nan:1 inf:1 zeros:{s.zeros}")


def test_no_finite_values_and_what_has_no_numbers():
    s = summarize_array(np.full(100, np.nan, np.float32))
    assert s is not None and s.mean is None and s.nan == 100
    assert s.describe() == "no finite values nan:100"
    assert summarize_array(np.array(["a"])) is None
    small_bf16 = summarize_array(np.ones(3, ml_dtypes.bfloat16))
    assert small_bf16 is not None and small_bf16.text == "[1 1 1]"
    assert summarize_array(np.ones(10), max_size=5) is None


def test_summaries_survive_a_dump():
    from transforms import grad, record
    from transforms.model import loads
    with record() as session:
        grad(lambda x: jnp.sum(x * x))(jnp.arange(70.0))
    call = loads(session.to_json_text()).calls[0]
    (x,) = [t for t in call.trees if t.role == "input"]
    summary = x.leaves[0].summary
    assert isinstance(summary, ValueSummary) and summary.zeros == 1 and summary.max == 69.0
    assert summary == session.calls[0].trees[0].leaves[0].summary
