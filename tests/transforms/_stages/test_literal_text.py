"""A literal reads as its own dtype prints it (issue 36, item 15): a float32 0.1 is `=0.1`,
not the float64 of its bits, `=0.10000000149011612`."""
from __future__ import annotations

import jax.numpy as jnp

import transforms as T


def test_a_float32_literal_reads_as_written():
    with T.record() as s:
        T.jit(lambda x: x * 0.1 + 2)(jnp.ones(2))
    f = next(st for st in s.calls[0].stages if st.name == "f")
    literals = [v for e in f.eqns for v in e.in_vars if v.startswith("=")]
    assert literals == ["=0.1", "=2.0"]
