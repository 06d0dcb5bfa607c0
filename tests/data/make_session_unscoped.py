"""Writes session_unscoped.json with the writer from before the records' `scope` (Step.scope,
EqnRecord.scope, NonFiniteRecord.scope): the package as it was at BEFORE_COMMIT, taken from git
into a temporary folder and run there (with the Python step core: the C one is not built there).

    PYTHONPATH=$PWD .venv/bin/python tests/data/make_session_unscoped.py
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

BEFORE_COMMIT = "49867ca"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

SCRIPT = """
import sys
import jax
import jax.numpy as jnp
import transforms
from transforms.model import Step
assert "scope" not in Step._fields, transforms.__file__

def loss(x):
    with jax.named_scope("encoder"), jax.named_scope("layer_0"):
        h = jnp.log(x)
    with jax.named_scope("head"):
        return jnp.sum(h * 2.0)

with transforms.record(stages=True, find_nans=True) as session:
    transforms.grad(loss)(jnp.array([0.0, 1.0]))
session.title = "before Step.scope: grad(loss) in named scopes, a NaN found"
session.save(sys.argv[1])
"""


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        archive = subprocess.run(["git", "archive", BEFORE_COMMIT, "transforms"], cwd=ROOT,
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
        env = {**os.environ, "PYTHONPATH": folder, "WORKBENCH_CORE": "python"}
        env.pop("WORKBENCH_REQUIRE_CORE", None)
        subprocess.run([sys.executable, "-W", "ignore", "-c", SCRIPT,
                        os.path.join(HERE, "session_unscoped.json")],
                       cwd=folder, env=env, check=True)


if __name__ == "__main__":
    main()
