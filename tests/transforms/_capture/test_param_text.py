"""Params as text (issue 36, item 15): NumPy scalars JAX's params hold print as numbers."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

import transforms as T
from transforms._capture._param_rules import format_param


def test_numpy_scalars_in_tuples_print_as_numbers():
    assert format_param(((0, np.int64(2), 0),)) == "((0, 2, 0),)"
    assert format_param([np.float32(1.5), (np.int32(1),)]) == "[1.5, (1,)]"
    assert format_param((1, 2)) == "(1, 2)"


def test_a_recorded_pad_reads_its_padding_as_numbers():
    with T.record() as session:
        T.grad(lambda x: jnp.roll(x, np.int64(1))[0])(jnp.arange(3.0))
    pads = [dict(step.params) for call in session.calls for step in call.steps
            if step.primitive == "pad"]
    assert pads and all("np." not in p["padding_config"] for p in pads)
    assert pads[0]["padding_config"] == "((0, 2, 0),)"
