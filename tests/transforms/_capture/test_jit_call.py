"""The JitCall a transforms.jit object's call goes through: the C core's where built from
these sources, else its Python twin (the twins' behaviour is compared call by call in
tests/transforms/test_jit_in_block_fast_path.py)."""
from __future__ import annotations

import contextvars

import jax.numpy as jnp
import pytest

import transforms
from transforms._capture import PyJitCall, _core_types, jit_call_class

needs_c = pytest.mark.skipif(jit_call_class() is PyJitCall, reason="the C core is not built")


def test_a_stale_or_refused_c_core_calls_through_the_python_twin(monkeypatch):
    monkeypatch.setattr(_core_types, "core_source_sha", lambda: "0" * 64)
    assert jit_call_class() is PyJitCall
    monkeypatch.undo()
    monkeypatch.setenv("WORKBENCH_CORE", "python")
    assert jit_call_class() is PyJitCall
    f = transforms.jit(lambda x: x * 3)
    assert isinstance(f, PyJitCall) and float(f(2.0)) == 6.0


@needs_c
def test_the_users_object_is_called_with_vectorcall_on_every_python():
    """Python 3.11 does not pass vectorcall on to a Python subclass: JitCall sets it."""
    f = transforms.jit(jnp.sin)
    py_tpflags_have_vectorcall = 1 << 11
    assert type(f).__flags__ & py_tpflags_have_vectorcall
    assert float(f(0.0)) == 0.0


@needs_c
def test_the_c_jit_call_says_what_is_wrong_with_its_arguments():
    call = jit_call_class()
    var: contextvars.ContextVar = contextvars.ContextVar("v", default=None)
    with pytest.raises(ValueError, match="hold one item"):
        call(print, object(), print, [], [None], var)
    with pytest.raises(TypeError):
        call(print, object(), print, [0], [None], "not a context variable")
    with pytest.raises(AttributeError):  # an unset member reads as an unset attribute
        _ = call.__new__(call)._jitted
