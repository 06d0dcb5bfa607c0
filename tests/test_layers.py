"""No import cycles in transforms/ or workbench/: every `import` counts, at module level and
inside functions (a function-level import closing a cycle is still a cycle; only imports
under `if TYPE_CHECKING:` are left out, since they never run)."""
from __future__ import annotations

import ast
from pathlib import Path

from repo_paths import ROOT

PACKAGES = ("transforms", "workbench")



def _module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(parts), is_package


def _runtime_nodes(tree: ast.AST):
    """Every node but those under `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                stack.extend(child.orelse)
            else:
                stack.append(child)


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


def import_graph() -> dict[str, set[str]]:
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    names = {p: _module_name(p) for p in files}
    modules = {name for name, _ in names.values()}
    graph: dict[str, set[str]] = {}
    for path, (module, is_package) in names.items():
        deps: set[str] = set()
        for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
            deps |= _imported(module, is_package, node, modules)
        # A package's own __init__ runs before its modules: an edge to an ancestor
        # package is how Python imports work, not a cycle between subjects.
        graph[module] = {d for d in deps if d != module and not module.startswith(d + ".")}
    return graph


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


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_sees_function_level_imports(tmp_path):
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [frozenset({"a", "b", "c"})]
    source = "import typing\nif typing.TYPE_CHECKING:\n    import x\ndef f():\n    from . import y\n"
    tree = ast.parse(source)
    seen = set()
    for node in _runtime_nodes(tree):
        seen |= _imported("pkg.m", False, node, {"pkg", "pkg.x", "pkg.y", "x"})
    assert seen == {"pkg.y"}
