"""Graph titles wrap between words (issue 36, item 14): `with children`, never
`with c` / `hildren`."""
from __future__ import annotations

from workbench.export._call_views import _wrap


def test_wrapped_text_breaks_between_words():
    text = ("first difference at the root: primal output has a pkg.Primal with children .x; "
            "tangent output has a pkg.Tangent with children .sign, .norm")
    assert _wrap(text, 40).splitlines() == [
        "first difference at the root: primal",
        "output has a pkg.Primal with children",
        ".x; tangent output has a pkg.Tangent",
        "with children .sign, .norm"]
    assert _wrap("x" * 25, 10).splitlines() == ["x" * 10, "x" * 10, "x" * 5]
