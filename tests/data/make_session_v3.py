"""Writes session_v3.json with the version-3 writer: the package as it was at V3_COMMIT (the
last commit writing schema version 3, steps as rows), taken from git into a temporary
folder and run there.

    PYTHONPATH=$PWD .venv/bin/python tests/data/make_session_v3.py
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

V3_COMMIT = "d11be70"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

SCRIPT = """
import sys
import jax.numpy as jnp
import transforms
assert transforms.SCHEMA_VERSION == 3, transforms.__file__

def loss(w, x):
    return jnp.sum(jnp.tanh(x * w) ** 2)

with transforms.record(stages=True) as session:
    for i in range(3):
        transforms.vmap(transforms.grad(loss), in_axes=(None, 0))(jnp.ones(3), jnp.ones((2, 3)) * i)
    transforms.jit(jnp.cos)(1.0)
session.title = "version 3: vmap(grad(loss)) three times, then jit(cos)"
session.save(sys.argv[1])
"""


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        archive = subprocess.run(["git", "archive", V3_COMMIT, "transforms"], cwd=ROOT,
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
        env = {**os.environ, "PYTHONPATH": folder}
        subprocess.run([sys.executable, "-c", SCRIPT, os.path.join(HERE, "session_v3.json")],
                       cwd=folder, env=env, check=True)


if __name__ == "__main__":
    main()
