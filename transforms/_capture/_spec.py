"""What one of our wrappers was built from: its kind, its function, its options as data.

Read by the recorder (a call's trees, its shardings), by stage capture (to rebuild the
pipeline) and by the wrappers themselves. Imports nothing of ours but the kinds and what
tells user code from a library's (`_locations`, for the names of functions).
"""
from __future__ import annotations

import functools
import operator
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from .._common import safe_repr
from ..model import TransformKind, kind_of
from ._locations import library_closure_of

__all__ = ["Options", "TransformSpec", "Wrapper", "chain_of", "function_name", "spec_of"]


class Options:
    """A transformation's options, kept as the live values the wrapper was given.

    `values` are the options a call records (`pairs`: name and repr text, made once
    here, for the records and their readers); `given` is every keyword handed to
    jax.<kind>, which stage capture hands it again. Nothing parses the text back.
    Equal and hashed by the text: options key JAX-entry and stage caches.
    """
    __slots__ = ("values", "given", "pairs")

    def __init__(self, values: Mapping[str, Any] | None = None,
                 given: Mapping[str, Any] | None = None):
        self.values: dict[str, Any] = dict(values or {})
        self.given: dict[str, Any] = dict(given) if given is not None else self.values
        self.pairs: tuple[tuple[str, str], ...] = tuple(
            (k, safe_repr(v, None)) for k, v in self.values.items())

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    @property
    def has_aux(self) -> bool:
        try:
            return bool(self.values.get("has_aux", False))
        except Exception:  # a user object whose truth raises: JAX refuses it itself
            return False

    @property
    def argnums(self) -> Any:
        """argnums as JAX reads it: an int (any integer type), or a tuple or list of them."""
        argnums = self.values.get("argnums", 0)
        if isinstance(argnums, (tuple, list)):
            return argnums
        try:
            return operator.index(argnums)
        except TypeError:
            return argnums

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Options) and other.pairs == self.pairs

    def __hash__(self) -> int:
        return hash(self.pairs)

    def __repr__(self) -> str:
        return f"Options({dict(self.pairs)!r})"


@dataclass(frozen=True, eq=False)
class TransformSpec:
    """What a wrapper was built from: read by stage capture to rebuild the pipeline."""
    kind: str
    fun: Callable                 # the user's function (possibly another wrapper)
    transformed: Callable         # jax.<kind>(fun, ...) as built, callable on the call's args
    options: Options

    @property
    def name(self) -> str:
        return function_name(self.fun)

    @property
    def entry(self) -> TransformKind:
        return kind_of(self.kind)


def spec_of(f: Any) -> TransformSpec | None:
    """The TransformSpec of one of our wrappers (or of a jit built on one), else None."""
    spec = getattr(f, "__transform_spec__", None)
    if spec is None:
        spec = getattr(getattr(f, "__wrapped__", None), "__transform_spec__", None)
    return spec


def chain_of(spec: TransformSpec) -> list[TransformSpec]:
    """The wrappers of a call, outermost first: vmap(grad(f)) -> [vmap, grad]."""
    chain = [spec]
    while len(chain) < 64:
        inner = spec_of(chain[-1].fun)
        if inner is None:
            break
        chain.append(inner)
    return chain


class Wrapper:
    """Base of the objects our wrappers return for a user's function (`transforms.grad(f)`).

    Like the function `jax.grad(f)` returns, one has f's signature: `inspect.signature`
    follows its `__wrapped__` to f.
    """
    __wrapped__: Any


def function_name(fun: Any) -> str:
    """The function's name as its author wrote it: a functools.partial is named for the
    function it fixes arguments of (numpyro's `partial(potential_energy, model, ...)`), a
    library's closure for the user's function it stands for (equinox's
    filter_value_and_grad(loss) differentiates its `fun_value_and_grad`: `loss`)."""
    for _ in range(16):  # a partial of a partial ...
        if isinstance(fun, functools.partial):
            fun = fun.func
            continue
        wrapped = library_closure_of(fun)
        if wrapped is None:
            break
        fun = wrapped
    name = getattr(fun, "__qualname__", None) or getattr(fun, "__name__", None)
    return name if isinstance(name, str) else type(fun).__name__
