"""One bounded-cache type and one safe-text module (issue 13): the recorder's get-or-make
tables are `transforms._common.BoundedCache`s, and the text of objects that are not ours is
made by `transforms._common._text` (the workbench's per-destination escaping: workbench/_safe_text.py).
A scan of the sources finds the ad hoc forms they replaced."""
from __future__ import annotations

import ast

import pytest
from repo_paths import ROOT

from transforms._common import _text
from transforms._common._caches import BoundedCache

SOURCES = [p for pkg in ("transforms", "workbench", "scripts") for p in
           sorted((ROOT / pkg).rglob("*.py"))]
CACHE_MODULE = ROOT / "transforms" / "_common" / "_caches.py"
TEXT_MODULES = {ROOT / "transforms" / "_common" / "_text.py", ROOT / "workbench" / "_safe_text.py"}


def _name(node: ast.AST) -> str | None:
    return ast.unparse(node) if isinstance(node, (ast.Name, ast.Attribute)) else None


def _ad_hoc_bounds(tree: ast.AST) -> list[int]:
    """Lines of `if len(table) > N: table.clear()`: a table bounding itself by hand."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)):
            continue
        left = node.test.left
        if not (isinstance(left, ast.Call) and _name(left.func) == "len" and left.args):
            continue
        table = _name(left.args[0])
        for stmt in node.body:
            call = stmt.value if isinstance(stmt, ast.Expr) else None
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and \
                    call.func.attr == "clear" and _name(call.func.value) == table:
                found.append(node.lineno)
    return found


def _safe_text_helpers(tree: ast.AST) -> list[int]:
    """Lines of `try: <one str()/repr() of a value> except Exception: <a placeholder>`."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try) or len(node.body) != 1:
            continue
        stmt = node.body[0]
        value = stmt.value if isinstance(stmt, (ast.Return, ast.Assign)) else None
        if not (isinstance(value, ast.Call) and _name(value.func) in ("str", "repr")):
            continue
        if any(h.type is not None and _name(h.type) == "Exception" for h in node.handlers):
            found.append(node.lineno)
    return found


@pytest.mark.parametrize("scan, allowed", [(_ad_hoc_bounds, {CACHE_MODULE}),
                                           (_safe_text_helpers, TEXT_MODULES)],
                         ids=["bounded caches", "safe text"])
def test_no_module_rolls_its_own(scan, allowed):
    found = [f"{p.relative_to(ROOT)}:{line}" for p in SOURCES if p not in allowed
             for line in scan(ast.parse(p.read_text(), str(p)))]
    assert not found, found


def test_the_scans_find_what_they_look_for():
    assert _ad_hoc_bounds(ast.parse("if len(t) > 9:\n    t.clear()\n")) == [1]
    assert _ad_hoc_bounds(ast.parse("if len(self.t) >= 9:\n    self.t.clear()\n")) == [1]
    assert _safe_text_helpers(ast.parse(
        "try:\n    s = str(x)\nexcept Exception:\n    s = '?'\n")) == [1]


def test_bounded_cache_forgets_everything_once_full():
    cache = BoundedCache(3)
    assert cache.put("a", 1) == 1 and cache.get("a") == 1
    cache.put("b", 2)
    cache.put("c", 3)
    assert len(cache) == 3
    cache.put("d", 4)  # full: cleared first
    assert dict(cache) == {"d": 4}
    with pytest.raises(TypeError):
        cache.put([], 1)  # an unhashable key raises as a dict's would: callers choose


class _Raises:
    def __repr__(self):
        raise RuntimeError("no repr")

    __str__ = __repr__


class _NotAString:
    def __repr__(self):
        return 3  # type: ignore[return-value]


class _BadMessage(Exception):
    def __str__(self):
        raise ValueError("no message")


def test_safe_text():
    assert _text.safe_repr("x" * 500) == repr("x" * 500)[:_text.MAX_TEXT - 1] + "…"
    assert _text.safe_repr("x" * 500, None) == repr("x" * 500)
    assert _text.safe_repr(_Raises()) == "<repr-error RuntimeError>"
    assert _text.safe_repr(_NotAString()) == "<repr-error TypeError>"  # repr() refuses it
    assert _text.safe_str(_Raises()) == "<repr-error RuntimeError>"
    assert _text.message(_BadMessage()) == "<message unavailable: ValueError>"
    assert _text.first_line(ValueError("one\ntwo")) == "one"
    assert _text.first_line(ValueError()) == ""
    assert _text.first_line(ValueError("a" * 50), 10) == "a" * 9 + "…"
    assert _text.cut("abc", 2) == "a…"
