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

from .dump import SessionLoadError as SessionLoadError
from .dump import load as load
from .kinds import PUBLIC_KINDS
from .model import SCHEMA_VERSION as SCHEMA_VERSION
from .model import Call as Call
from .model import ErrorRecord as ErrorRecord
from .model import JaxprRecord as JaxprRecord
from .model import Level as Level
from .model import Session as Session
from .model import SourceLocation as SourceLocation
from .model import Step as Step
from .model import ValueRecord as ValueRecord

# `transforms.record` is the record() function (found by __getattr__ below); the submodule of
# that name is the model's old home, kept for old imports. Loaded now (which binds the name to
# the module, undone here), a later `import transforms.record` finds it in sys.modules and
# rebinds nothing.
importlib.import_module(f"{__name__}.record")
globals().pop("record", None)

# The names that need JAX, and the private module defining each.
_LAZY = {**dict.fromkeys(PUBLIC_KINDS, "_api"), "record": "_recorder", "growth": "_stages",
         "set_user_code": "_snapshot"}

if TYPE_CHECKING:
    from ._api import grad as grad
    from ._api import hessian as hessian
    from ._api import jacfwd as jacfwd
    from ._api import jacrev as jacrev
    from ._api import jit as jit
    from ._api import jvp as jvp
    from ._api import linearize as linearize
    from ._api import value_and_grad as value_and_grad
    from ._api import vjp as vjp
    from ._api import vmap as vmap
    from ._recorder import record as record
    from ._snapshot import set_user_code as set_user_code
    from ._stages import growth as growth


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'transforms' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    *PUBLIC_KINDS, "record", "growth", "set_user_code", "load", "Session", "Call", "Level", "Step",
    "ValueRecord", "JaxprRecord", "ErrorRecord", "SourceLocation", "SessionLoadError", "SCHEMA_VERSION",
]
