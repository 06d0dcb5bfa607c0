"""The Bracket (issue 40): the C one and its Python twin behave the same, and the C one adds
no frame while its target runs."""
from __future__ import annotations

import functools
import gc
import inspect
import traceback
import weakref

import pytest

from transforms._capture._core import Bracket as CBracket
from transforms._common import PyBracket

KINDS = {"C": CBracket, "Python": PyBracket}


def _log_open(log, result=None):
    def open_(args, kwargs):
        log.append(("open", args, kwargs))
        return result(args, kwargs) if result is not None else None
    return open_


@pytest.fixture(params=sorted(KINDS))
def Bracket(request):
    return KINDS[request.param]


def test_open_returning_none_calls_fun_with_the_callers_arguments(Bracket):
    log: list = []
    b = Bracket(_log_open(log), lambda x, y=1: (x, y))
    assert b(3, y=4) == (3, 4)
    assert b(5) == (5, 1)
    assert log == [("open", (3,), {"y": 4}), ("open", (5,), None)]


def test_the_run_names_target_arguments_and_what_the_caller_gets(Bracket):
    log: list = []

    def run(args, kwargs):
        return (lambda *a, **k: (a, k), (10, *args), {"z": 1},
                lambda out: ("returned", out), lambda e: log.append(e))
    b = Bracket(_log_open(log, run), None)
    assert b(2) == ("returned", ((10, 2), {"z": 1}))
    assert b(2) == ("returned", ((10, 2), {"z": 1}))


def test_raised_sees_the_error_which_is_raised_on_with_the_hooks_traceback(Bracket):
    seen: list = []

    def fails():
        raise ValueError("user code")

    def raised(e):
        seen.append(e)
        e.add_note("seen by the hook")
    b = Bracket(lambda a, k: (fails, (), None, lambda out: out, raised), None)
    with pytest.raises(ValueError, match="user code") as info:
        b()
    assert seen == [info.value]
    assert info.value.__notes__ == ["seen by the hook"]
    assert traceback.extract_tb(info.value.__traceback__)[-1].name == "fails"


def test_a_failing_hook_raises_its_error_with_the_calls_as_context(Bracket):
    def fails():
        raise ValueError("user code")

    def raised(e):
        raise RuntimeError("hook")
    b = Bracket(lambda a, k: (fails, (), None, lambda out: out, raised), None)
    with pytest.raises(RuntimeError, match="hook") as info:
        b()
    assert isinstance(info.value.__context__, ValueError)


def test_a_bad_run_is_a_type_error():
    b = CBracket(lambda a, k: (len, [1], None, None, None), None)
    with pytest.raises(TypeError, match="args must be a tuple"):
        b()
    with pytest.raises(TypeError, match="None or"):
        CBracket(lambda a, k: 3, None)()


def test_wraps_signature_and_weak_references_as_a_function(Bracket):
    def f(x, y=2):
        """doc"""
        return x
    b = functools.update_wrapper(Bracket(lambda a, k: None, f), f)
    assert (b.__name__, b.__doc__, b.__wrapped__) == ("f", "doc", f)
    assert str(inspect.signature(b)) == "(x, y=2)"
    ref = weakref.ref(b)
    del b
    gc.collect()
    assert ref() is None


def test_the_c_bracket_adds_no_frame_while_its_target_runs():
    depths = []

    def probe():
        depths.append(len(inspect.stack()))
    probe()
    CBracket(lambda a, k: (probe, (), None, lambda out: out, lambda e: None), None)()
    PyBracket(lambda a, k: (probe, (), None, lambda out: out, lambda e: None), None)()
    assert depths[1] == depths[0]  # called from here, as if directly
    assert depths[2] == depths[0] + 1  # the twin's __call__
