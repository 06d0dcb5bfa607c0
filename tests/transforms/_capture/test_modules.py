"""Step.module: the module path read from the stack (transforms/_capture/_modules.py) for flax
nnx and equinox models: the outermost module's class, then each module's attribute in its
caller; a library's machinery left out; nothing of the model kept past its step."""
from __future__ import annotations

import gc
import subprocess
import sys
import weakref

import jax
import jax.numpy as jnp
import pytest

import transforms as T
from transforms._capture import _modules

nnx = pytest.importorskip("flax.nnx")
eqx = pytest.importorskip("equinox")


class Head(nnx.Module):
    def __init__(self, rngs):
        self.out = nnx.Linear(4, 1, rngs=rngs)

    def __call__(self, x):
        return self.out(x)


class Net(nnx.Module):
    def __init__(self, rngs):
        self.encoder = nnx.Linear(2, 4, rngs=rngs)
        self.blocks = nnx.List([nnx.Linear(4, 4, rngs=rngs) for _ in range(2)])
        self.heads = nnx.Dict({"main": Head(rngs)})

    def __call__(self, x, scale):
        x = self._encode(x)  # a module's method calling its own: one entry
        for block in self.blocks:
            x = jnp.tanh(block(x))
        return scale(self.heads["main"](x))

    def _encode(self, x):
        return self.encoder(x)


class Scale(nnx.Module):  # handed to Net as an argument, not one of its attributes
    def __call__(self, x):
        return x * 2.0


def _modules_of(call) -> list[str]:
    seen: list[str] = []
    for step in call.steps:
        if step.module not in seen:
            seen.append(step.module)
    return seen


def test_an_nnx_models_steps_name_its_modules_by_attribute():
    net = Net(nnx.Rngs(0))
    with T.record() as session:
        T.grad(lambda m: jnp.sum(m(jnp.ones((3, 2)), Scale())))(net)
    # "" the loss's ones; tanh in Net between its blocks; Scale by its class (an argument)
    assert _modules_of(session.calls[0]) == [
        "", "Net/encoder", "Net/blocks[0]", "Net", "Net/blocks[1]", "Net/heads['main']/out",
        "Net/Scale"]


def test_a_path_is_made_once_per_chain_and_keeps_no_module_alive():
    net = Net(nnx.Rngs(0))
    chain = (net.blocks[1], net)
    assert _modules.module_path(chain) == "Net/blocks[1]"
    assert _modules.module_path(chain) is _modules.module_path(chain)  # from the cache
    ref = weakref.ref(net)
    del net, chain
    gc.collect()
    assert ref() is None


def test_equinox_wrappers_and_bound_methods_are_left_out():
    mlp = eqx.nn.MLP(3, 1, 4, 1, key=jax.random.key(0))
    x = jnp.ones((2, 3))
    with T.record() as session:
        eqx.filter_grad(lambda m: jnp.sum(T.vmap(m)(x)))(mlp)  # m a _GradWrapper's argument
    assert _modules_of(session.calls[0]) == ["MLP/layers[0]", "MLP", "MLP/layers[1]"]
    assert _modules._machinery(type(eqx.filter_grad(lambda m: 0.0)))
    assert not _modules._machinery(eqx.nn.Linear) and not _modules._machinery(nnx.Linear)


def test_recording_a_model_leaks_no_tracer():
    net = Net(nnx.Rngs(0))
    with jax.checking_leaks(), T.record() as session:
        T.jit(T.value_and_grad(lambda m: jnp.sum(m(jnp.ones((3, 2)), Scale()))))(net)
    assert "Net/blocks[0]" in _modules_of(session.calls[0])


def test_a_program_without_a_module_library_walks_no_frame():
    script = """
import sys
import jax.numpy as jnp
import transforms as T
from transforms._capture import _modules
with T.record() as session:
    T.grad(lambda x: jnp.sum(jnp.sin(x)))(jnp.ones(3))
assert not any(m in sys.modules for m in ("flax.nnx", "equinox")), sorted(sys.modules)
assert _modules.module_bases() == () and len(_modules.METHOD_CODES) == 0
assert {s.module for s in session.calls[0].steps} == {""}
"""
    subprocess.run([sys.executable, "-c", script], check=True)
