"""The house's structure (issue 31), read from the code's own imports and files.

- No import cycles in transforms/ or workbench/: every `import` counts, at module level,
  inside functions (a function-level import closing a cycle is still a cycle) and under
  `if TYPE_CHECKING:` (a type a lower module needs from a higher one is a Protocol of the
  lower module's own).
- The packages of transforms/ form layers, lowest first (LAYERS): a package imports its own
  modules and lower packages only.
- A module outside a package imports the package's surface (its `__init__`), never one of its
  private `_modules`; workbench imports only transforms' public names.
- No source file over 600 lines; transforms.model imports no JAX and no numpy.

Each rule's finder is tested on a small made-up case: a rule that cannot fail proves nothing.
"""
from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import ROOT

PACKAGES = ("transforms", "workbench")

# transforms/'s packages, lowest first: each may import those before it, none after it.
# `transforms` itself (its __init__ and _old_homes) stands above them all.
LAYERS = ("_common", "model", "_jax", "_capture", "_devices", "_trees", "_stages",
          "_recording", "_wrappers")


def _module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(parts), is_package


def _imported(module: str, is_package: bool, node: ast.AST, modules: set[str]) -> set[str]:
    """The project modules an import statement loads (the deepest that exist)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = module.split(".")
            base = base[:len(base) - node.level + (1 if is_package else 0)]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        # `from pkg import name`: the submodule pkg.name when there is one, else pkg.
        names = [f"{target}.{a.name}" if f"{target}.{a.name}" in modules else target
                 for a in node.names]
    else:
        return set()
    found = set()
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name:
            found.add(name)
    return found


def _imports(module: str, is_package: bool, source: str, modules: set[str]) -> set[str]:
    """Every project module `source` imports: at module level, in functions, under
    `if TYPE_CHECKING:` alike."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        found |= _imported(module, is_package, node, modules)
    # A package's own __init__ runs before its modules: an edge to an ancestor
    # package is how Python imports work, not a cycle between subjects.
    return {d for d in found if d != module and not module.startswith(d + ".")}


def import_graph() -> dict[str, set[str]]:
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    names = {p: _module_name(p) for p in files}
    modules = {name for name, _ in names.values()}
    return {module: _imports(module, is_package, path.read_text(), modules)
            for path, (module, is_package) in names.items()}


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def _layer(module: str) -> int | None:
    """The layer of a transforms module (its package's place in LAYERS); None for the rest
    (the top: transforms itself)."""
    parts = module.split(".")
    if parts[0] != "transforms" or len(parts) < 2 or parts[1] not in LAYERS:
        return None
    return LAYERS.index(parts[1])


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) where a transforms package imports a package above its own."""
    found = []
    for module, deps in sorted(graph.items()):
        own = _layer(module)
        if own is None:
            continue
        found += [(module, d) for d in sorted(deps)
                  if d.startswith("transforms") and (_layer(d) is None or _layer(d) > own)]
    return found


def private_imports(graph: dict[str, set[str]], packages: set[str]) -> list[tuple[str, str]]:
    """(importer, imported) where a module outside a package imports one of its private
    `_modules` (a file, not a package: a private package's surface is its __init__)."""
    found = []
    for module, deps in sorted(graph.items()):
        for d in sorted(deps):
            package, _, name = d.rpartition(".")
            if name.startswith("_") and d not in packages and package \
                    and module != package and not module.startswith(package + "."):
                found.append((module, d))
    return found


def _packages() -> set[str]:
    return {_module_name(p)[0] for pkg in PACKAGES for p in (ROOT / pkg).rglob("__init__.py")}


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_transforms_packages_import_only_lower_layers():
    graph = import_graph()
    assert {m.split(".")[1] for m in graph if m.startswith("transforms.")} \
        <= set(LAYERS) | {"_old_homes"}, "a new package of transforms/ needs its place in LAYERS"
    assert upward_imports(graph) == []


def test_modules_outside_a_package_import_only_its_surface():
    assert private_imports(import_graph(), _packages()) == []


# --- the finders can fail ---------------------------------------------------------------

def test_the_cycle_finder_sees_function_level_and_type_checking_imports():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [frozenset({"a", "b", "c"})]
    source = ("import typing\nif typing.TYPE_CHECKING:\n    from . import x\n"
              "def f():\n    from . import y\n")
    modules = {"pkg", "pkg.m", "pkg.x", "pkg.y"}
    assert _imports("pkg.m", False, source, modules) == {"pkg.x", "pkg.y"}


def test_the_layer_finder_sees_an_import_from_above():
    graph = {"transforms._capture._state": {"transforms._recording", "transforms._jax"},
             "transforms._recording._calls": {"transforms._capture", "transforms"},
             "transforms": {"transforms._wrappers"}, "workbench.cli": {"transforms._wrappers"}}
    assert upward_imports(graph) == [("transforms._capture._state", "transforms._recording"),
                                     ("transforms._recording._calls", "transforms")]


def test_the_surface_finder_sees_an_import_of_a_private_module():
    packages = {"t", "t._p", "w"}
    graph = {"t._p._a": {"t._p._b"}, "t._q._c": {"t._p._a", "t._p"}, "w.x": {"t._p", "t._p._b"},
             "t._p": {"t._p._a"}}
    assert private_imports(graph, packages) == [("t._q._c", "t._p._a"), ("w.x", "t._p._b")]


# --- no file over 600 lines ---------------------------------------------------------------

MAX_LINES = 600
LINE_COUNTED = (".py", ".c", ".h", ".pyi", ".sh", ".tcss")  # data (JSON, SVG) is not counted
# Files allowed to be longer for good, each with why. None today: generated data (the JSON
# schema, the snapshot SVGs) has none of the suffixes above.
EXEMPT: dict[str, str] = {}
# Files being split by subject, allowed while the split is under way. None today.
TEMPORARY_ALLOWANCE: frozenset[str] = frozenset()


def tracked_sources(root: Path) -> list[str]:
    """The files git tracks under root with a line-counted suffix (paths relative to root)."""
    if shutil.which("git") is None or not (root / ".git").exists():
        pytest.skip("not a git checkout: the tracked files cannot be listed")
    done = subprocess.run(["git", "ls-files", "-z", "--", *(f"*{s}" for s in LINE_COUNTED)],
                          cwd=root, capture_output=True, text=True, check=True)
    return [p for p in done.stdout.split("\0") if p]


def files_over(root: Path, paths: list[str], limit: int = MAX_LINES) -> dict[str, int]:
    """Each file of more than `limit` lines, with its count (a file deleted but not yet
    committed is skipped)."""
    counts = {p: len((root / p).read_bytes().splitlines()) for p in paths
              if (root / p).is_file()}
    return {p: n for p, n in counts.items() if n > limit}


def test_no_file_over_600_lines():
    long = files_over(ROOT, tracked_sources(ROOT))
    unexpected = {p: n for p, n in long.items() if p not in EXEMPT and p not in TEMPORARY_ALLOWANCE}
    assert unexpected == {}, f"split these by subject into modules of at most {MAX_LINES} lines"


def test_the_allowances_name_only_long_tracked_files():
    """A file split since (or gone) leaves the allowance: it must not grow back unseen."""
    long = files_over(ROOT, tracked_sources(ROOT))
    assert sorted((set(EXEMPT) | TEMPORARY_ALLOWANCE) - set(long)) == []


def test_the_line_limit_counts_the_tracked_sources_only(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    files = {"a.py": 601, "b.py": 600, "pkg/c.tcss": 700, "d.json": 900, "e.sh": 0,
             "untracked.py": 700}
    for name, lines in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("x\n" * lines)
    subprocess.run(["git", "add", "a.py", "b.py", "pkg/c.tcss", "d.json", "e.sh"],
                   cwd=tmp_path, check=True)
    tracked = tracked_sources(tmp_path)
    assert sorted(tracked) == ["a.py", "b.py", "e.sh", "pkg/c.tcss"]
    (tmp_path / "e.sh").unlink()  # deleted, not yet committed
    assert files_over(tmp_path, tracked) == {"a.py": 601, "pkg/c.tcss": 700}


# --- workbench imports only transforms' public names ----------------------------------------

_IMPORTERS = ("import_module", "__import__")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_transforms_imports(source: str) -> list[str]:
    """Every import of a private module or name of transforms, anywhere in the source
    (function level and `if TYPE_CHECKING:` included; importlib calls with a literal name)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str) \
                and getattr(node.func, "attr", getattr(node.func, "id", "")) in _IMPORTERS:
            modules = [node.args[0].value]
        if any(m.split(".")[0] == "transforms" and any(map(_private, m.split(".")))
               for m in modules):
            found.append((node.lineno, f"line {node.lineno}: {ast.unparse(node)}"))
    return [hit for _, hit in sorted(found)]


def test_workbench_imports_only_public_names_of_transforms():
    found = {str(path.relative_to(ROOT)): hits for path in sorted((ROOT / "workbench").rglob("*.py"))
             if (hits := private_transforms_imports(path.read_text()))}
    assert found == {}, "make the name public in its package's __init__ (e.g. transforms.model)"


def test_the_private_import_scan_sees_every_kind_of_import():
    source = """
import transforms, transforms.model
import transforms._jax
from transforms import model, record, __version__
from transforms._common import BoundedCache
from transforms.model import Session, _codec
from transforms.model._records import Call
from workbench._safe_text import terminal
from . import _local
import importlib
if TYPE_CHECKING:
    from transforms._stages import growth
def later():
    from transforms import _old_homes
    importlib.import_module("transforms._capture")
    importlib.import_module("transforms.model")
"""
    found = [hit.split(":")[0] for hit in private_transforms_imports(source)]
    assert found == ["line 3", "line 5", "line 6", "line 7", "line 12", "line 14", "line 15"]


# --- transforms.model imports no JAX and no numpy ---------------------------------------------

MODEL_OWN = ("transforms.model", "transforms._common")
HEAVY = ("jax", "jaxlib", "numpy")


def _resolved(package: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules an import statement names, relative ones made absolute from `package`."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
    module = ".".join(base + ([node.module] if node.module else []))
    # `from .. import _common` names the submodule; `from ._x import y`, the module.
    return [f"{module}.{a.name}" for a in node.names] if not node.module else [module]


def model_imports_outside(package: str, source: str) -> list[str]:
    """The imports of a module of `package` that are neither the model's own modules (or
    transforms._common) nor the standard library; `if TYPE_CHECKING:` imports included."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.Import, ast.ImportFrom)) or \
                (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            continue
        if not all(_model_may_import(module) for module in _resolved(package, node)):
            found.append((node.lineno, f"line {node.lineno}: {ast.unparse(node)}"))
    return [hit for _, hit in sorted(found)]


def _model_may_import(module: str) -> bool:
    own = any(module == m or module.startswith(m + ".") for m in MODEL_OWN)
    return own or module.split(".")[0] in sys.stdlib_module_names


def test_the_model_imports_only_itself_common_and_the_standard_library():
    found = {}
    for package in MODEL_OWN:
        folder = ROOT.joinpath(*package.split("."))
        for path in sorted(folder.rglob("*.py")):
            # The package its relative imports start from (an __init__'s is its own folder).
            inner = path.relative_to(folder).with_suffix("").parts
            owner = ".".join((package, *inner[:-1]))
            hits = model_imports_outside(owner, path.read_text())
            if hits:
                found[str(path.relative_to(ROOT))] = hits
    assert found == {}


def test_the_model_scan_sees_imports_from_outside():
    source = """
from __future__ import annotations
import json, os.path
import numpy as np
from jax import numpy as jnp
from . import _codec
from ._records import Call
from .. import _common, _jax
from .._common import safe_repr
from .._capture import describe
def later():
    import jaxlib
if TYPE_CHECKING:
    from transforms._stages import growth
"""
    found = [hit.split(":")[0] for hit in model_imports_outside("transforms.model", source)]
    assert found == ["line 4", "line 5", "line 8", "line 10", "line 12", "line 14"]


def heavy_modules_after(code: str) -> list[str]:
    """Which of jax, jaxlib and numpy a fresh interpreter has loaded after running `code`."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=True)
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("code", ["import transforms.model", "import transforms"])
def test_importing_the_model_loads_no_jax_and_no_numpy(code):
    assert heavy_modules_after(code) == []


def test_the_import_probe_sees_a_heavy_module():
    assert heavy_modules_after("import numpy") == ["numpy"]

