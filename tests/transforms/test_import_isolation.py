"""`import transforms` stays light: no UI or graph libraries come with it."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("workbench", "textual", "rich", "graphviz")

_PROBE = """
import json, sys
import transforms
has_grad = callable(transforms.grad)  # imports the wrappers (and JAX) on first use
loaded = sorted(sys.modules)
print(json.dumps({"loaded": loaded, "has_grad": has_grad}))
"""


def _run(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_import_transforms_loads_no_ui_or_graph_library():
    result = _run(_PROBE)
    assert result["has_grad"]
    assert "transforms" in result["loaded"] and "jax" in result["loaded"]
    heavy = [m for m in result["loaded"] if m.split(".")[0] in HEAVY]
    assert heavy == []


def test_recording_and_saving_load_no_ui_or_graph_library(tmp_path):
    path = tmp_path / "s.json"
    code = _PROBE.replace("import transforms\n", f"""import transforms
import jax.numpy as jnp
with transforms.record() as session:
    transforms.vmap(transforms.grad(jnp.sin))(jnp.arange(3.0))
session.save({str(path)!r})
transforms.load({str(path)!r})
""")
    result = _run(code)
    heavy = [m for m in result["loaded"] if m.split(".")[0] in HEAVY]
    assert heavy == []
    assert path.exists()


@pytest.mark.slow
def test_the_probe_would_see_a_heavy_import():
    """The check above can fail: importing one of them is seen."""
    result = _run(_PROBE.replace("import transforms\n", "import transforms\nimport rich\n"))
    assert "rich" in result["loaded"]
