"""Builds the C step core (the sources listed in transforms/_capture/_core_sources.py) as an
optional extension: without a compiler the package installs and records with the Python step
core (transforms/_capture/_step_core.py). The build is stamped with the sha256 of all its
sources and header, so a build from older sources is recognised and not used. Everything
else about the package is in pyproject.toml."""
import hashlib
import os
import runpy

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
# NB: read as a file: the package cannot be imported before it is installed.
CORE = runpy.run_path(os.path.join(HERE, "transforms", "_capture", "_core_sources.py"))
SHA = CORE["source_stamp"](HERE, hashlib.sha256)

setup(ext_modules=[Extension(
    "transforms._capture._core", list(CORE["SOURCES"]), depends=[CORE["HEADER"]], optional=True,
    define_macros=[("CORE_SOURCE_SHA", f'"{SHA}"')],
    extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter",
                        "-Wno-missing-field-initializers", "-Wno-cast-function-type"],
)])
