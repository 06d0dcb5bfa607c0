"""Where the record classes and load() lived before the model had a name of its own.

`transforms.record` is the record() function, so the model is `transforms.model` and reading
dumps is `transforms.dump`. `from transforms.record import Session, load` still works (each
name found here warns, with its new home); `import transforms.record` leaves
`transforms.record` the function.
"""
from __future__ import annotations

import warnings
from typing import Any

from . import dump, model


def _home(name: str) -> Any:
    for module in (model, dump):
        if not name.startswith("__") and hasattr(module, name):
            return module
    return None


def __getattr__(name: str) -> Any:
    module = _home(name)
    if module is None:
        raise AttributeError(f"module 'transforms.record' has no attribute {name!r} "
                             f"(the record classes are in transforms.model, load in "
                             f"transforms.dump)")
    warnings.warn(f"transforms.record.{name} is now {module.__name__}.{name} "
                  f"(transforms.record is the record() function)", DeprecationWarning,
                  stacklevel=2)
    return getattr(module, name)


def __dir__() -> list[str]:
    return sorted({n for m in (model, dump) for n in vars(m) if not n.startswith("_")})
