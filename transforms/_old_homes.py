"""The public modules that were folded into `transforms.model`: `transforms.dump`, `diff`,
`kinds` and `files`, and `transforms.record`, the model's first home (`transforms.record` is
the record() function). Old imports still work, `from transforms.dump import load` and
`import transforms.diff` alike: each old name is a module in sys.modules whose names warn
(DeprecationWarning, with the new home) and forward to `transforms.model`. No JAX."""
from __future__ import annotations

import sys
import types
import warnings
from typing import Any

from . import model

OLD_HOMES = ("record", "dump", "diff", "kinds", "files")


class _OldHome(types.ModuleType):
    """A former public module: every name it had is now `transforms.model`'s."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or not hasattr(model, name):
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r} "
                                 f"(its names are now in transforms.model)")
        warnings.warn(f"{self.__name__}.{name} is now transforms.model.{name}", DeprecationWarning,
                      stacklevel=2)
        return getattr(model, name)

    def __dir__(self) -> list[str]:
        return sorted(n for n in vars(model) if not n.startswith("_"))


def install(package: str) -> None:
    """Put the old modules in sys.modules, where `import package.dump` finds them."""
    for old in OLD_HOMES:
        name = f"{package}.{old}"
        sys.modules.setdefault(name, _OldHome(name, f"Moved to {package}.model."))


def old_home(package: str, name: str) -> types.ModuleType | None:
    """The old module `package.name` (not `record`, which is the record() function)."""
    return sys.modules.get(f"{package}.{name}") if name in OLD_HOMES[1:] else None
