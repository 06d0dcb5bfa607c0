"""Drop-in JAX transformations that record every trace step.

    import transforms as T
    with T.record() as session:
        T.vmap(T.grad(loss))(params, batch)
    session.save("trace.json")

Outside a `record()` block the transforms are exactly `jax.*` and record nothing.

The record classes, `load` and `SessionLoadError` import no JAX: the wrappers, `record` and
`growth` are imported at first use, so reading a dump (`workbench show`) never pays for JAX.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import _old_homes
from .model import (
    PUBLIC_KINDS,
    SCHEMA_VERSION as SCHEMA_VERSION,
    Call as Call,
    ErrorRecord as ErrorRecord,
    JaxprRecord as JaxprRecord,
    Level as Level,
    NonFiniteFound as NonFiniteFound,
    NothingRecordedWarning as NothingRecordedWarning,
    Session as Session,
    SessionLoadError as SessionLoadError,
    SourceLocation as SourceLocation,
    Step as Step,
    ValueRecord as ValueRecord,
    load as load,
)

# The modules folded into transforms.model (transforms.dump, .diff, ...) still import.
_old_homes.install(__name__)

# The names that need JAX, and the private package defining each.
_LAZY = {**dict.fromkeys(PUBLIC_KINDS, "_wrappers"), "record": "_recording", "growth": "_stages",
         "set_user_code": "_capture", "process_info": "_devices"}

if TYPE_CHECKING:
    from ._capture import set_user_code as set_user_code
    from ._devices import process_info as process_info
    from ._recording import record as record
    from ._stages import growth as growth
    from ._wrappers import (
        grad as grad,
        hessian as hessian,
        jacfwd as jacfwd,
        jacrev as jacrev,
        jit as jit,
        jvp as jvp,
        linearize as linearize,
        value_and_grad as value_and_grad,
        vjp as vjp,
        vmap as vmap,
    )


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        old = _old_homes.old_home(__name__, name)
        if old is not None:  # `import transforms.dump`, then `transforms.dump.load`
            return old
        raise AttributeError(f"module 'transforms' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    *PUBLIC_KINDS, "record", "growth", "set_user_code", "process_info", "load", "Session", "Call",
    "Level", "Step", "ValueRecord", "JaxprRecord", "ErrorRecord", "SourceLocation",
    "SessionLoadError", "SCHEMA_VERSION", "NonFiniteFound", "NothingRecordedWarning",
]
