"""Writes session_v1.json with the version-1 writer (transforms/record.py before schema
version 2), and session_v1.as_v2.json, the same session written by the current code.

    PYTHONPATH=$PWD .venv/bin/python tests/data/make_session_v1.py

The old record.py is taken from git (commit V1_COMMIT) into a temporary folder and
imported from there; its Session.save encodes today's records, whose classes have
not changed since, exactly as version 1 did.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile

import jax.numpy as jnp

import transforms

V1_COMMIT = "c00cf9d"  # the last commit writing schema version 1
HERE = os.path.dirname(os.path.abspath(__file__))


def old_record_module():
    source = subprocess.run(["git", "show", f"{V1_COMMIT}:transforms/record.py"], cwd=HERE,
                            check=True, capture_output=True, text=True).stdout
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "record_v1.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location("record_v1", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["record_v1"] = module  # dataclasses look their module up while building
    spec.loader.exec_module(module)
    assert module.SCHEMA_VERSION == 1
    return module


def small_session() -> transforms.Session:
    def loss(w, x):
        return jnp.sum(jnp.tanh(x * w) ** 2)

    with transforms.record(stages=True) as session:
        transforms.vmap(transforms.grad(loss), in_axes=(None, 0))(1.5, jnp.ones((2, 3)))
        try:
            transforms.vmap(lambda x: x if x > 0 else -x)(jnp.arange(3.0))
        except Exception:  # noqa: BLE001 - the failure is what the fixture keeps
            pass
    return session


def main() -> None:
    session = small_session()
    old = old_record_module()
    old.Session(calls=session.calls, jax_version=session.jax_version,
                python_version=session.python_version).save(os.path.join(HERE, "session_v1.json"))
    session.save(os.path.join(HERE, "session_v1.as_v2.json"))


if __name__ == "__main__":
    main()
