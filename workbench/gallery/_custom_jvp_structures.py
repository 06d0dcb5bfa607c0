"""Seed 002, "Different PyTree for Primal and Tangent space": a custom_jvp rule's mismatch."""
from __future__ import annotations

import typing

import jax
import jax.numpy as jnp

import transforms as T

from ._registry import example, expect_failure


class Primal(typing.NamedTuple):
    x: float


class Tangent(typing.NamedTuple):
    sign: bool
    norm: float

    def add(self, n):
        # some random equation
        return Tangent(n > 0, self.norm + jnp.abs(n))


@jax.custom_jvp
def init(dummy) -> Primal:
    return Primal(0.)


@init.defjvp
def init_jvp(primals, tangents):
    return Primal(0.), Tangent(0., 0.)


@jax.custom_jvp
def add(p: Primal, n: float) -> Primal:
    return Primal(p.x + n)


@add.defjvp
def add_jvp(primals, tangents):
    p, n = primals
    t, n_dot = tangents  # wrong of course: t is a Primal
    return add(p, n), t.add(n_dot)


def program(d):
    return add(init(d), d).x


@jax.custom_jvp
def init_same(dummy) -> Primal:
    return Primal(0.)


@init_same.defjvp
def init_same_jvp(primals, tangents):
    return Primal(0.), Primal(0.)


@jax.custom_jvp
def add_same(p: Primal, n: float) -> Primal:
    return Primal(p.x + n)


@add_same.defjvp
def add_same_jvp(primals, tangents):
    p, n = primals
    t, n_dot = tangents
    return add_same(p, n), Primal(t.x + n_dot)


def program_same(d):
    return add_same(init_same(d), d).x


@example("custom_jvp: a Tangent tree that differs from the Primal tree", "002",
         shows_failure=True)
def primal_tangent_mismatch():
    """The rule init_jvp returns a Primal as its primal output and a Tangent as its tangent
    output. JAX requires both to have the same container structure, so differentiating fails
    with TypeError naming both PyTreeDefs (Primal has one child, Tangent two). Without
    differentiation the rules never run, so jit of the same program works; and rules whose
    tangent is a Primal too are accepted."""
    print(T.jit(program)(1.0))  # no differentiation: the JVP rules never run
    with expect_failure(TypeError):
        T.grad(program)(1.0)
    with expect_failure(TypeError):
        T.jvp(program, (1.0,), (1.0,))
    print(T.grad(program_same)(1.0))  # tangents with the primal's structure
