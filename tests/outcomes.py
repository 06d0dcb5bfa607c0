"""Comparing two outcomes exactly: what a call returned or raised, under JAX and under ours.

The corpus's cases (corpus.py) and the tests share these; corpus.py imports them too, so
`from corpus import outcome, ...` works as before.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable

import jax
import numpy as np


@dataclasses.dataclass(frozen=True)
class Outcome:
    value: Any = None
    error: BaseException | None = None


def outcome(fn: Callable[[], Any]) -> Outcome:
    try:
        return Outcome(value=fn())
    except Exception as e:  # noqa: BLE001 - the oracle's exception is data here
        return Outcome(error=e)


_OBJECT_ID = re.compile(r"object id \d+")


def normalized_message(error: BaseException) -> str:
    """str(error), with the tracer object ids JAX prints (they differ per run) blanked."""
    return _OBJECT_ID.sub("object id <id>", str(error))


def assert_same_error(ours: BaseException, theirs: BaseException) -> None:
    assert type(ours) is type(theirs), (type(ours), type(theirs), str(ours))
    assert normalized_message(ours) == normalized_message(theirs)


def assert_same_outcome(ours: Outcome, theirs: Outcome, rtol: float = 0.0,
                        atol: float = 0.0) -> None:
    """Same exception (type and message), or the same result: see assert_same_tree."""
    if theirs.error is not None:
        assert ours.error is not None, f"JAX raised {theirs.error!r}, ours returned {ours.value!r}"
        assert_same_error(ours.error, theirs.error)
        return
    if ours.error is not None:
        raise AssertionError(f"ours raised, JAX did not: {ours.error!r}") from ours.error
    assert_same_tree(ours.value, theirs.value, rtol, atol)


def assert_same_tree(ours: Any, theirs: Any, rtol: float = 0.0, atol: float = 0.0) -> None:
    """Same pytree structure, leaf types, dtypes, shapes and weak types; values
    exactly equal (or within rtol/atol when given)."""
    assert jax.tree_util.tree_structure(ours) == jax.tree_util.tree_structure(theirs)
    ours_leaves = jax.tree_util.tree_leaves(ours)
    theirs_leaves = jax.tree_util.tree_leaves(theirs)
    assert len(ours_leaves) == len(theirs_leaves)
    for a, b in zip(ours_leaves, theirs_leaves):
        assert_same_leaf(a, b, rtol, atol)


def assert_same_leaf(a: Any, b: Any, rtol: float = 0.0, atol: float = 0.0) -> None:
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(b, jax.Array):
        assert a.dtype == b.dtype
        assert a.shape == b.shape
        assert getattr(a, "weak_type", None) == getattr(b, "weak_type", None)
        if jax.dtypes.issubdtype(b.dtype, jax.dtypes.prng_key):
            a, b = jax.random.key_data(a), jax.random.key_data(b)
        _assert_values(np.asarray(a), np.asarray(b), rtol, atol)
    elif isinstance(b, np.ndarray):
        _assert_values(a, b, rtol, atol)
    else:
        assert a == b or (a != a and b != b), (a, b)


def _assert_values(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> None:
    if (rtol or atol) and np.issubdtype(b.dtype, np.inexact):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, strict=True)
    else:
        np.testing.assert_array_equal(a, b, strict=True)


def uncached(fn: Any) -> Any:
    """`fn`, a jitted function, with JAX's cache for its function cleared: its next call traces.

    transforms.jit shares JAX's caches (recording changes nothing JAX does),
    and these module functions are jitted by many tests: without this a
    call inside record() would be served from JAX's cache, recording nothing.
    """
    clear = getattr(fn, "clear_cache", None)
    if clear is not None:
        clear()
    return fn
