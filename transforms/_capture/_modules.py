"""The module a step ran in, read from the Python stack: Step.module (`NnxMLP/linear1`,
`CNN/layers[0]`).

flax nnx pushes no name scope, and equinox pushes its class's name (`eqx.nn.Linear`, the same
for every layer), so JAX's name stack cannot say which of a model's modules bound a step. The
stack can: while a module's method runs, its frame holds the module as `self`. A step's module
path is the chain of module instances on the stack, outermost first: the outermost's class
name, then each inner module's attribute name in the one calling it (`layers[0]`).

Only classes of registered module libraries count (MODULE_LIBRARIES, found in sys.modules:
never imported here); linen's modules are read from the name stack (Step.scope).

Cost: nothing is walked while no registered library is imported. A walk looks up each frame's
code object once (METHOD_CODES: may it be a module's method, its first argument `self` and
its file not JAX's or ours) and reads `self` only from those frames; a chain's path is made
once (weak references validate it). The C step core walks with the same tables and asks
`module_path` for a chain's path; nothing here outlives the step but those tables (no frame,
no module, no tracer: weak references only).
"""
from __future__ import annotations

import sys
import weakref
from collections.abc import Mapping, Sequence
from types import FrameType
from typing import Any

from .._common import BoundedCache
from ._locations import is_internal_file

__all__ = ["METHOD_CODES", "MODULE_LIBRARIES", "current_module_path", "is_method_code",
           "module_bases", "module_path"]

# (the module to find in sys.modules, its module base class's attribute)
MODULE_LIBRARIES: tuple[tuple[str, str], ...] = (("flax.nnx", "Module"), ("equinox", "Module"))
# A library's module classes it does not export are its machinery, not the user's model:
# equinox's filter_grad and filter_vmap return modules (_GradWrapper, _VmapWrapper) whose
# __call__ runs the user's, a module's method is a BoundMethod module holding it as
# `__self__`, an Enumeration's items are modules. Left out of paths.
_LIBRARY_PACKAGES = frozenset(name.split(".")[0] for name, _ in MODULE_LIBRARIES)

# Keyed by id(code), with the code kept to rule out a reused id: id(code) -> (code, may it be
# a module's method). Shared with the C step core.
METHOD_CODES: BoundedCache = BoundedCache(100_000)
_FIRST_ARGUMENT = "self"

_bases: list[Any] = [-1, ()]  # (the number of registered libraries imported, their bases)
_paths: BoundedCache = BoundedCache(10_000)  # chain's ids -> (weak refs, path)


def module_bases() -> tuple[type, ...]:
    """The module base classes of the registered libraries imported so far."""
    modules = sys.modules
    present = [modules[name] for name, _ in MODULE_LIBRARIES if name in modules]
    if len(present) == _bases[0]:
        return _bases[1]
    found = []
    for module, (_, attribute) in zip(present, (lib for lib in MODULE_LIBRARIES
                                                if lib[0] in modules)):
        base = getattr(module, attribute, None)  # None while the library is being imported
        if isinstance(base, type):
            found.append(base)
    # counted only once every base is there: a library half-imported is looked at again
    _bases[:] = [len(found), tuple(found)]
    return _bases[1]


def is_method_code(code: Any) -> bool:
    """Whether a frame of `code` may be a module's method (kept in METHOD_CODES): its first
    argument is `self` and its file is not JAX's, ours or Python's own."""
    method = (code.co_argcount >= 1 and code.co_varnames[0] == _FIRST_ARGUMENT
              and not is_internal_file(code.co_filename))
    METHOD_CODES.put(id(code), (code, method))
    return method


def current_module_path() -> str:
    """The module path of the current stack (the Python step core's walk; the C core walks
    the same way): "" with no module on it."""
    bases = module_bases()
    if not bases:
        return ""
    chain: list[Any] = []  # innermost first
    frame: FrameType | None = sys._getframe(1)
    known = METHOD_CODES
    while frame is not None:
        code = frame.f_code
        hit = known.get(id(code))
        if hit[1] if hit is not None and hit[0] is code else is_method_code(code):
            obj = frame.f_locals.get(_FIRST_ARGUMENT)
            if isinstance(obj, bases) and (not chain or chain[-1] is not obj):
                chain.append(obj)
        frame = frame.f_back
    return module_path(tuple(chain)) if chain else ""


def module_path(chain: tuple) -> str:
    """The path of a chain of module instances, innermost first: `NnxMLP/linear1`; "" when
    they are all a library's machinery."""
    key = tuple(map(id, chain))
    hit = _paths.get(key)
    if hit is not None and all(ref() is obj for ref, obj in zip(hit[0], chain)):
        return hit[1]
    path = _path_of(_users_modules(chain[::-1]))
    try:
        refs = tuple(map(weakref.ref, chain))
    except TypeError:  # a module class without weak references: its path made each time
        return path
    _paths.put(key, (refs, path))
    return path


def _users_modules(chain: tuple) -> tuple:
    """The chain without a library's private modules, one module's methods calling each
    other still one entry."""
    kept: list[Any] = []
    for module in chain:
        if not _machinery(type(module)) and (not kept or kept[-1] is not module):
            kept.append(module)
    return tuple(kept)


def _machinery(cls: type) -> bool:
    """A registered library's class it does not export where its users import from: the
    module path up to its first private part (`equinox.nn` for equinox.nn._linear.Linear,
    exported; `equinox` for equinox._module._prebuilt.BoundMethod, not)."""
    parts = cls.__module__.split(".")
    if parts[0] not in _LIBRARY_PACKAGES:
        return False
    if cls.__name__.startswith("_"):
        return True
    public = []
    for part in parts:
        if part.startswith("_"):
            break
        public.append(part)
    return getattr(sys.modules.get(".".join(public)), cls.__name__, None) is not cls


def _path_of(outermost_first: tuple) -> str:
    if not outermost_first:
        return ""
    parts = [type(outermost_first[0]).__name__]
    for parent, child in zip(outermost_first, outermost_first[1:]):
        parts.append(_attribute_name(parent, child) or type(child).__name__)
    return "/".join(parts)


def _attribute_name(parent: Any, child: Any) -> str | None:
    """Where `parent` holds `child`: `linear1`, `layers[0]`, `blocks['a']`; None when it does
    not (a module handed to a method as an argument)."""
    try:
        attributes = object.__getattribute__(parent, "__dict__")
    except AttributeError:  # a class with __slots__ only: no attribute to name it by
        return None
    for name, value in attributes.items():
        found = _held_at(value, child, 2)
        if found is not None:
            return f"{name}{found}"
    return None


def _held_at(value: Any, child: Any, depth: int) -> str | None:
    """"" when value is child, `[i]` / `['key']` when a container in it holds child."""
    if value is child:
        return ""
    if depth == 0:
        return None
    if type(value) in (list, tuple) or _module_container(value, Sequence):
        items: Any = enumerate(value)
    elif type(value) is dict or _module_container(value, Mapping):
        items = value.items()
    else:
        return None
    for key, item in items:
        found = _held_at(item, child, depth - 1)
        if found is not None:
            return f"[{key!r}]{found}"
    return None


def _module_container(value: Any, kind: type) -> bool:
    """A library's module that is a list or dict of modules (nnx.List, nnx.Dict)."""
    return isinstance(value, kind) and isinstance(value, _bases[1]) \
        and not isinstance(value, (str, bytes))
