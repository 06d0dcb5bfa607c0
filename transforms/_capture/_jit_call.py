"""Which JitCall the object transforms.jit returns calls through: the C core's
(`_core_jitcall.c`: no Python code runs to choose, so a cached call outside record() costs
what jax.jit(f)'s does), when it is built from these sources and not refused
(WORKBENCH_CORE=python), else PyJitCall, its twin with a property.

Both choose, at each call, what runs it: JAX's jitted object while no record() block is
open, or while the one block open has recorded every trace JAX can answer the call from
(the entry's `owner`); else the recording path (`in_block`)."""
from __future__ import annotations

import contextvars
from typing import Any, Callable

from ._core_types import core_type

__all__ = ["PyJitCall", "jit_call_class"]


class PyJitCall:
    """The C JitCall's behaviour in Python: `__call__` a property, so that the call itself is
    JAX's object's (no frame of ours while it runs)."""

    def __init__(self, jitted: Any, entry: Any, in_block: Callable, open_blocks: list,
                 only_block: list, single_block: contextvars.ContextVar):
        self._jitted, self._entry, self._in_block = jitted, entry, in_block
        self._open_blocks, self._only_block = open_blocks, only_block
        self._single_block = single_block

    @property
    def __call__(self) -> Callable:
        if not self._open_blocks[0]:
            return self._jitted
        # NB: only with one block open in this context (with several, which records depends
        # on the frames); with none here (the one block is open in another thread), nothing
        # records in this one.
        owner = self._entry.owner
        if self._only_block[0] == owner or self._single_block.get() == owner:
            return self._jitted
        return self._in_block

    def _call_target(self) -> Callable:
        """What a call now runs: JAX's jitted object, or the recording path."""
        return self.__call__


def jit_call_class() -> type:
    return core_type("JitCall", PyJitCall)
