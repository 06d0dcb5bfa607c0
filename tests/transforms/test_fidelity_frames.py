"""Recording changes nothing JAX does (issue 12), continued: the stack depth and tracebacks the
user sees, no reference cycles, and nothing of the user's program kept (see test_fidelity.py).
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import inspect
import traceback
import weakref
from array import array

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transforms as T
from transforms.model import Lazy

# --- 4. stack depth and tracebacks ----------------------------------------------------

def _depth_inside(build, args):
    """How many frames are on the stack under the caller when the user's function runs."""
    start = len(inspect.stack())
    seen = []

    def probe(x):
        seen.append(len(inspect.stack()) - start)
        return x

    build(probe)(*args)
    return seen[0]


DEPTH_CASES = {
    "grad": (lambda M: M.grad, (1.0,)),
    "value_and_grad": (lambda M: M.value_and_grad, (1.0,)),
    "vmap": (lambda M: M.vmap, (np.arange(3.0),)),
    "jit": (lambda M: M.jit, (1.0,)),
    "jacfwd": (lambda M: M.jacfwd, (1.0,)),
    "jacrev": (lambda M: M.jacrev, (1.0,)),
    "hessian": (lambda M: M.hessian, (1.0,)),
    "jvp": (lambda M: (lambda f: lambda x: M.jvp(f, (x,), (x,))), (1.0,)),
    "vjp": (lambda M: (lambda f: lambda x: M.vjp(f, x)), (1.0,)),
    "linearize": (lambda M: (lambda f: lambda x: M.linearize(f, x)), (1.0,)),
    "vmap_grad": (lambda M: (lambda f: M.vmap(M.grad(f))), (np.arange(3.0),)),
}


@pytest.mark.parametrize("name", sorted(DEPTH_CASES))
def test_stack_depth_outside_record_is_jaxs(name):
    """JAX's TracebackTest counts the frames between a call and the user's function."""
    make, args = DEPTH_CASES[name]
    assert _depth_inside(make(T), args) == _depth_inside(make(jax), args)


def _frames_of_ours_while_user_code_runs() -> int:
    """Frames the Bracket itself adds: none in C, its __call__ in the Python twin."""
    from transforms._common import PyBracket, bracket
    return 1 if isinstance(bracket(lambda a, k: None, len), PyBracket) else 0


# The Brackets a case's user function runs under: its calls' and its levels'.
_BRACKETS = {"vmap_grad": 4}


@pytest.mark.parametrize("name", sorted(DEPTH_CASES))
def test_stack_depth_inside_record_is_jaxs(name):
    """JAX's TracebackTest inside record(): the user's function sees JAX's stack depth (with
    the Python twin of the C core, one frame per Bracket it runs under)."""
    make, args = DEPTH_CASES[name]
    with T.record() as session:
        ours = _depth_inside(make(T), args)
    assert session.calls
    extra = _frames_of_ours_while_user_code_runs() * _BRACKETS.get(name, 2)
    assert ours == _depth_inside(make(jax), args) + extra


def _custom_rule_depths(M, ctx) -> dict:
    """Stack depths inside a custom_vjp's fwd and bwd and a custom_jvp's rule under grad."""
    depths: dict = {}

    @jax.custom_vjp
    def f(x):
        return x

    def f_fwd(x):
        depths.setdefault("fwd", len(inspect.stack()))
        return x, None

    def f_bwd(_, g):
        depths.setdefault("bwd", len(inspect.stack()))
        return (g,)
    f.defvjp(f_fwd, f_bwd)

    @jax.custom_jvp
    def h(x):
        return x

    @h.defjvp
    def h_jvp(primals, tangents):
        depths.setdefault("jvp", len(inspect.stack()))
        return primals[0], tangents[0]

    with ctx:
        M.grad(f)(1.0)
        M.grad(h)(1.0)
    return depths


def test_custom_rules_see_jaxs_stack_depth_inside_record():
    """JAX's test_custom_vjp_traceback, and a custom_jvp rule, inside record()."""
    ours = _custom_rule_depths(T, T.record())
    theirs = _custom_rule_depths(jax, contextlib.nullcontext())
    extra = _frames_of_ours_while_user_code_runs()
    # the grad call's Brackets, then the custom call's and the rule body's
    assert ours == {"fwd": theirs["fwd"] + 4 * extra, "bwd": theirs["bwd"] + 2 * extra,
                    "jvp": theirs["jvp"] + 4 * extra}


def _fails(x):
    raise ValueError("user code failed")


@pytest.mark.parametrize("name", sorted(DEPTH_CASES))
def test_tracebacks_are_jaxs_frame_for_frame(name, recording):
    """What the user sees of a failure: JAX's filtered frames, none of ours (nor more of JAX's)."""
    make, args = DEPTH_CASES[name]

    def frames(M):
        with pytest.raises(ValueError) as info:
            make(M)(_fails)(*args)
        tb = traceback.extract_tb(info.value.__traceback__)
        return [(f.filename, f.name) for f in tb if f.filename != __file__]
    assert frames(T) == frames(jax)


# --- 5. no cycles, nothing of the user's program kept ------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name", ["linearize", "jit", "grad", "vjp", "vmap_grad"])
def test_no_reference_cycle_through_our_objects(name):
    """core_test's test_reference_cycles, for each transformation, outside and inside record()."""
    def f(x):
        return x.sum()

    make = {
        "linearize": lambda: functools.partial(T.linearize, f),
        "vjp": lambda: functools.partial(T.vjp, f),
        "jit": lambda: T.jit(f),
        "grad": lambda: T.grad(f),
        "vmap_grad": lambda: T.vmap(T.grad(f)),
    }[name]
    params = jnp.zeros([3]) if name == "vmap_grad" else jnp.zeros([])
    for ctx in (contextlib.nullcontext(), T.record()):
        gc.collect()
        debug = gc.get_debug()
        try:
            with ctx:
                out = make()(params)
                del out
            gc.set_debug(gc.DEBUG_SAVEALL)
            assert gc.collect() == 0, [type(o) for o in gc.garbage][:20]
        finally:
            gc.set_debug(debug)
            gc.garbage.clear()


_PLAIN = (str, int, float, bool, type(None), bytes, array)  # array: steps as rows of numbers


def _plain_data(value, path="session"):
    """Every value in a session is a record, a tuple/list/dict of them, or a plain scalar."""
    if isinstance(value, _PLAIN):
        return
    if dataclasses.is_dataclass(value) and type(value).__module__.startswith("transforms.model."):
        for field in dataclasses.fields(value):
            _plain_data(getattr(value, field.name), f"{path}.{field.name}")
        return
    if isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            _plain_data(v, f"{path}[{i}]")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            _plain_data(k, f"{path} key")
            _plain_data(v, f"{path}[{k!r}]")
        return
    if isinstance(value, Lazy):  # steps made when first read: what it holds until then, then them
        if not value.decoded:
            _plain_data(value._decode.args, f"{path} (undecoded)")
        _plain_data(value.all(), path)
        return
    raise AssertionError(f"{path} holds a {type(value).__qualname__}: {value!r:.100}")


def test_after_a_block_a_session_holds_plain_data_and_nothing_of_the_program():
    def loss(w, x):
        return jnp.sum(jnp.tanh(w * x) ** 2)

    w, x = jnp.ones(3), jnp.arange(3.0)
    w_ref, loss_ref = weakref.ref(w), weakref.ref(loss)
    with T.record(stages=True) as session:
        T.jit(T.grad(loss))(w, x)
        T.vmap(T.grad(loss), in_axes=(None, 0))(w, jnp.stack([x, x]))
        _, lin = T.linearize(loss, w, x)
        lin(w, x)
    del lin, w, loss
    gc.collect()
    assert w_ref() is None and loss_ref() is None
    assert len(session.calls) == 4
    _plain_data(session)
