"""Programs written with flax (linen, nnx), equinox, optax and diffrax, each with its
documented API (most in tests/library_programs.py, which the library sweep runs too): a
training step per library, recorded as `workbench run` records it (jax.* patched, so the
library's own jax.jit/jax.grad calls record). Every result is bitwise equal to plain
JAX's, inside and outside record(). Models are small and steps few: these run in a few
seconds.
"""
from __future__ import annotations

import importlib.util
import os
import re
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transforms as T
from transforms.model import level_rows
from workbench.cli import main
from workbench.cli._summary import summarize_call
from workbench.run._runner import jax_patched

eqx = pytest.importorskip("equinox")
optax = pytest.importorskip("optax")
for _library in ("flax", "diffrax", "numpyro"):  # library_programs imports them too
    pytest.importorskip(_library)

import library_programs as programs

HERE = os.path.abspath(__file__)
PROGRAMS = programs.FILE


def assert_bitwise(a, b) -> None:
    """The same leaves, of the same dtypes and shapes, with the same bytes."""
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        if isinstance(x, (jax.Array, np.ndarray, np.generic)):
            x, y = np.asarray(x), np.asarray(y)
            assert (x.dtype, x.shape) == (y.dtype, y.shape)
            assert x.tobytes() == y.tobytes()


def recorded(run, clear_jax_caches: bool = False):
    """run() three ways: plain JAX; jax.* patched outside record(); patched inside record().
    All three must agree bit for bit; returns the recorded session and the result."""
    # NB: equinox caches its jit wrappers, and diffrax's diffeqsolve is jitted when
    # imported: caches are cleared before each run, or the first run's trace (plain
    # JAX's) serves all three and nothing is traced while recording.
    def _clear_caches() -> None:
        eqx.clear_caches()
        if clear_jax_caches:
            jax.clear_caches()

    _clear_caches()
    plain = run()
    _clear_caches()
    with jax_patched():
        unrecorded = run()
    _clear_caches()
    with T.record() as session, jax_patched():
        inside = run()
    assert_bitwise(plain, unrecorded)
    assert_bitwise(plain, inside)
    return session, inside


def _tree(call, name):
    return next(t for t in call.trees if t.role == "input" and t.name == name)


def _paths(tree):
    return {n.path: n for n in tree.nodes}


def _library_file(path: str, library: str) -> bool:
    return f"{os.sep}{library}{os.sep}" in path and "-packages" in path


# --- equinox + optax ----------------------------------------------------------------

def _equinox_step(name: str):
    """A fresh eqx.filter_jit step (equinox caches its jit wrapper by function name)."""
    x, y = programs.x_y()
    tx = optax.adam(1e-2)

    def loss(model):
        return jnp.mean((jax.vmap(model)(x)[:, 0] - y) ** 2)

    def step(model, opt_state):
        value, grads = eqx.filter_value_and_grad(loss)(model)
        updates, opt_state = tx.update(grads, opt_state, eqx.filter(model, eqx.is_inexact_array))
        return eqx.apply_updates(model, updates), opt_state, value

    step.__name__ = step.__qualname__ = name
    return eqx.filter_jit(step), tx


_runs = iter(range(1000))


def run_equinox():
    step, tx = _equinox_step(f"eqx_step_{next(_runs)}")
    model = eqx.nn.MLP(in_size=2, out_size=1, width_size=8, depth=2, key=jax.random.key(0))
    opt_state = tx.init(eqx.filter(model, eqx.is_inexact_array))
    for _ in range(2):
        model, opt_state, value = step(model, opt_state)
    return eqx.filter(model, eqx.is_inexact_array), opt_state, value


@pytest.fixture(scope="module")
def equinox_call():
    session, _ = recorded(run_equinox)
    (call,) = [c for c in session.calls if c.transform == "jit"]
    return call


@pytest.mark.slow
def test_equinox_filter_jit_is_located_in_the_user_code_via_equinox(equinox_call):
    call = equinox_call
    assert call.ok and call.source.file == HERE and call.source.function == "run_equinox"
    assert call.source.via is not None and _library_file(call.source.via.file, "equinox")
    sources = [s.source for s in call.steps]
    assert all(s is not None and s.file == HERE for s in sources)
    vias = {s.via.file.rsplit(os.sep + "site-packages" + os.sep, 1)[-1].split(os.sep)[0]
            for s in sources if s.via is not None}
    assert {"equinox", "optax"} <= vias
    assert any(s.function == "_equinox_step.<locals>.loss" or s.function == "loss"
               for s in sources)


@pytest.mark.slow
def test_equinox_trees_are_the_users_model_not_the_filter_jit_partition(equinox_call):
    # (trees named "function: argument" are those of transformations called inside)
    names = [t.name for t in equinox_call.trees if t.role == "input" and ":" not in t.name]
    assert names == ["model", "opt_state"]
    model = _tree(equinox_call, "model")
    nodes = _paths(model)
    assert model.root.type_name == "equinox.nn._mlp.MLP"
    assert nodes[".layers[0].weight"].aval == "float32[8,2]"
    assert nodes[".layers[0].weight"].traced and not nodes[".layers[0].weight"].static_leaf
    assert nodes[".activation"].static_leaf and not nodes[".activation"].traced
    assert ("in_size", "2") in model.root.static and ("width_size", "8") in model.root.static
    assert ("in_features", "2") in nodes[".layers[0]"].static
    opt = _paths(_tree(equinox_call, "opt_state"))
    assert opt["[0]"].type_name == "optax._src.transform.ScaleByAdamState"
    assert opt["[0].mu.layers[2].bias"].aval == "float32[1]"
    out = _paths(next(t for t in equinox_call.trees if t.role == "output"))
    assert out["[0].layers[0].weight"].aval == "float32[8,2]" and "[2]" in out  # the loss


@pytest.mark.slow
def test_equinox_identical_relu_levels_fold_into_one_row(equinox_call):
    rows = level_rows(equinox_call)
    folded = [r for r in rows if r.folded]
    assert folded and all(r.repeats >= 2 for r in folded)
    assert len(rows) < len(equinox_call.levels)
    assert sum(r.repeats if r.folded else 1 for r in rows) <= len(equinox_call.levels)
    text = "\n".join(summarize_call(equinox_call))
    assert re.search(r"custom_jvp\S* \(relu\)  \w+  \d+ steps  ×\d+ identical levels", text)


# --- the equinox pre-trace failure --------------------------------------------------

def _without_addresses(text: str) -> str:
    return re.sub(r" at 0x[0-9a-f]+", "", text)


def test_filter_jit_of_a_module_with_float_fields_keeps_all_its_stages():
    """Issue 39, item 1: MaxPool2d's float fields reach jax.jit inside a static argument;
    stage capture reads JAX's cache with them as they were, not as abstract types."""
    session, _ = recorded(programs.run_max_pool_in_filter_jit)
    (call,) = [c for c in session.calls if c.transform == "jit"]
    assert [(s.name, s.reason) for s in call.stages if not s.available] == []
    assert {s.name for s in call.stages} >= {"f", "stablehlo(jit(f))", "hlo(jit(f))"}


def test_filter_value_and_grad_of_a_model_holding_a_function_keeps_all_its_stages():
    """Issue 39, item 1: jax.nn.relu (a custom_jvp function) among the model's layers is
    passed through by grad; stage capture holds it fixed, as the call had it."""
    session, _ = recorded(programs.run_module_list_holding_relu)
    (call,) = [c for c in session.calls if c.transform == "value_and_grad"]
    assert [(s.name, s.reason) for s in call.stages if not s.available] == []
    assert {"f", "value_and_grad(f)"} <= {s.name for s in call.stages}


def test_jit_of_an_equinox_module_is_a_recorded_failure_naming_filter_jit():
    model = eqx.nn.MLP(in_size=2, out_size=1, width_size=4, depth=1, key=jax.random.key(1))
    x = jnp.ones((3, 2))
    traced = []

    def predict(model, x):
        traced.append(1)
        return jax.vmap(model)(x)

    with pytest.raises(TypeError) as plain:
        jax.jit(predict)(model, x)
    with pytest.raises(TypeError) as outside:
        T.jit(predict)(model, x)
    with T.record() as session:
        with pytest.raises(TypeError) as inside:
            T.jit(predict)(model, x)
    assert traced == []  # nothing was traced, by JAX or by the check
    assert _without_addresses(str(plain.value)) == _without_addresses(str(outside.value)) \
        == _without_addresses(str(inside.value))
    (call,) = session.calls
    assert not call.ok and call.source.file == HERE
    (error,) = call.errors
    assert error.type_name == "TypeError" and error.message == str(inside.value)
    assert error.rule == "non_array_argument" and error.argument == "model.activation"
    assert "eqx.filter_jit" in error.hint and "static_argnums=(0,)" in error.hint
    assert _paths(_tree(call, "model"))[".layers[0].weight"].aval == "float32[4,2]"


def test_a_non_array_leaf_in_a_plain_container_names_static_argnums():
    def f(config, x):
        return x * 2

    with T.record() as session:
        with pytest.raises(TypeError):
            T.jit(f)({"name": "relu", "scale": jnp.ones(2)}, jnp.ones(2))
        assert T.jit(f, static_argnums=0)(("relu",), jnp.ones(2)).shape == (2,)
    failed, ok = session.calls
    assert failed.errors[0].argument == "config['name']"
    assert "static_argnums=(0,)" in failed.errors[0].hint
    assert "eqx" not in failed.errors[0].hint
    assert ok.ok


# --- flax linen + optax adamw ---------------------------------------------------------------

def test_flax_linen_training_step():
    session, _ = recorded(programs.run_linen)
    (call,) = session.calls
    assert call.ok and call.source.file == PROGRAMS and call.source.function == "run_linen"
    assert all(s.source.file == PROGRAMS for s in call.steps)
    assert any(s.source.function == "LinenMLP.__call__" for s in call.steps)
    assert any(s.source.via is not None and _library_file(s.source.via.file, "flax")
               for s in call.steps)
    assert any("Dense_0" in s.name_stack for s in call.steps)  # linen's own scopes
    params = _paths(_tree(call, "params"))
    assert params["['params']['Dense_0']['kernel']"].aval == "float32[2,8]"
    opt = _paths(_tree(call, "opt_state"))
    assert opt["[0].nu['params']['Dense_1']['bias']"].aval == "float32[1]"


# --- flax nnx (with a custom_vjp) + optax -----------------------------------------------

def test_flax_nnx_training_step():
    session, _ = recorded(programs.run_nnx)
    (call,) = session.calls
    assert call.ok and call.source.file == PROGRAMS and call.source.function == "run_nnx"
    assert _library_file(call.source.via.file, "flax")
    in_module = [s for s in call.steps if s.source.function == "NnxMLP.__call__"]
    assert in_module and any(s.source.via is not None and s.source.via.function ==
                             "Linear.__call__" for s in in_module)
    model = _paths(_tree(call, "model"))
    assert model[""].type_name == "library_programs.NnxMLP"
    assert model[".l1.kernel.value"].aval == "float32[2,8]"
    assert model[".l1"].type_name == "flax.nnx.nn.linear.Linear"
    assert ("in_features", "2") in model[".l1"].static
    opt = _paths(_tree(call, "optimizer"))
    assert opt[".opt_state[0].mu['l1']['kernel'].value"].aval == "float32[2,8]"
    kinds = {lv.kind for lv in call.levels}
    assert {"custom_vjp_fwd", "custom_vjp_bwd"} <= kinds


# --- diffrax under grad --------------------------------------------------------------------

@pytest.fixture(scope="module")
def diffrax_session():
    session, _ = recorded(programs.run_diffrax, clear_jax_caches=True)
    return session


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_diffrax_under_grad_reports_no_leaked_tracer(diffrax_session):
    """Issue 36, item 12: equinox evaluates diffrax's closure-converted jaxpr on tracers of a
    jit trace of its own, running under the call: no leak (JAX raised nothing)."""
    (call,) = [c for c in diffrax_session.calls if c.transform == "grad"]
    assert call.ok and not call.errors
    assert [d.kind for d in call.diagnostics] == []


@pytest.mark.slow
@pytest.mark.timeout(300)  # the module's diffrax recording: minutes on a loaded machine
def test_diffrax_solve_under_grad_folds_repeated_levels(diffrax_session, tmp_path, capsys):
    (call,) = [c for c in diffrax_session.calls if c.transform == "grad"]
    assert call.ok and call.source.file == PROGRAMS
    rows = level_rows(call)
    assert max(r.repeats for r in rows) >= 2
    assert len(rows) < len(call.levels)
    expanded = level_rows(call, {r.position for r in rows if r.repeats > 1})
    assert sorted(r.position for r in expanded) == list(range(len(call.levels)))
    path = tmp_path / "d.json"
    diffrax_session.save(path)
    assert main(["show", str(path)]) == 0
    folded = capsys.readouterr().out
    assert main(["show", str(path), "--expand"]) == 0
    every = capsys.readouterr().out
    assert "identical levels" in folded and "identical levels" not in every
    assert len(every.splitlines()) - len(folded.splitlines()) == len(call.levels) - len(rows)


@pytest.mark.slow
@pytest.mark.timeout(300)  # the module's diffrax recording: minutes on a loaded machine
def test_diffrax_vector_field_ops_are_located_where_the_user_wrote_them(diffrax_session):
    (call,) = [c for c in diffrax_session.calls if c.transform == "grad"]
    sines = [s for s in call.steps if s.primitive == "sin"]
    assert sines and all(s.source.function == "vector_field" for s in sines)
    assert all(s.source.file == PROGRAMS for s in call.steps if s.source is not None)


# --- what counts as user code ----------------------------------------------------------------

def test_set_user_code_moves_the_location_into_a_library(tmp_path):
    lib = tmp_path / "mylib"
    lib.mkdir()
    (lib / "helper_for_locations.py").write_text("def apply(f, x):\n    return f(x)\n")
    spec = importlib.util.spec_from_file_location("helper_for_locations",
                                                  lib / "helper_for_locations.py")
    helper = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helper)
    sys.modules.pop("helper_for_locations", None)

    def f(x):
        return helper.apply(jax.lax.sin, x)

    with T.record() as as_user:
        T.grad(f)(1.0)
    previous = T.set_user_code(library=[str(lib)])
    try:
        with T.record() as as_library:
            T.grad(f)(1.0)
    finally:
        T.set_user_code(*previous)
    sin_user = next(s for s in as_user.calls[0].steps if s.primitive == "sin")
    sin_library = next(s for s in as_library.calls[0].steps if s.primitive == "sin")
    assert sin_user.source.file == str(lib / "helper_for_locations.py")
    assert sin_user.source.via is None
    assert sin_library.source.file == HERE and sin_library.source.function == "f"
    assert sin_library.source.via.file == str(lib / "helper_for_locations.py")
    assert sin_library.source.via.line == 2 and sin_library.source.via.function == "apply"
    assert T.set_user_code(*previous) == previous


# --- levels by parent, identical runs folded (synthetic, exact) ------------------------------

def _levels_call():
    from transforms.model import Call, Level, Step
    L = [Level(0, "jit", "jit#1", 1, None, "DynamicJaxprTrace"),
         Level(1, "grad", "jit#1/grad#2", 2, 0, "LinearizeTrace"),
         Level(2, "custom_jvp_rule", "jit#1/grad#2/custom_jvp_rule#3", 3, 1, "JaxprTrace"),
         Level(3, "custom_jvp_fun", "jit#1/custom_jvp_fun#2", 2, 0, "DynamicJaxprTrace"),
         Level(4, "custom_jvp_fun", "jit#1/grad#2/custom_jvp_rule#3/custom_jvp_fun#4", 4, 2,
               "DynamicJaxprTrace")]
    L += [Level(5 + i, "custom_jvp_fun", "jit#1/custom_jvp_fun#2", 2, 0, "DynamicJaxprTrace",
                "relu") for i in range(3)]
    L += [Level(8 + i, "custom_jvp_rule", "jit#1/custom_jvp_fun#2/custom_jvp_rule#3", 3, 5 + i,
                "JaxprTrace") for i in range(3)]
    steps = tuple(Step(i, 5 + i % 3, "max") for i in range(6))
    return Call(0, "jit", "f", None, levels=tuple(L), steps=steps)


def test_level_rows_nest_by_parent_and_fold_identical_siblings():
    call = _levels_call()
    rows = [(r.position, r.depth, r.repeats, r.folded) for r in level_rows(call)]
    assert rows == [(0, 0, 1, False), (1, 1, 1, False), (2, 2, 1, False), (4, 3, 1, False),
                    (3, 1, 1, False), (5, 1, 3, True), (8, 2, 1, False)]
    expanded = [(r.position, r.depth, r.repeats, r.folded) for r in level_rows(call, {5})]
    assert expanded == [(0, 0, 1, False), (1, 1, 1, False), (2, 2, 1, False), (4, 3, 1, False),
                        (3, 1, 1, False), (5, 1, 3, False), (8, 2, 1, False), (6, 1, 1, False),
                        (9, 2, 1, False), (7, 1, 1, False), (10, 2, 1, False)]


def test_show_indents_levels_by_parent_and_counts_a_folded_run():
    lines = summarize_call(_levels_call())[1:]
    assert lines == [  # a root at its own depth (1: where eval#0's child would be)
        "    jit#1  DynamicJaxprTrace  0 steps",
        "      jit#1/grad#2  LinearizeTrace  0 steps",
        "        jit#1/grad#2/custom_jvp_rule#3  JaxprTrace  0 steps",
        "          jit#1/grad#2/custom_jvp_rule#3/custom_jvp_fun#4  DynamicJaxprTrace  0 steps",
        "      jit#1/custom_jvp_fun#2  DynamicJaxprTrace  0 steps",
        "      jit#1/custom_jvp_fun#2 (relu)  DynamicJaxprTrace  2 steps  ×3 identical levels",
        "        jit#1/custom_jvp_fun#2/custom_jvp_rule#3  JaxprTrace  0 steps",
    ]
    assert len(summarize_call(_levels_call(), expand=True)) == 1 + 11


def test_the_navigator_folds_a_run_and_unfolds_it_on_toggle():
    from transforms.model import Session
    from workbench.tui.navigation import LEVEL, STEP, Outline
    outline = Outline(Session(calls=[_levels_call()]))
    level_rows_shown = [outline.row(i)[2] for i in range(len(outline)) if outline.row(i)[0] == LEVEL]
    # level 3 is empty and shares its label with the run: the navigator leaves it out
    assert level_rows_shown == [0, 1, 2, 4, 5, 8]
    assert outline.index(0).depth[4] == 4  # the root's own depth (1) + 3 by parent
    run_row = next(i for i in range(len(outline)) if outline.row(i) == (LEVEL, 0, 5))
    outline.toggle(run_row)
    shown = [outline.row(i)[2] for i in range(len(outline)) if outline.row(i)[0] == LEVEL]
    assert shown == [0, 1, 2, 4, 5, 8, 6, 7]  # their empty rule levels too (as level 3)
    outline.toggle(run_row)
    # a step at a folded level: finding it lists the run
    row = outline.row_of_step(0, 1)
    assert row is not None and outline.row(row) == (STEP, 0, 1)
