"""Pytree renderables: exact text with Console(color_system=None)."""
from __future__ import annotations

import jax.numpy as jnp
from corpus import CONTAINER, Primal, Tangent, test_func
from rich.console import Console

import transforms as T
from transforms._trees._pytrees import TreeBuilder
from transforms._trees._tree_pairs import pair_trees
from transforms.model import TreeNode, TreeRecord
from workbench.render.pytree import PairView, TreeView


def text(renderable, width=72) -> str:
    console = Console(color_system=None, width=width, record=True)
    console.print(renderable)
    return console.export_text()


def seed000_call():
    with T.record() as session:
        T.grad(test_func)(CONTAINER)
    return session.calls[0]


def test_tree_view_shows_static_data_and_avals():
    (tree,) = [t for t in seed000_call().trees if t.role == "input"]
    assert text(TreeView(tree)) == (
        "container (input)\n"
        "container: NTContainer  static: name='composite-container', flag=0\n"
        "└── .array: float32[3,2] = [[0. 1.] [2. 3.] [4. 5.]]\n")


def test_tree_view_of_traced_leaves_problems_and_none():
    nodes = (
        TreeNode(0, None, 0, "", "", "node", "dict", children=(1, 2, 3, 4)),
        TreeNode(1, 0, 1, "['x']", "['x']", "leaf", "jax.Array", aval="float32[]", traced=True,
                 tracer="VmapTracer(aval=float32[], batched=float32[3], batch_dim=0)"),
        TreeNode(2, 0, 1, "['n']", "['n']", "none", "None"),
        TreeNode(3, 0, 1, "['c']", "['c']", "cycle", "list",
                 note="cycle: this object contains itself"),
        TreeNode(4, 0, 1, "['f']", "['f']", "error", "Odd", note="flatten raised ValueError: no"),
    )
    tree = TreeRecord("input", "p", "", nodes, 0, "truncated at 2000 nodes")
    assert text(TreeView(tree, title="p")) == (
        "p\n"
        "p: dict\n"
        "├── ['x']: float32[]  traced VmapTracer(aval=float32[], \n"
        "│   batched=float32[3], batch_dim=0)\n"
        "├── ['n']: None\n"
        "├── ['c']: <cycle: cycle: this object contains itself>\n"
        "└── ['f']: <error: flatten raised ValueError: no>\n"
        "(truncated at 2000 nodes)\n")


def test_pair_view_inputs_against_gradients():
    (pair,) = seed000_call().pairs
    assert text(PairView(pair)) == (
        "container vs its gradient\n"
        "the input container and its gradient have the same structure\n"
        "    path     container (input)             container (gradient)         \n"
        "────────────────────────────────────────────────────────────────────────\n"
        "    (root)   NTContainer                   NTContainer                  \n"
        "             [name='composite-container'   [name='composite-container', \n"
        "             , flag=0]                     flag=0]                      \n"
        "    .array   float32[3,2] = [[0. 1.] [2.   float32[3,2] = [[1. 1.] [1.  \n"
        "             3.] [4. 5.]]                  1.] [1. 1.]]                 \n")


def test_pair_view_marks_the_seed002_difference():
    b = TreeBuilder()
    pair = pair_trees("custom_jvp", "primal output vs tangent output",
                      b.build(Primal(0.), "primal_out", "primal"),
                      b.build(Tangent(0., 0.), "tangent_out", "tangent"),
                      "primal output", "tangent output")
    assert text(PairView(pair)) == (
        "primal output vs tangent output\n"
        "first difference at the root: primal output has a corpus.Primal with \n"
        "children .x; tangent output has a corpus.Tangent with children .sign, \n"
        ".norm\n"
        "    path     primal (primal_out)   tangent (tangent_out)\n"
        "────────────────────────────────────────────────────────\n"
        ">   (root)   Primal                Tangent              \n"
        "-   .x       float32[] = 0.0       -                    \n"
        "+   .sign    -                     float32[] = 0.0      \n"
        "+   .norm    -                     float32[] = 0.0      \n")


def test_deep_tree_renders():
    d = 1.0
    for _ in range(10_000):
        d = [d]
    out = text(TreeView(TreeBuilder().build(d, "input", "d")), width=400)
    assert out.splitlines()[-1] == "(truncated at depth 100)"


def test_a_failing_renderer_degrades_to_a_note():
    broken = TreeRecord("input", "x", "", nodes=5)  # type: ignore[arg-type]
    assert text(TreeView(broken)) == (
        "<render-error pytree: TypeError: 'int' object is not subscriptable>\n")
    assert text(PairView(None)).startswith("<render-error pytree pair: AttributeError")


def test_pair_view_of_a_hessian_shows_each_block_by_path():
    with T.record() as session:
        T.hessian(lambda p: (p["a"] ** 2).sum() * p["b"])({"a": jnp.ones(2), "b": 3.0})
    (pair,) = session.calls[0].pairs
    assert text(PairView(pair)) == (
        "p vs its hessian\n"
        "p ⊗ p and its hessian have the same structure\n"
        "    path         p ⊗ p (expected)   p (hessian)                     \n"
        "────────────────────────────────────────────────────────────────────\n"
        "    (root)       dict               dict                            \n"
        "    ['a']        dict               dict                            \n"
        "    ['a']['a']   float32[2,2]       float32[2,2] = [[6. 0.] [0. 6.]]\n"
        "    ['a']['b']   float32[2]         float32[2] = [2. 2.]            \n"
        "    ['b']        dict               dict                            \n"
        "    ['b']['a']   float32[2]         float32[2] = [2. 2.]            \n"
        "    ['b']['b']   float32[]          float32[] = 0.                  \n")


def test_pair_view_of_a_jit_gradient_has_its_replayed_values():
    # a jit's gradient is made of its output's leaves: it takes their replayed values
    with T.record() as session:
        T.jit(T.grad(lambda w: jnp.sum(w * w)))(jnp.array([1.0, -2.0]))
    (pair,) = session.calls[0].pairs
    assert text(PairView(pair), width=90) == (
        "w vs its gradient\n"
        "the input w and its gradient have the same structure\n"
        "    path     w (input)                       w (gradient)                             \n"
        "──────────────────────────────────────────────────────────────────────────────────────\n"
        "    (root)   float32[2] traced = [ 1. -2.]   float32[2] traced = [ 2. -4.]  (replayed)\n")


def test_pair_view_of_a_vjp_cotangent():
    with T.record() as session:
        _, pullback = T.vjp(lambda x, y: {"p": x * y}, jnp.ones(2), 2.0)
        pullback({"p": jnp.ones(2)})
    pairs = session.calls[1].pairs
    assert text(PairView(pairs[0])) == (
        "primal output vs its cotangent\n"
        "the primal output and the cotangent have the same structure\n"
        "    path     primal_out             cotangent           \n"
        "────────────────────────────────────────────────────────\n"
        "    (root)   dict                   dict                \n"
        "    ['p']    float32[2] = [2. 2.]   float32[2] = [1. 1.]\n")
    assert text(PairView(pairs[2])) == (
        "y vs its cotangent\n"
        "the input y and its cotangent have the same structure\n"
        "    path     y (input)         y (cotangent) \n"
        "─────────────────────────────────────────────\n"
        "    (root)   float32[] = 2.0   float32[] = 2.\n")
