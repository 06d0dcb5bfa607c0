"""JAX's classes the door hands out, the package's and JAX's folders, and our frames
registered as JAX's exclusions (so JAX's "created on line" texts and the tracebacks it filters
point at user code). Part of the door (transforms/_jax).
"""
from __future__ import annotations

import os

import jax
from jax import core as jax_core

# NB: jax._src: traceback filtering has no public registration; without it our
# wrapper frames would show in the tracebacks JAX filters for users.
from jax._src import traceback_util as _traceback_util
from jax.extend import core as jex_core, source_info_util

Trace = jax_core.Trace
Tracer = jax_core.Tracer
ClosedJaxpr = jex_core.ClosedJaxpr
Jaxpr = jex_core.Jaxpr
take_current_trace = jex_core.take_current_trace
set_current_trace = jex_core.set_current_trace

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # transforms/
JAX_DIR = os.path.dirname(os.path.abspath(jax.__file__))

# The exact package path (not a parent folder), so that JAX's "created on line"
# messages and jaxpr source info point at user code, not at our wrappers.
source_info_util.register_exclusion(PACKAGE_DIR + os.sep)
_traceback_util.register_exclusion(PACKAGE_DIR + os.sep)
