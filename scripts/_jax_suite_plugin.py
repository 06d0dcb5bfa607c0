"""pytest plugin for scripts/jax_suite.py: JAX's own tests with our transforms swapped in.

Loaded with `-p _jax_suite_plugin` (the script puts scripts/ on PYTHONPATH) and
configured by environment variables the script sets:

  JAX_SUITE_MODE     baseline (plain JAX) | plain (ours, outside record()) |
                     record (ours, each test inside transforms.record())
  JAX_SUITE_STAGES   "1": record(stages=True)
  JAX_SUITE_TESTS    the tests folder: only calls made from files under it get ours
  JAX_SUITE_RESULTS  where to write {nodeid: [outcome, first error line]} as JSON

The swap: `jax.grad` etc. (and the same names in `jax._src.api`, which JAX's
tests import as `api`) become dispatchers, installed before the test modules
import them. A dispatcher hands the call to `transforms.<name>` when its
caller's file is under the tests folder and to JAX's own function otherwise,
so JAX's internals (hessian calling jacfwd, check_grads calling jvp) stay
JAX's. No frame of a dispatcher is on the stack while the chosen function
runs (see _Dispatcher). Only `jax.*` is patched: our package calls JAX's
originals as it captured them at import (`transforms._jax.jax_own`).
"""
from __future__ import annotations

import json
import os
import sys
import types

import pytest

NAMES = ("grad", "value_and_grad", "vmap", "jit", "jvp", "vjp", "linearize",
         "jacfwd", "jacrev", "hessian")

_MODE = os.environ.get("JAX_SUITE_MODE", "baseline")
_TESTS = os.path.abspath(os.environ.get("JAX_SUITE_TESTS", os.getcwd())) + os.sep
_RESULTS: dict[str, list] = {}
_record_options = {"stages": os.environ.get("JAX_SUITE_STAGES") == "1"}


class _Dispatcher:
    """jax.<name> while the suite runs: ours for calls from the test files, JAX's otherwise.

    NB: `__call__` is a property, so the getter has returned before the chosen
    function runs: no frame of this file is on the stack (JAX's TracebackTest
    counts them), and `sys._getframe(1)` in the getter is the caller's frame.
    """

    def __init__(self, name: str, jax_fun, ours):
        self.__name__ = self.__qualname__ = name
        self.__doc__ = jax_fun.__doc__
        self.__wrapped__ = jax_fun
        self._jax, self._ours = jax_fun, ours

    @property
    def __call__(self):
        if sys._getframe(1).f_code.co_filename.startswith(_TESTS):
            return self._ours
        return self._jax

    def __get__(self, obj, objtype=None):
        # As a class attribute, jax.jit (a plain function) would bind: so does this.
        return self if obj is None else types.MethodType(self, obj)


def _install() -> None:
    import jax
    from jax._src import api

    import transforms
    from transforms import _jax

    # NB: only jax.* is patched. transforms calls JAX's own functions as they were when it
    # was imported (`_jax.jax_own`, captured here, before the swap), as
    # workbench/run/_runner.py relies on: no module of ours has its `jax` swapped.
    originals = {name: getattr(jax, name) for name in NAMES}
    assert all(getattr(_jax.jax_own, name) is fun for name, fun in originals.items())
    for name, original in originals.items():
        dispatcher = _Dispatcher(name, original, getattr(transforms, name))
        setattr(jax, name, dispatcher)
        if getattr(api, name, None) is original:
            setattr(api, name, dispatcher)


if _MODE in ("plain", "record"):
    _install()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    if _MODE != "record":
        yield
        return
    import transforms
    with transforms.record(**_record_options):
        yield


def _first_line(report) -> str:
    longrepr = report.longrepr
    if longrepr is None:
        return ""
    crash = getattr(longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(longrepr)
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:200]
    return ""


def pytest_runtest_logreport(report):
    nodeid = report.nodeid
    if report.when == "call" or report.failed:
        if report.passed:
            outcome = "passed"
        elif report.skipped:
            outcome = "skipped"
        else:
            outcome = "failed"
        if nodeid in _RESULTS and _RESULTS[nodeid][0] == "failed":
            return  # keep the first failure (a teardown error after a failed call)
        _RESULTS[nodeid] = [outcome, _first_line(report) if outcome == "failed" else ""]
    elif report.when == "setup" and report.skipped:
        _RESULTS[nodeid] = ["skipped", ""]


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("JAX_SUITE_RESULTS")
    if path:
        with open(path, "w") as f:
            json.dump(_RESULTS, f)
