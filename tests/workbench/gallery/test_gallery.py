"""`workbench demo --export`: the real command, once per module, on the whole gallery."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import transforms
from transforms.model import _schema as schema
from workbench import gallery

# The export records the whole gallery in a subprocess (about 25 s quiet, in the first
# test that asks for it): more than the default per-test timeout on a loaded machine.
pytestmark = pytest.mark.timeout(300)

SEED_EXAMPLES = {
    "grad_tanh", "higher_derivatives", "logistic_argnums", "logistic_value_and_grad",
    "logistic_has_aux", "logistic_check_grads", "convolve_vmap", "convolve_axes",
    "all_pairs_dist", "per_example_grads", "print_tracers", "tracer_val", "trace_jaxpr",
    "loop_vs_vmap", "absolute_vmap", "grad_control_flow", "jit_grad_control_flow",
    "sum_sq_jit", "ntcontainer_broken", "ntcontainer_fixed", "primal_tangent_mismatch",
}
# Examples beyond the seed documents, by what they show.
MORE_EXAMPLES = {"sharded_training_step": "sharding", "flax_linen_adam_step": "libraries",
                 "equinox_filter_jit_step": "libraries", "equinox_jit_needs_filter_jit": "libraries",
                 "flax_nnx_optimizer_step": "libraries", "diffrax_fit_step": "libraries",
                 "where_gradient_trap": "nans", "last_batch_recompile": "recompiles",
                 "python_float_learning_rate": "recompiles"}


def workbench(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=300, **kw)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("gallery")
    done = workbench("demo", "--export", str(out), "--no-graphs")
    assert done.returncode == 0, done.stderr
    index = json.loads((out / "index.json").read_text())
    return out, index, done


def test_every_seed_example_is_in_the_gallery_with_a_title_and_explanation():
    names = [ex.name for ex in gallery.EXAMPLES]
    assert set(names) == SEED_EXAMPLES | set(MORE_EXAMPLES) and len(names) == len(set(names))
    for ex in gallery.EXAMPLES:
        assert ex.title and len(ex.explanation) > 80, ex.name
        assert ex.seed in ("000", "002", "003") or MORE_EXAMPLES[ex.name] == ex.seed


@pytest.mark.slow
def test_export_writes_one_dump_per_example_and_an_index(exported):
    out, index, done = exported
    assert [e["name"] for e in index["examples"]] == [ex.name for ex in gallery.EXAMPLES]
    assert index["jax_version"] == transforms.load(out / index["examples"][0]["dump"]).jax_version
    for entry in index["examples"]:
        session = transforms.load(out / entry["dump"])
        assert entry["ok"] and entry["error"] is None, entry
        assert entry["calls"] == len(session.calls) >= 1, entry["name"]
        assert entry["steps"] == session.step_count
        assert session.title == entry["title"]
        assert session.metadata == {"example": entry["name"], "seed": entry["seed"],
                                    "description": entry["explanation"],
                                    "output": entry["output"]}
    md = (out / "index.md").read_text()
    assert md.startswith("# Gallery of the seed examples")
    for ex in gallery.EXAMPLES:
        assert ex.title.replace("|", "\\|") in md
    # plain progress lines when stderr is not a terminal
    assert f"[1/{len(gallery.EXAMPLES)}] grad_tanh" in done.stderr
    assert not [p for p in out.iterdir() if p.name.startswith(".tmp-")]


@pytest.mark.slow
def test_every_dump_validates_against_the_schema(exported):
    out, index, _ = exported
    session_schema = schema.session_schema()
    for entry in index["examples"]:
        data = json.loads((out / entry["dump"]).read_text())
        assert schema.schema_problems(data, session_schema) == [], entry["dump"]
    done = workbench("schema", "--validate", *(str(out / e["dump"]) for e in index["examples"]))
    assert done.returncode == 0, done.stderr


def _entry(index, name):
    return next(e for e in index["examples"] if e["name"] == name)


@pytest.mark.slow
@pytest.mark.parametrize("name, error_type", [
    ("absolute_vmap", "jax.errors.TracerBoolConversionError"),
    ("jit_grad_control_flow", "jax.errors.TracerBoolConversionError"),
    ("ntcontainer_broken", "NameError"),
    ("primal_tangent_mismatch", "TypeError"),
])
def test_failures_the_seeds_show_are_recorded_not_fatal(exported, name, error_type):
    out, index, _ = exported
    entry = _entry(index, name)
    assert entry["ok"] and entry["shows_failure"]
    assert error_type in {e["type"] for e in entry["errors"]}
    session = transforms.load(out / entry["dump"])
    failed = [c for c in session.calls if not c.ok]
    assert failed and all(e.type_name == error_type for c in failed for e in c.errors)
    assert entry["shown_failures"]


@pytest.mark.slow
def test_outputs_are_what_the_seeds_print(exported):
    _, index, _ = exported
    out = {e["name"]: e["output"] for e in index["examples"]}
    assert out["grad_tanh"].startswith("0.0706508")
    assert out["higher_derivatives"].split() == ["4.0", "10.0", "6.0"]
    assert "VmapTracer(aval=int32[], batched=int32[3])" in out["print_tracers"]
    assert "JitTracer(" in out["print_tracers"] and "GradTracer(" in out["print_tracers"]
    assert out["tracer_val"].strip() == "[0. 1. 2.]"
    assert "sin a" in out["trace_jaxpr"] and "mul b 2.0" in out["trace_jaxpr"]
    assert "batch 2: loop" in out["loop_vs_vmap"]
    assert "[ 2.  1. -0.  1.  2.]" in out["absolute_vmap"]
    assert out["grad_control_flow"].split()[:2] == ["12.0", "-4.0"]
    assert "it should use `array`" in out["ntcontainer_broken"]
    assert "NTContainer(name='composite-container', flag=0" in out["ntcontainer_fixed"]
    assert "equal container (pytree) structures" in out["primal_tangent_mismatch"]


@pytest.mark.slow
def test_loop_grows_the_jaxpr_and_vmap_does_not(exported):
    _, index, _ = exported
    lines = [l for l in _entry(index, "loop_vs_vmap")["output"].splitlines()
             if l.startswith("batch ")]
    counts = {int(l.split()[1].rstrip(":")): (int(l.split()[3]), int(l.split()[6])) for l in lines}
    assert counts[4][0] > counts[2][0] and counts[4][1] == counts[2][1]


@pytest.mark.slow
def test_loop_vs_vmap_keeps_its_growth_on_the_vmap_call(exported):
    out, index, _ = exported
    session = transforms.load(out / _entry(index, "loop_vs_vmap")["dump"])
    (call,) = [c for c in session.calls if c.growth]
    assert (call.transform, call.function) == ("vmap", "convolve")
    (growth,) = call.growth
    loop, vmap = growth.series
    assert (loop.label, vmap.label) == ("Python loop", "vmap")
    # the seed's lesson: six dot_generals for a batch of two against three
    assert [p.count("dot_general") for p in loop.points] == [3, 6, 9, 12]
    assert [p.count("dot_general") for p in vmap.points] == [3, 3, 3, 3]
    assert [p.eqn_count for p in vmap.points] == [10, 10, 10, 10]


@pytest.mark.slow
def test_stages_are_recorded_where_they_help(exported):
    out, index, _ = exported
    session = transforms.load(out / _entry(index, "sum_sq_jit")["dump"])
    names = [s.name for s in session.calls[0].stages]
    assert "f" in names and any(n.startswith("hlo(") for n in names)
    # printing examples keep stages too: they come from the same traces, nothing prints again
    tracers = transforms.load(out / _entry(index, "print_tracers")["dump"])
    assert all(c.stages for c in tracers.calls)
    assert _entry(index, "print_tracers")["output"].count("x = ") == 3


def test_demo_list_and_unknown_only():
    listed = workbench("demo", "--list")
    assert listed.returncode == 0 and "grad_tanh" in listed.stdout
    bad = workbench("demo", "--only", "nope", "--export", "unused")
    assert bad.returncode == 2 and "no gallery example 'nope'" in bad.stderr


def test_demo_without_export_and_without_a_terminal_says_use_export():
    done = workbench("demo")  # stdin and stdout are pipes here: no terminal UI possible
    assert done.returncode == 2
    assert "--export DIR" in done.stderr and "Traceback" not in done.stderr


def test_demo_export_into_a_file_is_bad_input(tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    done = workbench("demo", "--export", str(target), "--only", "grad_tanh")
    assert done.returncode == 2 and "not a folder" in done.stderr


def test_the_checked_in_schema_is_the_generated_one():
    assert schema.SCHEMA_FILE.read_text() == schema.schema_text(), (
        "transforms/model/ changed: regenerate with "
        "`python -m workbench schema -o transforms/model/session.schema.json`")


def test_export_draws_graphs_when_the_exporter_is_there(tmp_path):
    export = pytest.importorskip("workbench.export")
    if not hasattr(export, "export_session_graphs"):
        pytest.skip("workbench.export has no export_session_graphs yet")
    done = workbench("demo", "--export", str(tmp_path), "--only", "grad_tanh")
    assert done.returncode == 0, done.stderr
    entry = json.loads((tmp_path / "index.json").read_text())["examples"][0]
    assert entry["graphs"] and all((tmp_path / g).is_file() for g in entry["graphs"])
    assert f"graph: [{entry['graphs'][0]}]" in (tmp_path / "index.md").read_text()


@pytest.mark.slow
def test_demo_runs_the_sharded_step_on_8_cpu_devices(exported):
    out, index, _ = exported
    entry = _entry(index, "sharded_training_step")
    assert entry["output"].startswith("8 devices; batch (32, 8) in blocks of (4, 8)")
    (call,) = transforms.load(out / entry["dump"]).calls
    batch = {r.name: r for r in call.shardings}["batch[0]"]
    assert batch.mesh_shape == (8,) and batch.shard_shape == (4, 8)
    assert {r.role for r in call.shardings} == {"input", "output", "gradient"}
    (hlo,) = [s for s in call.stages if s.role == "hlo"]
    assert "all-reduce" in hlo.text
    assert [c.kind for c in hlo.collectives] == ["all-reduce"] * hlo.text.count(" all-reduce(")
    assert {g.devices for c in hlo.collectives for g in c.groups} == {tuple(range(8))}


def _env_without_xla_flags() -> dict:
    # NB: tests/conftest.py sets XLA_FLAGS for this process; the CLI must not need it.
    return {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}


@pytest.mark.parametrize("flags, devices", [
    (None, 8), pytest.param("--xla_force_host_platform_device_count=2", 2, marks=pytest.mark.slow)])
def test_demo_asks_for_8_devices_unless_the_user_set_a_count(tmp_path, flags, devices):
    env = _env_without_xla_flags()
    if flags is not None:
        env["XLA_FLAGS"] = flags
    done = workbench("demo", "--export", str(tmp_path), "--only", "sharded_training_step",
                     "--no-graphs", env=env)
    assert done.returncode == 0, done.stderr
    entry = json.loads((tmp_path / "index.json").read_text())["examples"][0]
    assert entry["output"].startswith(f"{devices} devices; batch ({4 * devices}, 8) in blocks "
                                      f"of (4, 8)")


def test_run_leaves_the_device_count_of_scripts_alone(tmp_path):
    script = tmp_path / "count.py"
    script.write_text("import jax\nprint(len(jax.devices()))\n")
    done = workbench("dump", str(script), "-o", str(tmp_path / "t.json"),
                     env=_env_without_xla_flags())
    assert done.stdout.strip().splitlines()[0] == "1", (done.stdout, done.stderr)
