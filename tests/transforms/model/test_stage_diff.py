"""Structural diffs between stages: alignment by primitive, what changed in each
paired equation, how avals changed; checked on the seed's vmap and grad stages
and against a plain dynamic-programming LCS."""
from __future__ import annotations

import random

import jax.numpy as jnp
import pytest
from corpus import WS, XS, X, convolve

import transforms
import transforms.model._diff as diff_module
from transforms.model import (
    AvalChange,
    EqnChange,
    PrimitiveDelta,
    Stage,
    align,
    diff_stages,
    find_stage,
    short_aval,
)


def stages_of(build, *args) -> tuple[Stage, ...]:
    with transforms.record(stages=True) as session:
        build(*args)
    return session.calls[0].stages


def sin_sum(x):
    return jnp.sum(jnp.sin(x) * x)


def manually_batched_convolve(xs, ws):
    output = []
    for i in range(xs.shape[0]):
        output.append(convolve(xs[i], ws[i]))
    return jnp.stack(output)


SLICE = ("start_indices: (0,) -> (0, 0)", "limit_indices: (3,) -> (2, 3)",
         "in: f32[5] -> f32[2,5]", "out: f32[3] -> f32[2,3]")
DOT = ("dimension_numbers: (((0,), (0,)), ((), ())) -> (((1,), (1,)), ((0,), (0,)))",
       "in: f32[3], f32[3] -> f32[2,3], f32[2,3]", "out: f32[] -> f32[2]")


def test_vmap_changes_every_equation_and_adds_none():
    stages = stages_of(transforms.vmap(convolve), XS, WS)
    d = diff_stages(find_stage(stages, "f"), find_stage(stages, "vmap(f)"))
    assert d.summary() == "10 changed, 0 added, 0 removed, 0 same"
    assert [(r.kind, r.before, r.after) for r in d.rows] == [("changed", i, i) for i in range(10)]
    assert d.rows[0].details == SLICE
    assert d.rows[1].details == DOT  # dot_general gains a batch dimension
    assert d.in_avals == (("f32[5]", "f32[3]"), ("f32[2,5]", "f32[2,3]"))
    assert d.out_avals == (("f32[3]",), ("f32[2,3]",))
    assert d.aval_changes == (
        AvalChange("f32[3]", "f32[2,3]", 5, "new axis 0 of size 2"),
        AvalChange("f32[1]", "f32[2,1]", 3, "new axis 0 of size 2"),
        AvalChange("f32[]", "f32[2]", 3, "new axis 0 of size 2"),
        AvalChange("f32[5]", "f32[2,5]", 1, "new axis 0 of size 2"),
    )
    assert d.primitives == () and d.exact


def test_grad_adds_the_backward_pass():
    stages = stages_of(transforms.grad(sin_sum), X)
    d = diff_stages(find_stage(stages, "f"), find_stage(stages, "grad(f)"))
    assert d.rows == (
        EqnChange("same", 0, 0), EqnChange("added", None, 1), EqnChange("same", 1, 2),
        EqnChange("same", 2, 3), *(EqnChange("added", None, j) for j in range(4, 9)))
    assert d.primitives == (PrimitiveDelta("add_any", 0, 1),
                            PrimitiveDelta("broadcast_in_dim", 0, 1),
                            PrimitiveDelta("cos", 0, 1), PrimitiveDelta("mul", 1, 4))
    assert d.out_avals == (("f32[]",), ("f32[5]",))
    assert d.aval_changes == ()  # the values f defines keep their avals under grad


def test_python_loop_against_vmap():
    loop = stages_of(transforms.jit(manually_batched_convolve), XS, WS)
    batched = stages_of(transforms.vmap(convolve), XS, WS)
    d = diff_stages(find_stage(loop, "f"), find_stage(batched, "vmap(f)"))
    counts = [d.count(kind) for kind in ("same", "changed", "added", "removed")]
    assert counts == [0, 10, 0, 19]
    assert d.primitives == (PrimitiveDelta("broadcast_in_dim", 6, 3),
                            PrimitiveDelta("concatenate", 2, 1),
                            PrimitiveDelta("dot_general", 6, 3), PrimitiveDelta("slice", 10, 3),
                            PrimitiveDelta("squeeze", 4, 0), PrimitiveDelta("stack", 1, 0))


def test_a_stage_without_a_jaxpr_cannot_be_diffed():
    failed = Stage("f", available=False, reason="TracerBoolConversionError: ...")
    stages = stages_of(transforms.vmap(convolve), XS, WS)
    with pytest.raises(ValueError, match=r"cannot diff stage 'f': TracerBoolConversionError"):
        diff_stages(failed, stages[1])
    with pytest.raises(KeyError, match=r"no stage named 'grad\(f\)'; the stages are: f, vmap\(f\)"):
        find_stage(stages, "grad(f)")


def _lcs_length(a, b) -> int:
    rows = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            rows[i + 1][j + 1] = rows[i][j] + 1 if x == y else max(rows[i][j + 1], rows[i + 1][j])
    return rows[-1][-1]


def test_alignment_is_a_longest_common_subsequence():
    rng = random.Random(0)
    for _ in range(300):
        a = [rng.choice("abcd") for _ in range(rng.randint(0, 25))]
        b = [rng.choice("abcd") for _ in range(rng.randint(0, 25))]
        pairs, exact = align(a, b)
        matched = [(i, j) for i, j in pairs if i is not None and j is not None]
        assert exact and all(a[i] == b[j] for i, j in matched)
        assert len(matched) == _lcs_length(a, b)
        assert [i for i, _ in pairs if i is not None] == list(range(len(a)))
        assert [j for _, j in pairs if j is not None] == list(range(len(b)))
        assert [j for _, j in matched] == sorted(j for _, j in matched)


def test_too_large_for_an_exact_alignment_falls_back_to_coarse(monkeypatch):
    monkeypatch.setattr(diff_module, "MAX_EXACT_CELLS", 10)
    pairs, exact = align(list("xabcabcx"), list("xbcacbx"))
    assert not exact
    assert [i for i, _ in pairs if i is not None] == list(range(8))
    assert [j for _, j in pairs if j is not None] == list(range(7))
    assert (pairs[0], pairs[-1]) == ((0, 0), (7, 6))  # the common prefix and suffix stay exact


def test_large_programs_align_exactly():
    a = ["mul", "add"] * 5000 + ["reduce_sum"]
    b = ["mul", "cos", "add"] * 5000 + ["reduce_sum", "broadcast_in_dim"]
    pairs, exact = align(a, b)
    assert exact
    assert sum(1 for i, j in pairs if i is not None and j is not None) == 10001
    assert sum(1 for i, j in pairs if i is None) == 5001


@pytest.mark.parametrize("long, short", [
    ("float32[2,5]", "f32[2,5]"), ("float32[]", "f32[]"), ("int8[3]", "i8[3]"),
    ("uint32[4]", "u32[4]"), ("bfloat16[]", "bf16[]"), ("complex64[2]", "c64[2]"),
    ("bool[3]", "bool[3]"), ("key<fry>[]", "key<fry>[]"),
])
def test_short_avals_read_as_jaxprs_print_them(long, short):
    assert short_aval(long) == short
