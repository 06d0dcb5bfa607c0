"""Seed 000, "JAX return types after transformations": a namedtuple container as a pytree."""
from __future__ import annotations

import traceback
from collections import namedtuple

import jax
import jax.numpy as jnp

import transforms as T

from ._registry import example, expect_failure


def test_func(container):
    if container.flag == 0:
        return container.array.sum()
    return container.array.prod()


test_func.__test__ = False  # type: ignore[attr-defined]  # the seed's name; not a pytest test


def _container(NTContainer):
    return NTContainer(
        name='composite-container',
        flag=0,
        array=jnp.reshape(jnp.arange(6, dtype='f4'), (3, 2)),
    )


def unpack_NTC(c):
    active, passive = (c.array,), (c.name, c.flag)
    return active, passive


@example("NTContainer: the seed's repack_NTC, broken", "000", shows_failure=True)
def ntcontainer_broken():
    """The seed registers NTContainer with an unflatten function that builds the container
    from `value`, a name defined nowhere (the argument is `array`). JAX only calls unflatten
    when it rebuilds a container, so registration succeeds and every transformation then fails
    with NameError, raised from the user's repack_NTC: the recording keeps the failing calls,
    and the diagnosis below names the file and line."""
    # A fresh class per run: registrations are global and cannot be undone.
    NTContainer = namedtuple('NTContainer', ['name', 'flag', 'array'])

    def repack_NTC(passive, active):
        (name, flag), (array,) = passive, active
        return NTContainer(name, flag, value)

    jax.tree_util.register_pytree_node(NTContainer, unpack_NTC, repack_NTC)
    container = _container(NTContainer)
    for transform in (T.jit, T.vmap, T.grad):
        with expect_failure(NameError) as failed:
            transform(test_func)(container)
    assert failed.error is not None
    where = traceback.extract_tb(failed.error.__traceback__)[-1]
    print(f"diagnosis: {where.name} at {where.filename}:{where.lineno} names `value`, "
          f"which is not defined; it should use `array`")


@example("NTContainer: the gradient is a container too", "000")
def ntcontainer_fixed():
    """With repack_NTC fixed, jit and vmap return arrays, and grad returns an NTContainer:
    grad re-bundles the per-component gradients in the same structure as the input, with the
    static members (name, flag) carried through as aux data and the array's gradient (all
    ones) in place of the array."""
    NTContainer = namedtuple('NTContainer', ['name', 'flag', 'array'])

    def repack_NTC(passive, active):
        (name, flag), (array,) = passive, active
        return NTContainer(name, flag, array)

    jax.tree_util.register_pytree_node(NTContainer, unpack_NTC, repack_NTC)
    container = _container(NTContainer)
    print(T.jit(test_func)(container))
    print(T.vmap(test_func)(container))
    print(T.grad(test_func)(container))
