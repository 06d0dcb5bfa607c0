"""model.miss_reasons on hand-made keys: the nearest earlier key, each kind of difference in
the table's words (the recorded ones are tests/transforms/_recording/test_compile_records.py)."""
from __future__ import annotations

from transforms.model import (
    REASON_KINDS,
    CompileKey,
    CompileRecord,
    KeyLeaf,
    SourceLocation,
    StaticKey,
    explain,
    miss_reasons,
)

AT = SourceLocation("train.py", 3, "step")
X = KeyLeaf("x", "float32", (8,))
CONFIG = (("jax_enable_x64", "False"), ("jax_default_device", "None"), ("mesh", ""))


def _trace(key: CompileKey, function: str = "step") -> CompileRecord:
    return CompileRecord(function, AT, AT, traced=True, key=key)


def _why(earlier: list[CompileKey], key: CompileKey) -> list[str]:
    return [explain(r) for r in miss_reasons([_trace(k) for k in earlier], _trace(key))]


def test_the_first_trace_has_no_reason_and_another_function_is_not_compared():
    key = CompileKey((X,), function_id=1)
    assert miss_reasons([], _trace(key)) == ()
    assert miss_reasons([_trace(key, "other")], _trace(key)) == ()


def test_settings_statics_and_shardings():
    old = CompileKey((X,), (StaticKey("n", "1", "int"),), function_id=1, config=CONFIG)
    x64 = (("jax_enable_x64", "True"), *CONFIG[1:])
    new = CompileKey((KeyLeaf("x", "float32", (8,), sharding="P('data')"),),
                     (StaticKey("n", "1.0", "float"),), function_id=1, config=x64)
    assert _why([old], new) == [
        "JAX setting `jax_enable_x64` False -> True",
        "static argument `n` 1 (int) -> 1.0 (float)",
        "`x` sharding (default) -> P('data')",
    ]


def test_the_nearest_key_is_compared_and_a_tree_of_other_nodes_is_named():
    a = CompileKey((KeyLeaf("x", "float32", (8,)), KeyLeaf("y", "int32", (2,))), function_id=1)
    b = CompileKey((KeyLeaf("x", "float32", (4,)), KeyLeaf("y", "int32", (3,))), function_id=1)
    c = CompileKey((KeyLeaf("x", "float32", (4,)), KeyLeaf("y", "int32", (4,))), function_id=1)
    assert _why([a, b], c) == ["`y` int32[3] -> int32[4]"]  # a differs in two, b in one
    tuple_tree = CompileKey((X,), trees=(("x", "PyTreeDef((*,))"),), function_id=1)
    list_tree = CompileKey((X,), trees=(("x", "PyTreeDef([*])"),), function_id=1)
    assert _why([tuple_tree], list_tree) == [
        "the tree of `x` changed: PyTreeDef((*,)) -> PyTreeDef([*])"]


def test_the_same_key_again_and_a_trace_without_a_key():
    key = CompileKey((X,), function_id=1)
    assert _why([key], key) == [
        "traced again with the key of an earlier trace (JAX's cache was cleared, or the jit "
        "was made with other options)"]
    keyless = CompileRecord("step", AT, AT, traced=True)
    assert [explain(r) for r in miss_reasons([keyless], keyless)] == [
        "`step` traced again (a jit JAX ran for jnp or a library: its key is not recorded)"]


def test_every_reason_has_words_and_a_fix():
    for name, kind in REASON_KINDS.items():
        assert kind.title and kind.template and kind.hint, name
