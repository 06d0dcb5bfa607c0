"""Commands that only read a dump never import JAX: each runs in a fresh process, then the
process's `sys.modules` is checked (issue 18, item 3)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp
import pytest
from sweeps import sweep

import transforms as T

JAX_MODULES = ("jax", "jaxlib")

# Runs `workbench.cli.main(ARGV)` and prints its exit code and the top-level modules loaded.
# For `open`, the terminal is faked (stdin/stdout say they are one) and the app runs headless:
# it draws its first frame, moves down the navigator, and quits.
_PROBE = """
import io, json, sys
argv = json.loads(sys.argv[1])
out = open(sys.argv[2], "w")

class _Terminal(io.StringIO):
    def isatty(self):
        return True

if argv[0] == "open":
    import workbench.tui as tui

    async def _keys(pilot):
        await pilot.pause()
        await pilot.press("down", "down", "enter")
        await pilot.pause()
        pilot.app.exit()

    def _headless(path, export_dir=None, process=None, load=None, check=None):
        app = tui.build_open_app(path, load, export_dir, process, check)
        app.run(headless=True, auto_pilot=_keys, size=(120, 40))
        return app.return_code or 0
    tui.open_dump = _headless
    sys.stdin = _Terminal()
    sys.stdout = _Terminal()
else:
    sys.stdout = io.StringIO()

from workbench.cli import main
code = main(argv)
json.dump({"code": code, "modules": sorted({m.split(".")[0] for m in sys.modules})}, out)
"""


def _run(argv: list[str], tmp_path: Path) -> dict:
    result = tmp_path / "result.json"
    done = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(argv), str(result)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(result.read_text())


@pytest.fixture(scope="module")
def dump(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("dumps") / "small.json"
    with T.record(stages=True) as session:
        T.vmap(T.grad(lambda x: jnp.sin(x) * x))(jnp.arange(3.0))
        T.jit(jnp.cos)(1.0)
    session.save(path)
    return str(path)


COMMANDS = {
    "show": ["show", "{dump}"],
    "show --steps": ["show", "{dump}", "--steps", "--call", "0"],
    "graph jaxpr": ["graph", "{dump}", "-o", "{tmp}/g.dot"],
    "graph tower": ["graph", "{dump}", "--view", "tower", "-o", "{tmp}/t.dot"],
    "graph stages": ["graph", "{dump}", "--view", "stages", "-o", "{tmp}/s.dot"],
    "diff": ["diff", "{dump}", "{dump}"],
    "diff --json": ["diff", "{dump}", "{dump}", "--json"],
    "html": ["html", "{dump}", "-o", "{tmp}/r.html"],
    "schema": ["schema"],
    "schema --validate": ["schema", "--validate", "{dump}"],
    "open": ["open", "{dump}"],
}


@pytest.mark.parametrize("name", sweep(list(COMMANDS), list(COMMANDS), every=4))
def test_read_only_command_imports_no_jax(name, dump, tmp_path):
    argv = [a.format(dump=dump, tmp=tmp_path) for a in COMMANDS[name]]
    result = _run(argv, tmp_path)
    assert result["code"] == 0
    assert "transforms" in result["modules"] and "workbench" in result["modules"]
    assert [m for m in JAX_MODULES if m in result["modules"]] == []


def test_open_probe_draws_the_app(dump, tmp_path):
    """The `open` probe really ran the TUI (Textual was imported and the app drew)."""
    result = _run(["open", dump], tmp_path)
    assert "textual" in result["modules"]


def test_the_probe_sees_jax_when_a_command_imports_it(dump, tmp_path):
    """The check can fail: `run` imports JAX, and the probe sees it."""
    script = tmp_path / "s.py"
    script.write_text("import jax.numpy as jnp\nprint(jnp.sin(1.0))\n")
    result = _run(["dump", "-q", "-o", str(tmp_path / "o.json"), str(script)], tmp_path)
    assert "jax" in result["modules"]


def test_transforms_names_that_need_jax_are_imported_on_first_use():
    code = ("import sys, transforms\n"
            "before = 'jax' in sys.modules\n"
            "record = transforms.record\n"
            "print(before, 'jax' in sys.modules, record.__module__, transforms.growth.__module__,"
            " sorted(n for n in transforms.__all__ if not hasattr(transforms, n)))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.split() == ["False", "True", "transforms._recording._record",
                                   "transforms._stages._chain",
                                   "[]"]


_FIRST_FRAME_PROBE = """
import sys
import workbench.tui as tui
from workbench.tui.screens.loading import LoadingScreen

seen = []
mounted = LoadingScreen.on_mount

def on_mount(self):
    seen.append(sorted(m for m in ("transforms.model", "workbench.tui.screens.picker",
                                   "workbench.tui.navigation") if m in sys.modules))
    mounted(self)

LoadingScreen.on_mount = on_mount

async def _quit(pilot):
    await pilot.pause()
    pilot.app.exit()

app = tui.build_open_app(sys.argv[1])
app.run(headless=True, auto_pilot=_quit, size=(100, 30))
print(seen)
"""


def test_open_draws_its_loading_frame_before_importing_the_model(dump):
    """`workbench open`'s first frame (the gate in bench/bench_tui.py) pays for Textual only:
    the dump's model, the TUI's model and the picker are imported behind it."""
    done = subprocess.run([sys.executable, "-c", _FIRST_FRAME_PROBE, dump], capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "[[]]"


def test_the_cli_module_imports_no_model():
    done = subprocess.run([sys.executable, "-c", "import sys, workbench.cli; "
                           "print('transforms.model' in sys.modules)"],
                          capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["False"]
