"""Builds the C step core (transforms/_capture/_core.c) as an optional extension: without a compiler
the package installs and records with the Python step core (transforms/_capture/_step_core.py).
The build is stamped with the sha256 of _core.c, so a build from an older _core.c is
recognised and not used. Everything else about the package is in pyproject.toml."""
import hashlib
import os

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join("transforms", "_capture", "_core.c")

with open(os.path.join(HERE, SOURCE), "rb") as f:
    SHA = hashlib.sha256(f.read()).hexdigest()

setup(ext_modules=[Extension(
    "transforms._capture._core", [SOURCE], optional=True,
    define_macros=[("CORE_SOURCE_SHA", f'"{SHA}"')],
    extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter",
                        "-Wno-missing-field-initializers", "-Wno-cast-function-type"],
)])
