"""The pre-trace check of custom pytree nodes: findings before JAX traces.

`check_inputs` runs before JAX traces: each custom node met in the inputs is
flattened and unflattened once, and the code of its flatten/unflatten
functions is searched for names that are not defined (seed 000's `repack_NTC`
returns `value`). Its findings are Diagnostics; failure rules (_diagnose.py)
read them when JAX raises. Nothing here changes what the user sees: exceptions
are JAX's own.
"""
from __future__ import annotations

import builtins
import dis
import sys
import types
from typing import Any, Callable

import jax
from jax import tree_util

from .._capture import location_of
from .._common import BoundedCache, first_line, safe_repr as safe_text
from .._jax import JAX_DIR, PACKAGE_DIR
from ..model import Diagnostic, SourceLocation
from ._pytrees import _LEAF_TYPES, _builtin_children, flatten_one, is_custom_node, qualified_name

__all__ = ["MAX_CHECKED_NODES", "check_inputs", "innermost_user_location",
           "non_array_argument_error"]

MAX_CHECKED_NODES = 200   # custom nodes checked per call (one per type is enough)
_MAX_CODE_DEPTH = 8       # nested code objects searched (lambdas, comprehensions)


def check_inputs(args: tuple, kwargs: dict, names: list[str],
                 raised: list[BaseException] | None = None) -> tuple[Diagnostic, ...]:
    """Round-trip each custom pytree node type met in the inputs once; never raises.

    `raised` collects the exceptions an unflatten raised in the round trip:
    JAX's own unflatten of the same node will raise them too.
    """
    try:
        treedef = tree_util.tree_structure((args, kwargs))
        if treedef in _plain_structures:
            return ()  # only lists, tuples, dicts and leaves: nothing to check
    except Exception:  # cyclic, too deep, a raising flatten, unhashable aux: walk it below
        treedef = None
    found: list[Diagnostic] = []
    checked: set[type] = set()
    roots = list(zip(names, args)) + [(str(k), v) for k, v in kwargs.items()]
    # An explicit stack: inputs may be deep or cyclic.
    stack = [(obj, name, 0) for name, obj in reversed(roots)]
    seen_ids: set[int] = set()
    visits = 0
    while stack and visits < 10_000:
        x, path, depth = stack.pop()
        visits += 1
        if isinstance(x, _LEAF_TYPES) or id(x) in seen_ids or depth > 100:
            continue
        builtin = _builtin_children(x)
        if builtin is not None:  # a plain container: nothing to check, no flatten needed
            seen_ids.add(id(x))
            stack.extend((child, path + key, depth + 1) for key, child in reversed(builtin))
            continue
        try:
            keyed, td = flatten_one(x)
        except Exception as e:
            if type(x) not in checked:
                checked.add(type(x))
                found.append(_flatten_failure(x, path, e))
            continue
        if td.num_nodes == 1 and td.num_leaves == 1:
            continue  # a leaf
        seen_ids.add(id(x))
        try:
            node_type, aux = td.node_data()
        except Exception:  # no node data: a None, or a future node kind
            node_type, aux = type(x), None
        if is_custom_node(node_type, aux) and node_type not in checked \
                and len(checked) < MAX_CHECKED_NODES:
            checked.add(node_type)
            found.extend(_check_node(x, path, node_type, aux, keyed, td, raised))
        for key_path, child in reversed(keyed):
            stack.append((child, path + _keystr(key_path), depth + 1))
    if treedef is not None and not found and not checked and not stack:
        _remember_plain(treedef)
    return tuple(found)


def non_array_argument_error(jit_again: Callable[[], Any], args: tuple,
                             kwargs: dict) -> BaseException | None:
    """JAX's own TypeError for a jit argument holding a leaf that is not an array, or None.

    `args` are what jit binds (static arguments are plain `object()` stand-ins).
    A leaf `jax.typeof` refuses (a function, a string: an equinox module's
    activation) makes jit raise before tracing; `jit_again()`, the same jitted
    function, is asked to trace these arguments, which raises that exception
    itself, word for word, before any user code runs.
    """
    try:
        leaves = tree_util.tree_leaves((args, kwargs))
    except Exception:  # JAX's flatten raises its own error: nothing to add here
        return None
    if not any(_refused_leaf(x) for x in leaves):
        return None
    try:
        jit_again().trace(*args, **kwargs)
    except TypeError as e:
        return e
    except Exception:  # another check of JAX's refused them: not this failure
        return None
    return None


def _refused_leaf(x: Any) -> bool:
    if isinstance(x, _LEAF_TYPES) or type(x) is object:  # arrays, scalars, static stand-ins
        return False
    try:
        jax.typeof(x)
    except TypeError:
        return True
    except Exception:
        return False
    return False


# Input structures with no custom node: the check has nothing to do for them.
_plain_structures: BoundedCache = BoundedCache(512)  # treedef -> True


def _remember_plain(treedef: Any) -> None:
    try:
        _plain_structures.put(treedef, True)
    except (TypeError, ValueError):  # unhashable aux data: checked every time
        return


def _keystr(key_path: tuple) -> str:
    try:
        return tree_util.keystr(tuple(key_path))
    except Exception:
        return "[?]"


class _CallCatcher:
    """Notes the first user-code frame entered while it is installed (sys.setprofile).

    NB: JAX calls a node's flatten/unflatten from C++, with no Python frame of
    its own in between: the first frame outside JAX and this package is the
    user's function, and its globals are the ones its names resolve in.
    """

    def __init__(self):
        self.code: types.CodeType | None = None
        self.globals: dict = {}
        self.builtins: dict = {}
        self.free: dict[str, bool] = {}
        self._prev: Any = None

    def __enter__(self):
        self._prev = sys.getprofile()
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc):
        sys.setprofile(self._prev)
        return False

    def _profile(self, frame, event, arg):
        if event != "call" or self.code is not None:
            return
        code = frame.f_code
        if code.co_filename.startswith((JAX_DIR, PACKAGE_DIR)):
            return
        self.code = code
        self.globals = frame.f_globals
        self.builtins = getattr(frame, "f_builtins", None) or vars(builtins)
        # Free variables bound at entry are in f_locals; an unbound cell is not.
        try:
            local_names = set(frame.f_locals)
        except Exception:
            local_names = set()
        self.free = {name: name in local_names for name in code.co_freevars}


def _check_node(x: Any, path: str, node_type: type, aux: Any, keyed: list,
                td: Any, raised: list[BaseException] | None = None) -> list[Diagnostic]:
    type_name = qualified_name(node_type)
    found: list[Diagnostic] = []
    try:
        hash(aux)
    except Exception as e:
        found.append(Diagnostic(
            "unhashable_aux",
            f"{type_name} at {path}: its aux data {safe_text(aux, 60)} is not hashable "
            f"({type(e).__name__}); jax.jit hashes aux data to cache traces. Return a tuple "
            "of hashable values as the static part of the flatten function.",
            type_name, path))
    children = [child for _, child in keyed]
    catcher = _CallCatcher()
    try:
        with catcher:
            rebuilt = td.unflatten(children)
    except Exception as e:
        found.extend(_unflatten_failure(catcher, type_name, path, e))
        if raised is not None:
            raised.append(e)
        return found
    undefined = _undefined_names(catcher)
    if undefined:
        found.append(_undefined_diagnostic(catcher, type_name, path, undefined, None))
    try:
        _, td2 = flatten_one(rebuilt)
        same = type(rebuilt) is type(x) and bool(td2 == td)
    except Exception as e:  # aux data whose == raises (arrays in aux)
        found.append(Diagnostic(
            "roundtrip", f"{type_name} at {path}: comparing the rebuilt node raised "
            f"{type(e).__name__}: {first_line(e)}", type_name, path, _function(catcher),
            _def_location(catcher)))
        return found
    if not same:
        found.append(Diagnostic(
            "roundtrip",
            f"{type_name} at {path}: unflatten(flatten(x)) is not the same structure: "
            f"{safe_text(td, 80)} became {safe_text(td2, 80)}"
            + ("" if type(rebuilt) is type(x) else
               f" (a {qualified_name(type(rebuilt))}, not a {type_name})"),
            type_name, path, _function(catcher), _def_location(catcher)))
    return found


def _flatten_failure(x: Any, path: str, error: BaseException) -> Diagnostic:
    type_name = qualified_name(type(x))
    source = innermost_user_location(error.__traceback__)
    return Diagnostic(
        "flatten_error",
        f"{type_name} at {path}: flattening raised {type(error).__name__}: {first_line(error)}",
        type_name, path, source.function if source else "", source)


def _unflatten_failure(catcher: _CallCatcher, type_name: str, path: str,
                       error: BaseException) -> list[Diagnostic]:
    undefined = _undefined_names(catcher)
    if undefined:
        return [_undefined_diagnostic(catcher, type_name, path, undefined, error)]
    source = innermost_user_location(error.__traceback__) or _def_location(catcher)
    return [Diagnostic(
        "unflatten_error",
        f"{type_name} at {path}: unflattening raised {type(error).__name__}: "
        f"{first_line(error)}", type_name, path, _function(catcher), source)]


def _undefined_diagnostic(catcher: _CallCatcher, type_name: str, path: str,
                          undefined: list[tuple[str, int]], error: BaseException | None
                          ) -> Diagnostic:
    code = catcher.code
    assert code is not None, "undefined names come from a caught code object"
    name, line = undefined[0]
    quoted = ", ".join(f"`{n}`" for n, _ in undefined)
    what = "the name" if len(undefined) == 1 else "the names"
    raised = f" (the round trip raised {type(error).__name__}: {first_line(error)})" \
        if error is not None else ""
    return Diagnostic(
        "undefined_name",
        f"{code.co_name} ({code.co_filename}:{line}), the unflatten function of {type_name}, "
        f"uses {what} {quoted}, which is not defined{raised}.",
        type_name, path, code.co_name, location_of(code, line),
        tuple(n for n, _ in undefined))


def _undefined_names(catcher: _CallCatcher) -> list[tuple[str, int]]:
    """(name, line) for each global the caught function loads that does not exist."""
    code = catcher.code
    if code is None:
        return []
    out: list[tuple[str, int]] = []
    for name, bound in catcher.free.items():
        if not bound:
            out.append((name, code.co_firstlineno))
    seen = {n for n, _ in out}
    for name, line in _global_loads(code, 0):
        if name in seen or name in catcher.globals or name in catcher.builtins:
            continue
        seen.add(name)
        out.append((name, line))
    return out


_GLOBAL_OPS = frozenset({"LOAD_GLOBAL", "LOAD_NAME"})


def _global_loads(code: types.CodeType, depth: int):
    line = code.co_firstlineno
    for ins in dis.get_instructions(code):
        positions = getattr(ins, "positions", None)
        if positions is not None and positions.lineno is not None:
            line = positions.lineno
        elif ins.starts_line:
            line = ins.starts_line
        if ins.opname in _GLOBAL_OPS and isinstance(ins.argval, str):
            yield ins.argval, line
    if depth < _MAX_CODE_DEPTH:
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                yield from _global_loads(const, depth + 1)


def _function(catcher: _CallCatcher) -> str:
    return catcher.code.co_name if catcher.code is not None else ""


def _def_location(catcher: _CallCatcher) -> SourceLocation | None:
    code = catcher.code
    return location_of(code, code.co_firstlineno) if code is not None else None


def innermost_user_location(tb) -> SourceLocation | None:
    found = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if not code.co_filename.startswith((JAX_DIR, PACKAGE_DIR)):
            found = location_of(code, tb.tb_lineno)
        tb = tb.tb_next
    return found
