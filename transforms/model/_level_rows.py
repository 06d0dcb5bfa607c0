"""A call's levels as rows, as `workbench show` and the TUI's navigator list them: nested by
parent, a run of identical sibling levels one row. A reading of the record model (no JAX),
re-exported by transforms.model (`model.level_rows`, `model.LevelRow`)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Container, NamedTuple

if TYPE_CHECKING:
    from ._records import Call, Level

class LevelRow(NamedTuple):
    """One row of a call's level tree, as `workbench show` and the TUI's navigator list them.

    Levels nest by `parent` (not by index order, nor by the depth in their label).
    A run of identical sibling levels (the same kind, label, trace type, function,
    options, steps by primitive and phase, and children: a relu's custom_jvp_fun
    once per layer, a solver's step once per iteration) is one row whose `count`
    (`repeats`) says how many levels it stands for, unless the run is expanded.
    """
    position: int             # the level's position in call.levels (a run's first level)
    depth: int                # its ancestors: 0 for a root level
    repeats: int = 1          # levels of the run it starts; 1 for a plain level
    folded: bool = False      # the run's other levels (and their subtrees) are not listed
    run: tuple[int, ...] = ()  # positions of the run's levels (on its first row only)


def level_rows(call: Call, expanded: Container[int] = frozenset()) -> list[LevelRow]:
    """The call's levels in tree order, runs of identical siblings folded into one row.

    `expanded` holds the first positions of runs to list level by level.
    """
    children = _level_children(call.levels)
    signature = _level_signatures(call, children)
    rows: list[LevelRow] = []
    listed: set[int] = set()
    stack: list[tuple[tuple[int, ...], int]] = []  # (run, depth); a plain level: a run of one

    def push_children(parent: int | None, depth: int) -> None:
        stack.extend((run, depth) for run in reversed(_runs(children.get(parent, []), signature)))

    push_children(None, 0)
    while stack:
        run, depth = stack.pop()
        first = run[0]
        if first in listed:
            continue
        if len(run) > 1 and first not in expanded:
            listed.update(_subtrees(run[1:], children))  # the other levels: folded away
            listed.add(first)
            rows.append(LevelRow(first, depth, len(run), True, run))
        else:
            listed.add(first)
            rows.append(LevelRow(first, depth, len(run), False, run) if len(run) > 1
                        else LevelRow(first, depth))
            stack.extend(((pos,), depth) for pos in reversed(run[1:]))  # after first's subtree
        push_children(first, depth + 1)
    for pos in range(len(call.levels)):  # levels in a parent cycle (odd data): still listed
        if pos not in listed:
            rows.append(LevelRow(pos, 0))
    return rows


def _subtrees(roots: tuple[int, ...], children: dict[int | None, list[int]]) -> set[int]:
    found: set[int] = set()
    stack = list(roots)
    while stack:
        pos = stack.pop()
        if pos not in found:
            found.add(pos)
            stack.extend(children.get(pos, []))
    return found


def _level_children(levels: tuple[Level, ...]) -> dict[int | None, list[int]]:
    """Child positions per parent position (None: the roots), in index order."""
    position = {lv.index: pos for pos, lv in enumerate(levels)}
    children: dict[int | None, list[int]] = {}
    for pos, lv in enumerate(levels):
        parent = position.get(lv.parent) if lv.parent != lv.index else None  # type: ignore[arg-type]
        children.setdefault(parent, []).append(pos)
    return children


def _level_signatures(call: Call, children: dict[int | None, list[int]]) -> list[int]:
    """Per level position, a number equal for levels that record the same thing."""
    levels = call.levels
    position = {lv.index: pos for pos, lv in enumerate(levels)}
    steps: list[list[tuple[str, str, str]]] = [[] for _ in levels]
    for step in call.steps:
        pos = position.get(step.level)
        if pos is not None:
            steps[pos].append((step.primitive, step.phase, step.kind))
    preorder: list[int] = []
    stack = list(reversed(children.get(None, [])))
    seen: set[int] = set()
    while stack:
        pos = stack.pop()
        if pos in seen:
            continue
        seen.add(pos)
        preorder.append(pos)
        stack.extend(reversed(children.get(pos, [])))
    numbers: dict[tuple, int] = {}
    signature = [-1 - pos for pos in range(len(levels))]  # unreachable levels: unique
    for pos in reversed(preorder):  # children before parents
        lv = levels[pos]
        key = (lv.kind, lv.label, lv.trace_type, lv.function, lv.options, tuple(steps[pos]),
               tuple(signature[c] for c in children.get(pos, [])))
        signature[pos] = numbers.setdefault(key, len(numbers))
    return signature


def _runs(siblings: list[int], signature: list[int]) -> list[tuple[int, ...]]:
    """Consecutive siblings with one signature, grouped."""
    runs: list[list[int]] = []
    for pos in siblings:
        if runs and signature[runs[-1][0]] == signature[pos]:
            runs[-1].append(pos)
        else:
            runs.append([pos])
    return [tuple(r) for r in runs]
