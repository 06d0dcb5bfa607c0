"""The library sweep (issue 39, "Real libraries read as their authors wrote them"): every
program of tests/library_programs.py, written as users of flax, equinox, optax, numpyro and
diffrax write them, recorded as `workbench dump` records a script (in a process of its own,
so the libraries are imported while jax.* is patched: numpyro's `from jax import grad`
records only then) and run plainly in another. For each program:

(a) its results are bitwise those of the plain run;
(b) every stage of its calls is available, wherever JAX made it;
(c) no jit of JAX's own (a jnp wrapper) is listed as a step by `workbench show --steps`: it
    reads as its operation at the user's line (`mean at library_programs.py:49`);
(d) stage names are unique in each call, and `workbench graph --stage NAME` draws each
    (`mse` and `mse#2` alike, MAML's two inner grads);
(e) `show --steps` lists each step under the module or named scope it ran in.
"""
from __future__ import annotations

import contextlib
import functools
import io
import os
import re
import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import pytest

from transforms.model import Call, Session, load, stage_function
from workbench.analysis import library_operation, step_group
from workbench.cli import main
from workbench.export import collect
from workbench.export.graphviz import GraphOptions

for _library in ("flax", "equinox", "optax", "numpyro", "diffrax"):
    pytest.importorskip(_library)

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS_FILE = os.path.join(TESTS, "library_programs.py")

# Recorded together, one process per group: the heavy ones (NUTS, an ODE solve under grad)
# take most of the time.
QUICK = ("linen", "nnx", "equinox_cnn", "max_pool_in_filter_jit", "module_list_holding_relu",
         "custom_root", "hvp", "maml")
HEAVY = ("numpyro_nuts", "diffrax")

# The groups each program's steps are listed under, as `show` names them (analysis.step_group):
# a flax nnx or equinox model's module path where the stack held its modules (nnx pushes no
# scope; equinox's scope names a class, its path the attribute: CNN/layers[0]), else the
# modules and named scopes the libraries push (linen; equinox's for the backward pass, which
# JAX's transpose runs with no module on the stack). numpyro's model has none.
SCOPES = {
    "linen": {"LinenMLP", "LinenMLP/Dense_0", "LinenMLP/Dense_1"},
    "nnx": {"NnxMLP", "NnxMLP/l1", "NnxMLP/l2"},
    "equinox_cnn": {"CNN", "CNN/layers[0]", "CNN/layers[2]", "CNN/layers[4]",
                    "eqx.nn.Conv", "eqx.nn.MaxPool2d/eqx.nn.Pool", "eqx.nn.Linear"},
    "max_pool_in_filter_jit": {"MaxPool2d"},  # an argument of the jitted function, no parent
    "module_list_holding_relu": {"Linear", "eqx.nn.Linear"},
    # diffrax's solver, step size controller and adjoint are equinox modules (its vector field
    # a WrapTerm the solver is handed); equinox's checkpointed while loop, in diffrax's
    # "outer-loop" (the loop's custom_vjp body is traced with a fresh name stack, under the
    # scope of the step that ran it), where no module's method is on the stack
    "diffrax": {"Tsit5", "Tsit5/WrapTerm", "ConstantStepSize", "RecursiveCheckpointAdjoint",
                "checkpointed-fwd", "checkpointed-bwd", "outer-loop",
                "outer-loop/checkpointed-bwd"},
}

COMPILED_ROLES = ("stablehlo", "hlo", "cost", "memory")


@dataclass
class Recorded:
    """One program: its calls in the dump, its results recorded and plain."""
    name: str
    dump: str
    session: Session
    calls: list[Call]
    recorded: list[np.ndarray]
    plain: list[np.ndarray]


def _results(folder: str, name: str) -> list[np.ndarray]:
    with np.load(os.path.join(folder, f"{name}.npz")) as saved:
        return [saved[f"arr_{i}"] for i in range(len(saved.files))]


def _record_group(folder, names: tuple[str, ...]) -> dict[str, Recorded]:
    """`workbench dump library_programs.py` and `python library_programs.py`, side by side."""
    plain_dir, recorded_dir = folder / "plain", folder / "recorded"
    plain_dir.mkdir()
    recorded_dir.mkdir()
    dump = str(folder / "session.json")
    commands = [[sys.executable, PROGRAMS_FILE, str(plain_dir), *names],
                [sys.executable, "-m", "workbench", "dump", PROGRAMS_FILE, "-o", dump,
                 str(recorded_dir), *names]]
    runs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             stdin=subprocess.DEVNULL, cwd=os.path.dirname(TESTS)) for c in commands]
    for command, run in zip(commands, runs):
        _, err = run.communicate(timeout=600)
        assert run.returncode == 0, f"{' '.join(command)} exited {run.returncode}:\n{err}"
    session = load(dump)
    by_program = {name: [c for c in session.calls if c.source is not None
                         and c.source.function == f"run_{name}"] for name in names}
    claimed = {c.index for calls in by_program.values() for c in calls}
    strays = [c.index for c in session.calls if c.index not in claimed]
    assert strays == [], f"calls made by no program's run_*: {strays}"
    return {name: Recorded(name, dump, session, calls, _results(str(recorded_dir), name),
                           _results(str(plain_dir), name))
            for name, calls in by_program.items()}


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    groups: dict[tuple[str, ...], dict[str, Recorded]] = {}

    def get(name: str) -> Recorded:
        group = QUICK if name in QUICK else HEAVY
        if group not in groups:
            groups[group] = _record_group(tmp_path_factory.mktemp("sweep"), group)
        return groups[group][name]
    return get


def _params() -> list:
    """Every program; the heavy ones slow."""
    return [pytest.param(name, id=name, marks=[pytest.mark.slow] if name in HEAVY else [])
            for name in QUICK + HEAVY]


@pytest.fixture
def program(recordings, request) -> Recorded:
    found = recordings(request.param)
    assert found.calls, f"{request.param}: no call recorded"
    return found


def _printed(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0
    return out.getvalue()


@functools.cache
def _listing(dump: str, call: int) -> str:
    """`show --steps` of the call, every level listed (none folded with identical ones)."""
    return _printed("show", dump, "--call", str(call), "--steps", "--expand")


def _describe(call: Call) -> str:
    return f"call {call.index} ({call.transform} {call.function})"


# --- (a) the same results ----------------------------------------------------------------------

@pytest.mark.timeout(600)
@pytest.mark.parametrize("program", _params(), indirect=True)
def test_results_are_bitwise_those_of_the_plain_run(program):
    assert len(program.recorded) == len(program.plain)
    for i, (got, plain) in enumerate(zip(program.recorded, program.plain)):
        assert (got.dtype, got.shape) == (plain.dtype, plain.shape), f"leaf {i}"
        assert got.tobytes() == plain.tobytes(), f"leaf {i}: {got} recorded, {plain} plain"


# --- (b) every stage JAX made ------------------------------------------------------------------

def _made_by_jax(call: Call, stage) -> bool:
    """False for a compiled view of a jit inside another transformation: JAX never compiles
    that jit by itself (the stage says so, and what JAX compiles instead)."""
    outermost_jit = (call.transform == "jit" and stage.name.startswith(f"{stage.role}(jit(")
                     and stage_function(stage.name) == "f")
    return stage.role not in COMPILED_ROLES or outermost_jit


@pytest.mark.timeout(600)
@pytest.mark.parametrize("program", _params(), indirect=True)
def test_every_stage_jax_made_is_available(program):
    missing = []
    for call in program.calls:
        assert call.stages, f"{_describe(call)}: no stages"
        for stage in call.stages:
            if stage.available:
                continue
            if not _made_by_jax(call, stage):
                assert stage.reason.startswith("JAX does not compile jit("), stage.reason
                continue
            missing.append(f"{_describe(call)} stage {stage.name}: {stage.reason}")
    assert missing == [], "\n".join(missing)


# --- (c) jnp's jits read as operations ----------------------------------------------------------

@pytest.mark.timeout(600)
@pytest.mark.parametrize("program", _params(), indirect=True)
def test_no_jnp_wrapper_is_listed_as_a_step(program):
    for call in program.calls:
        lines = _listing(program.dump, call.index)
        library = [s for s in call.steps if s.library]
        for step in library:
            listed = re.search(rf"^ *#{step.index} (\S+)(.*)$", lines, re.MULTILINE)
            assert listed is not None, f"{_describe(call)}: step #{step.index} not listed"
            operation = library_operation(step)
            assert listed.group(1) == operation and listed.group(2).startswith(
                " at library_programs.py:"), \
                f"{_describe(call)}: #{step.index} {step.title} listed as {listed.group(0)!r}"
        wrappers = sorted({s.title for s in library if s.title in lines})
        assert wrappers == [], f"{_describe(call)} lists {wrappers}"


# --- (d) stage names unique and selectable ------------------------------------------------------

@pytest.mark.timeout(600)
@pytest.mark.parametrize("program", _params(), indirect=True)
def test_stage_names_are_unique_and_each_is_drawn(program):
    for call in program.calls:
        names = [s.name for s in call.stages]
        assert len(set(names)) == len(names), f"{_describe(call)}: {names}"
        for stage in call.stages:
            if stage.jaxpr is None:
                continue
            drawn = collect(program.session, "jaxpr", call=call.index, stage=stage.name,
                            options=GraphOptions(max_nodes=40))
            assert drawn.title.startswith(f"{stage.name}: "), (stage.name, drawn.title)


def test_a_numbered_stage_name_is_drawn_by_the_command(recordings, tmp_path):
    """MAML's two inner jax.grad(mse): stages of `mse` and of `mse#2`, each drawn by name."""
    program = recordings("maml")
    (call,) = program.calls
    assert {"mse", "mse#2", "grad(mse)", "grad(mse#2)"} <= {s.name for s in call.stages}
    for name in ("mse", "mse#2", "grad(mse)", "grad(mse#2)"):
        out = tmp_path / "stage.dot"
        assert main(["graph", program.dump, "--call", str(call.index), "--stage", name,
                     "-o", str(out), "-q"]) == 0
        assert f'label="{name}: ' in out.read_text()


# --- (e) steps grouped by module ------------------------------------------------------------------

def _listed_groups(lines: str) -> dict[int, str]:
    """Each step `show --steps` lists: the module or scope it is listed under ("" none)."""
    groups: dict[int, str] = {}
    headers: list[tuple[int, str]] = []  # (indent, the line) of the lines above
    for line in lines.splitlines():
        indent = len(line) - len(line.lstrip())
        while headers and headers[-1][0] >= indent:
            headers.pop()
        step = re.match(r" *#(\d+) ", line)
        if step:
            above = headers[-1][1].strip() if headers else ""
            groups[int(step.group(1))] = above[3:-1] if re.fullmatch(r"in .*:", above) else ""
        else:
            headers.append((indent, line))
    return groups


@pytest.mark.timeout(600)
@pytest.mark.parametrize("program", _params(), indirect=True)
def test_steps_are_listed_under_their_modules(program):
    seen: set[str] = set()
    for call in program.calls:
        groups = _listed_groups(_listing(program.dump, call.index))
        wrong = [(s.index, s.name_stack, groups.get(s.index)) for s in call.steps
                 if groups.get(s.index) != step_group(s)]
        assert wrong == [], f"{_describe(call)}: (step, name stack, listed under) {wrong}"
        seen |= set(groups.values()) - {""}
    assert seen == SCOPES.get(program.name, set())
