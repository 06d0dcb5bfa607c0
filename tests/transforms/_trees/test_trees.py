"""Pytree records: inputs, outputs and gradients as data, paired node by node;
bad structures give a record with a note, never a crash."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from corpus import CASES_BY_NAME, CONTAINER, MATRIX, PARAMS, assert_same_error, outcome

import transforms as T
from transforms._trees._pytrees import MAX_DEPTH, MAX_NODES, TreeBuilder, treedef_tree
from transforms._trees._tree_pairs import pair_trees


def recorded(case_name):
    case = CASES_BY_NAME[case_name]
    with T.record() as session:
        value = case.run(T)
    return value, session.calls[-1]


def trees_by_role(call, role):
    return [t for t in call.trees if t.role == role]


def test_seed000_grad_returns_an_ntcontainer_paired_with_the_input():
    value, call = recorded("seed000_container_grad")
    assert type(value).__name__ == "NTContainer"
    (inp,) = trees_by_role(call, "input")
    (grad,) = trees_by_role(call, "gradient")
    for tree in (inp, grad):
        root = tree.root
        assert root.type_name == "corpus.NTContainer" and root.kind == "node"
        # name and flag are static aux data, not leaves
        assert root.static == (("name", "'composite-container'"), ("flag", "0"))
        (leaf,) = tree.leaves
        assert tree.full_path(leaf) == "container.array"
        assert leaf.aval == "float32[3,2]" and not leaf.traced
    assert grad.leaves[0].value == "[[1. 1.] [1. 1.] [1. 1.]]"
    (pair,) = call.pairs
    assert pair.kind == "gradient" and pair.same_structure
    assert [(r.path, r.status) for r in pair.rows] == [("", "same"), (".array", "same")]
    assert pair.left is inp and pair.right is grad


def test_dict_params_key_paths_and_argnums():
    _, call = recorded("seed003_loss_grad_argnums01")
    assert [t.name for t in trees_by_role(call, "input")] == ["W", "b"]
    assert [t.name for t in trees_by_role(call, "gradient")] == ["W", "b"]
    assert len(call.pairs) == 2 and all(p.same_structure for p in call.pairs)
    _, call = recorded("grad_pytree_params")
    (grad,) = trees_by_role(call, "gradient")
    assert [grad.full_path(n) for n in grad.leaves] == ["params['b']", "params['w']"]
    assert [n.aval for n in grad.leaves] == ["float32[2]", "float32[3,2]"]


def test_value_and_grad_with_aux_pairs_the_gradient_part():
    _, call = recorded("seed003_loss_value_and_grad_has_aux")
    assert [t.name for t in trees_by_role(call, "gradient")] == ["W", "b"]


def test_jvp_pairs_primals_with_tangents():
    _, call = recorded("seed002_log1pexp_jvp")
    assert [p.title for p in call.pairs] == ["primals vs tangents",
                                             "primal output vs tangent output"]
    assert all(p.same_structure for p in call.pairs)


def _two_outputs(x, y):
    return {"p": x * y, "q": jnp.sin(x)}


COTANGENT = {"p": jnp.ones(3), "q": jnp.full(3, 2.0)}


def test_vjp_pullback_records_a_backward_call_paired_with_the_primals():
    x, y = jnp.arange(3.0), 2.0
    with T.record() as session:
        out, pullback = T.vjp(_two_outputs, x, y)
        cts = pullback(COTANGENT)
    jax_out, jax_pullback = jax.vjp(_two_outputs, x, y)
    # JAX's own VJP class and pytree node; bit-identical results
    assert type(pullback) is type(jax_pullback)
    assert jax.tree_util.tree_structure(pullback).node_data()[0] is type(jax_pullback)
    for a, b in zip(jax.tree_util.tree_leaves(cts),
                    jax.tree_util.tree_leaves(jax_pullback(COTANGENT))):
        assert a.dtype == b.dtype and bool((a == b).all())
    forward, backward = session.calls
    assert (forward.transform, backward.transform) == ("vjp", "vjp_backward")
    assert backward.parent == forward.index and backward.function == "_two_outputs"
    assert {s.phase for s in backward.steps} == {"backward"}
    assert [(t.role, t.name) for t in trees_by_role(forward, "primal_out")] == \
        [("primal_out", "primal_out")]
    assert [t.name for t in trees_by_role(backward, "cotangent")] == ["cotangent", "x", "y"]
    assert [p.title for p in backward.pairs] == ["primal output vs its cotangent",
                                                 "x vs its cotangent", "y vs its cotangent"]
    assert all(p.kind == "cotangent" and p.same_structure for p in backward.pairs)
    assert backward.pairs[1].left is trees_by_role(forward, "input")[0]
    assert [n.aval for n in trees_by_role(backward, "cotangent")[0].leaves] == \
        ["float32[3]", "float32[3]"]


def test_vjp_pullback_outside_the_block_or_under_jit_is_jax_s():
    x = jnp.arange(3.0)
    with T.record() as session:
        _, pullback = T.vjp(_two_outputs, x, 2.0)
    expected = jax.vjp(_two_outputs, x, 2.0)[1](COTANGENT)
    assert len(session.calls) == 1
    later = pullback(COTANGENT)  # no session: records nothing, computes JAX's result
    through_jit = jax.jit(lambda pb, ct: pb(ct))(pullback, COTANGENT)
    for got in (later, through_jit):
        assert all(bool((a == b).all()) for a, b in zip(got, expected))
    assert len(session.calls) == 1
    with T.record() as another:  # recorded, but its forward call is in another session
        pullback(COTANGENT)
    (call,) = another.calls
    assert (call.transform, call.parent, call.pairs) == ("vjp_backward", None, ())
    assert [t.name for t in trees_by_role(call, "cotangent")] == ["cotangent", "args[0]",
                                                                  "args[1]"]


def test_vjp_pullback_given_a_wrong_cotangent_records_both_trees():
    with T.record() as session:
        _, pullback = T.vjp(_two_outputs, jnp.arange(3.0), 2.0)
        ours = outcome(lambda: pullback({"p": jnp.ones(3)}))
    theirs = outcome(lambda: jax.vjp(_two_outputs, jnp.arange(3.0), 2.0)[1]({"p": jnp.ones(3)}))
    assert_same_error(ours.error, theirs.error)
    (error,) = session.calls[1].errors
    assert error.rule == "cotangent_mismatch"
    assert error.mismatch.right_has == "a dict with children ['p']"
    assert error.hint.startswith("first difference at the root: the primal output has a dict "
                                 "with children ['p'], ['q']; the cotangent has a dict with "
                                 "children ['p'].")


def test_linearize_pushforward_records_tangent_calls_paired_with_the_primals():
    x, y = jnp.arange(3.0), 2.0
    with T.record() as session:
        _, push = T.linearize(_two_outputs, x, y)
        tangent_out = push(jnp.ones(3), 1.0)
    _, jax_push = jax.linearize(_two_outputs, x, y)
    assert type(push) is type(jax_push)
    assert jax.tree_util.tree_structure(push).num_leaves == \
        jax.tree_util.tree_structure(jax_push).num_leaves
    for a, b in zip(jax.tree_util.tree_leaves(tangent_out),
                    jax.tree_util.tree_leaves(jax_push(jnp.ones(3), 1.0))):
        assert a.dtype == b.dtype and bool((a == b).all())
    forward, pushed = session.calls
    assert (pushed.transform, pushed.parent) == ("linearize_jvp", forward.index)
    assert [(t.role, t.name) for t in pushed.trees if t.role != "output"] == [
        ("tangent", "x"), ("tangent", "y"), ("tangent_out", "tangent_out")]
    assert [p.title for p in pushed.pairs] == ["x vs its tangent", "y vs its tangent",
                                               "primal output vs tangent output"]
    assert all(p.kind == "tangent" and p.same_structure for p in pushed.pairs)


def _hessian_of(p):
    return jnp.sum(p["a"] ** 2) * p["b"]


def test_hessian_pairs_the_input_nested_in_itself():
    p = {"a": jnp.ones(2), "b": 3.0}
    with T.record() as session:
        T.hessian(_hessian_of)(p)
    (call,) = session.calls
    (pair,) = call.pairs
    assert (pair.kind, pair.title, pair.left.name, pair.left.role) == \
        ("hessian", "p vs its hessian", "p ⊗ p", "expected")
    assert pair.same_structure and all(r.status == "same" for r in pair.rows)
    assert [(r.path, pair.right.nodes[r.right].aval) for r in pair.rows] == [
        ("", ""), ("['a']", ""), ("['a']['a']", "float32[2,2]"), ("['a']['b']", "float32[2]"),
        ("['b']", ""), ("['b']['a']", "float32[2]"), ("['b']['b']", "float32[]")]
    assert pair.right is trees_by_role(call, "hessian")[0]


def test_jacobian_outer_structure_is_the_function_output():
    with T.record() as session:
        T.jacrev(lambda x: {"s": jnp.sin(x), "t": x.sum()})(jnp.ones(3))
        T.jacfwd(lambda x, y: x * y, argnums=(0, 1))(jnp.ones(2), jnp.ones(2))
        T.jacrev(lambda x: (x.sum(), {"aux": x}), has_aux=True)(jnp.ones(2))
    first, second, third = (c.pairs[0] for c in session.calls)
    assert first.left.name == "out ⊗ x" and first.same_structure
    assert [(r.path, first.left.nodes[r.left].aval) for r in first.rows] == [
        ("", ""), ("['s']", "float32[3,3]"), ("['t']", "float32[3]")]
    assert second.left.name == "out ⊗ (x, y)" and second.title == "(x, y) vs its jacobian"
    assert [r.path for r in second.rows] == ["", "[0]", "[1]"] and second.same_structure
    assert third.left.name == "x" and third.same_structure  # the aux part is not the jacobian


def test_nesting_a_wide_tree_is_truncated():
    from transforms._trees._tree_pairs import nest_trees
    wide = TreeBuilder().build(list(range(100)), "input", "x")
    nested = nest_trees(wide, wide)
    assert len(nested.nodes) == MAX_NODES and nested.note == f"truncated at {MAX_NODES} nodes"
    assert all(c < len(nested.nodes) for n in nested.nodes for c in n.children)


def test_a_tree_from_the_cached_structure_equals_the_walked_one():
    from transforms._trees import _pytrees as _trees
    b = TreeBuilder()
    first = b.build({"a": [1.0, jnp.ones(2)], "b": CONTAINER}, "input", "x")
    again = b.build({"a": [2, jnp.zeros(2)], "b": CONTAINER}, "input", "x")  # cached structure
    _trees._skeletons.clear()
    walked = b.build({"a": [2, jnp.zeros(2)], "b": CONTAINER}, "input", "x")
    assert again == walked and again != first
    assert [(n.type_name, n.value) for n in again.leaves] == \
        [("int", "2"), ("jax.Array", "[0. 0.]"), ("jax.Array", "[[0. 1.] [2. 3.] [4. 5.]]")]
    other = b.build({"a": [1.0, jnp.ones(2)], "b": CONTAINER._replace(flag=1)}, "input", "x")
    assert other.node("['b']").static == (("name", "'composite-container'"),
                                                             ("flag", "1"))


def test_traced_leaves_are_told_apart_under_an_outer_transformation():
    # Ours inside jax.vmap: the call's input is a VmapTracer.
    with T.record() as session:
        jax.vmap(T.grad(lambda x: jnp.sin(x)))(jnp.arange(3.0))
    (leaf,) = trees_by_role(session.calls[0], "input")[0].leaves
    assert leaf.traced and leaf.tracer.startswith("VmapTracer(") and leaf.aval == "float32[]"


def test_jit_call_records_trees_from_its_trace():
    _, call = recorded("seed000_container_jit")
    (inp,) = trees_by_role(call, "input")
    assert inp.root.static == (("name", "'composite-container'"), ("flag", "0"))
    assert inp.leaves[0].traced


def test_pair_marks_the_first_difference():
    b = TreeBuilder()
    left = b.build({"a": 1.0, "b": (1.0, 2.0)}, "x", "left")
    right = b.build({"a": 1.0, "b": (1.0,)}, "x", "right")
    pair = pair_trees("t", "t", left, right)
    assert pair.first_difference == "['b']"
    assert pair.left_has == "a tuple with children [0], [1]"
    assert pair.right_has == "a tuple with children [0]"
    assert [(r.path, r.status) for r in pair.rows] == [
        ("", "same"), ("['a']", "same"), ("['b']", "differs"), ("['b'][0]", "same"),
        ("['b'][1]", "left_only")]


def test_treedef_tree_keeps_structure_and_avals():
    td = jax.tree_util.tree_structure({"a": (1, None), "b": CONTAINER})
    tree = treedef_tree(td, "x", "x", ["f32[]", "f32[3,2]"])
    assert [(n.path, n.kind) for n in tree.nodes] == [
        ("", "node"), ("['a']", "node"), ("['a'][0]", "leaf"), ("['a'][1]", "none"),
        ("['b']", "node"), ("['b'][<flat index 0>]", "leaf")]
    assert tree.nodes[-1].aval == "f32[3,2]"
    assert tree.nodes[4].aux == "('composite-container', 0)"


# --- bad input: a record with a note, never a crash --------------------------------------------

class BadRepr:
    def __repr__(self):
        raise RuntimeError("no repr")

    def __hash__(self):
        return 0

    def __eq__(self, other):
        return isinstance(other, BadRepr)


class Box:
    def __init__(self, a, aux):
        self.a, self.aux = a, aux


jax.tree_util.register_pytree_node(Box, lambda b: ((b.a,), b.aux), lambda aux, ch: Box(ch[0], aux))


class FlattenRaises:
    pass


def _flatten_raises(x):
    raise ValueError("flatten broke")


jax.tree_util.register_pytree_node(FlattenRaises, _flatten_raises, lambda aux, ch: FlattenRaises())


def _cyclic():
    a = [1.0]
    a.append(a)
    return a


def _deep(levels=10_000):
    d = 1.0
    for _ in range(levels):
        d = [d]
    return d


def test_cyclic_structure_gives_a_cycle_node():
    tree = TreeBuilder().build(_cyclic(), "input", "a")
    assert [(n.path, n.kind) for n in tree.nodes] == [("", "node"), ("[0]", "leaf"),
                                                      ("[1]", "cycle")]


def test_very_deep_structure_is_truncated_not_a_recursion_error():
    tree = TreeBuilder().build(_deep(), "input", "d")
    assert len(tree.nodes) == MAX_DEPTH + 1
    assert tree.nodes[-1].kind == "truncated" and tree.note == f"truncated at depth {MAX_DEPTH}"
    assert tree.treedef.startswith("<unavailable")


def test_wide_structure_is_truncated_by_node_count():
    tree = TreeBuilder().build(list(range(MAX_NODES * 2)), "input", "w")
    assert len(tree.nodes) == MAX_NODES + 1 and tree.nodes[-1].kind == "truncated"


def test_unhashable_aux_and_raising_repr_are_text():
    tree = TreeBuilder().build(Box(1.0, [1, 2]), "input", "b")
    assert tree.root.aux == "[1, 2]"
    tree = TreeBuilder().build(Box(1.0, BadRepr()), "input", "b")
    assert tree.root.aux == "<repr-error RuntimeError>"
    assert tree.root.static == (("aux", "<repr-error RuntimeError>"),)


def test_flatten_that_raises_is_an_error_node():
    tree = TreeBuilder().build({"x": FlattenRaises()}, "input", "p")
    node = tree.node("['x']")
    assert node.kind == "error" and node.note == "flatten raised ValueError: flatten broke"


BAD_CALLS = {
    "cyclic": lambda T: T.grad(lambda a: 1.0)(_cyclic()),
    "deep": lambda T: T.grad(lambda a: 1.0)(_deep()),
    "flatten_raises": lambda T: T.grad(lambda a: 1.0)(FlattenRaises()),
    "repr_raises": lambda T: T.grad(lambda b: b.a * 2.)(Box(1.0, BadRepr())),
    "unhashable": lambda T: T.grad(lambda b: b.a * 2.)(Box(1.0, [1, 2])),
}


@pytest.mark.parametrize("name", sorted(BAD_CALLS))
def test_bad_input_is_recorded_and_the_outcome_is_jax_s(name):
    with T.record() as session:
        ours = outcome(lambda: BAD_CALLS[name](T))
    theirs = outcome(lambda: BAD_CALLS[name](jax))
    if theirs.error is not None:
        assert_same_error(ours.error, theirs.error)
    else:
        assert ours.error is None
    (call,) = session.calls
    assert call.trees and call.trees[0].role == "input"
    assert all(d.kind != "internal" for d in call.diagnostics), call.diagnostics
    if theirs.error is not None:
        assert call.errors and call.errors[0].hint


BAD_INPUTS = {
    "cyclic": _cyclic,
    "deep": _deep,
    "flatten_raises": FlattenRaises,
    "repr_raises": lambda: Box(jnp.ones(2), BadRepr()),
    "unhashable": lambda: Box(jnp.ones(2), [1, 2]),
}


# NB: jax.vmap and jax.jit themselves, given a cyclic or 10,000-level input,
# leave the process damaged (jaxlib 0.10 and 0.12): vmap exhausts CPython's
# recursion counter, so every later call raises RecursionError, and jit's next
# such error can change type. Nothing of ours runs before they raise; those
# combinations cannot share a test process.
_BAD_COMBINATIONS = [(name, transform) for transform in ("jit", "vmap", "vjp")
                     for name in sorted(BAD_INPUTS)
                     if not (transform in ("jit", "vmap") and name in ("cyclic", "deep"))]
# jax.jit flattens its arguments in C++ before any Python of ours runs: inputs
# it cannot flatten leave no record (JAX's error is still the user's).
_NOT_RECORDED = {("jit", "flatten_raises")}


@pytest.mark.parametrize("name, transform", _BAD_COMBINATIONS)
def test_bad_input_under_other_transformations(name, transform):
    def run(M):
        f = lambda a: jnp.zeros(2)  # noqa: E731
        if transform == "vjp":
            return M.vjp(f, BAD_INPUTS[name]())[0]
        return getattr(M, transform)(f)(BAD_INPUTS[name]())

    with T.record() as session:
        ours = outcome(lambda: run(T))
    theirs = outcome(lambda: run(jax))
    if theirs.error is not None:
        assert_same_error(ours.error, theirs.error)
    else:
        assert ours.error is None
    assert len(session.calls) == (0 if (transform, name) in _NOT_RECORDED else 1)
    for call in session.calls:
        assert call.trees and call.trees[0].role == "input"
        assert all(d.kind != "internal" for d in call.diagnostics), call.diagnostics
        if theirs.error is not None:
            assert call.errors and call.errors[0].hint


def test_trees_survive_json(tmp_path):
    with T.record() as session:
        T.grad(lambda c: c.array.sum())(CONTAINER)
        T.grad(lambda a: 1.0)(_deep(200))
        T.grad(lambda p, x: jnp.sum(jnp.dot(x, p["w"]) + p["b"]))(PARAMS, MATRIX)
    path = tmp_path / "trees.json"
    session.save(path)
    assert T.load(path).calls == session.calls


# --- jit is transparent: a jit of a transformation has that transformation's trees -----------

def _loss(params, x):
    return jnp.sum(jnp.tanh(params["w"] * x) + params["b"]), x


_PARAMS = {"w": jnp.ones(3), "b": jnp.float32(0.5)}
_X = jnp.arange(3.0)


def _shape(tree):
    return [(tree.full_path(n), n.kind, n.aval) for n in tree.nodes]


def _aval(x):
    return f"{x.dtype}[{','.join(map(str, x.shape))}]"


@pytest.mark.parametrize("make, derivative", [
    (lambda t: t.value_and_grad(lambda p, x: _loss(p, x)[0]), lambda out: out[1]),
    (lambda t: t.grad(_loss, has_aux=True), lambda out: out[0]),
    (lambda t: t.grad(lambda p, x: _loss(p, x)[0], argnums=(0, 1)), lambda out: out),
    (lambda t: t.jacfwd(lambda p, x: _loss(p, x)[0] * x), lambda out: out),
    (lambda t: t.jacrev(lambda p, x: {"y": _loss(p, x)[0] * x}, argnums=1), lambda out: out),
], ids=["value_and_grad", "grad_has_aux", "grad_argnums", "jacfwd", "jacrev"])
def test_a_jit_of_a_transformation_has_its_trees_as_unjitted(make, derivative):
    """transforms.jit(value_and_grad(f)): jit's outputs are value_and_grad's, so the call
    pairs the gradient with the parameters as the unjitted call does (jax.* the oracle)."""
    with T.record() as session:
        plain = make(T)(_PARAMS, _X)
        jitted = T.jit(make(T))(_PARAMS, _X)
        again = T.jit(T.jit(make(T)))(_PARAMS, _X)
    oracle = make(jax)(_PARAMS, _X)
    for value in (plain, jitted, again):
        assert jax.tree_util.tree_structure(value) == jax.tree_util.tree_structure(oracle)
        assert all(jax.tree_util.tree_leaves(jax.tree_util.tree_map(
            lambda a, b: bool(jnp.allclose(a, b)), value, oracle)))
    unjitted, *jits = session.calls
    assert [c.transform for c in jits] == ["jit", "jit"]
    assert unjitted.pairs
    for call in jits:
        assert [(t.role, t.name, t.argnum) for t in call.trees] == \
            [(t.role, t.name, t.argnum) for t in unjitted.trees]
        assert [p.title for p in call.pairs] == [p.title for p in unjitted.pairs]
        for mine, theirs in zip(call.pairs, unjitted.pairs):
            assert (mine.same_structure, mine.first_difference) == \
                (theirs.same_structure, theirs.first_difference)
        for mine, theirs in zip(call.trees, unjitted.trees):
            assert _shape(mine) == _shape(theirs)
        # The derivative trees hold JAX's derivative, leaf for leaf.
        found = [t for t in call.trees if t.role not in ("input", "output")]
        assert [n.aval for t in found for n in t.leaves] == \
            [_aval(x) for x in jax.tree_util.tree_leaves(derivative(oracle))]
