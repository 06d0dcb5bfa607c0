#!/usr/bin/env python3
"""Recording a flax nnx model (steps grouped by module path, Step.module) against plain JAX:

1. `jax.make_jaxpr` of `jit(value_and_grad(loss))` of an nnx MLP (8 nnx.Linear layers, width
   64, tanh; 4 as attributes and 4 in a list), a fresh loss each repetition so jit traces;
2. for comparison, the same program with no module (bench/_common's MLP) in the same process,
   flax imported: a program whose stack holds no module frame.

Each compares `with transforms.record(stages=False):` plus `transforms.jit` and
`transforms.value_and_grad` against `jax.*`; CPU time, interleaved, median ratio. For
information (no target): run it on two checkouts to see what recording module paths costs.

    .venv/bin/python bench/bench_modules.py [--reps N]
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from _common import header, interleaved, make_mlp, median  # noqa: E402
from flax import nnx  # noqa: E402

import transforms  # noqa: E402

WIDTH = 64


class Block(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.linear1 = nnx.Linear(WIDTH, WIDTH, rngs=rngs)
        self.linear2 = nnx.Linear(WIDTH, WIDTH, rngs=rngs)

    def __call__(self, x):
        return jnp.tanh(self.linear2(jnp.tanh(self.linear1(x))))


class NnxMLP(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.first = Block(rngs)
        self.second = Block(rngs)
        self.layers = nnx.List([nnx.Linear(WIDTH, WIDTH, rngs=rngs) for _ in range(4)]) \
            if hasattr(nnx, "List") else [nnx.Linear(WIDTH, WIDTH, rngs=rngs) for _ in range(4)]

    def __call__(self, x):
        h = self.second(self.first(x))
        for layer in self.layers:
            h = jnp.tanh(layer(h))
        return h


def traced(jit, value_and_grad, loss, *args):
    """make_jaxpr of jit(value_and_grad(a fresh copy of loss)): jit traces every time."""
    def fresh(*a):
        return loss(*a)
    return jax.make_jaxpr(jit(value_and_grad(fresh)))(*args)


def compare(name: str, loss, args: tuple, reps: int) -> float:
    def plain():
        traced(jax.jit, jax.value_and_grad, loss, *args)

    def recorded():
        with transforms.record(stages=False):
            traced(transforms.jit, transforms.value_and_grad, loss, *args)

    t = interleaved({"plain": plain, "recorded": recorded}, reps)
    p, r = median(t["plain"]), median(t["recorded"])
    print(f"  {name:34} plain {p * 1e3:8.1f} ms   recorded {r * 1e3:8.1f} ms   "
          f"ratio {r / p:.3f}")
    return r / p


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    header("bench_modules: jit(value_and_grad) traced, recorded against plain JAX")
    model = NnxMLP(nnx.Rngs(0))
    x, y = jnp.ones((16, WIDTH)), jnp.zeros((16, WIDTH))

    def nnx_loss(model, x, y):
        return jnp.mean((model(x) - y) ** 2)

    mlp_loss, params, xs, ys = make_mlp()
    compare("nnx MLP (module frames)", nnx_loss, (model, x, y), args.reps)
    compare("plain MLP (no module)", mlp_loss, (params, xs, ys), args.reps)


if __name__ == "__main__":
    main()
