"""Sweeps sampled for the quick run: a parametrized sweep's params, most of them marked slow.

`pytest -m "not slow"` then checks a sample spread over the sweep (the first value, and
every `every`-th after it); a full run (CI, scripts/test.sh) checks every value.
"""
from __future__ import annotations

import pytest


def sweep(values: list, ids: list[str], every: int = 8) -> list:
    """`values` (each a value, or a tuple of the test's values) as params named by `ids`, all
    but every `every`-th marked slow."""
    return [pytest.param(*(v if isinstance(v, tuple) else (v,)), id=name,
                         marks=() if i % every == 0 else pytest.mark.slow)
            for i, (v, name) in enumerate(zip(values, ids, strict=True))]
