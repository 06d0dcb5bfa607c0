"""What the jaxpr view folds, decided from the records alone: repeated blocks of equations
(`find_repeats`), the equations past the node budget, the neighbourhood of a focused
equation, and inputs or outputs grouped by argument (their key paths cut short)."""
from __future__ import annotations

import re
from collections import Counter, deque
from dataclasses import dataclass
from typing import Iterable, Sequence

from transforms.model import EqnRecord, short_aval

from ._graph import CollectError, GraphOptions, _shorten


@dataclass(frozen=True)
class Group:
    """Top-level equations #start-#end drawn as one node."""
    key: str
    label: str
    start: int
    end: int


def fold_groups(eqns: Sequence[EqnRecord], options: GraphOptions, budget: int | None,
                expand: bool) -> tuple[dict[int, Group], list[str], int]:
    """Top-level equations drawn as one node: repeats, then what the node cap leaves out;
    with the notes saying so and how many equations the cap folded."""
    n = len(eqns)
    groups: dict[int, Group] = {}
    notes = []
    folded = 0
    if options.collapse_repeats:
        keys = [e.primitive for e in eqns]
        runs = find_repeats(keys)
        for start, period, count in runs:
            block = keys[start:start + period]
            group = Group(f"r{start}", (f"{count - 1} more repeats of #{start}-"
                                        f"#{start + period - 1}\n"
                                        f"({period} equations each: "
                                        f"{_shorten(', '.join(block), 60)})"),
                          start + period, start + period * count - 1)
            for i in range(start + period, start + period * count):
                groups[i] = group
        if runs:
            hidden = sum(p * (c - 1) for _, p, c in runs)
            notes.append(f"collapse_repeats: {hidden} equations in {len(runs)} repeated "
                         f"block(s) drawn as one node each (the first copy is drawn)")
    if budget is not None and options.focus is None:
        cost = 0
        for i, eqn in enumerate(eqns):
            if i in groups:
                continue
            cost += 1 + (sub_count(eqn) if expand else 0)
            if cost > budget:
                rest = [j for j in range(i, n) if j not in groups]
                prims = Counter(eqns[j].primitive for j in rest)
                top = ", ".join(f"{p} x{c}" for p, c in prims.most_common(4))
                more = len(prims) - 4
                top += f", {more} more kinds" if more > 0 else ""
                group = Group("cap", f"{len(rest)} more equations not drawn\n"
                                     f"(max_nodes={options.max_nodes})\n{top}", i, n - 1)
                for j in rest:
                    groups[j] = group
                folded = len(rest)
                notes.append(f"max_nodes={options.max_nodes}: equations #{i}-#{n - 1} "
                             f"({len(rest)} of {n}) are drawn as one node; show them with "
                             f"focus=EQN or a larger max_nodes")
                break
    return groups, notes, folded


def neighbourhood(eqns: Sequence[EqnRecord], focus: int, radius: int) -> set[int]:
    """The equations within `radius` dataflow steps of equation #focus."""
    if not 0 <= focus < len(eqns):
        raise CollectError(f"focus={focus}: the stage has equations #0-#{len(eqns) - 1}")
    producer: dict[str, int] = {}
    consumers: dict[str, list[int]] = {}
    for i, eqn in enumerate(eqns):
        for var in eqn.out_vars:
            producer[var] = i
        for var in eqn.in_vars:
            consumers.setdefault(var, []).append(i)
    seen = {focus}
    frontier = deque([(focus, 0)])
    while frontier:
        i, d = frontier.popleft()
        if d == radius:
            continue
        near = [producer[v] for v in eqns[i].in_vars if v in producer]
        for v in eqns[i].out_vars:
            near += consumers.get(v, ())
        for j in near:
            if j not in seen:
                seen.add(j)
                frontier.append((j, d + 1))
    return seen


def find_repeats(keys: Sequence[str], min_total: int = 6, max_period: int = 32,
                 min_count: int = 2) -> list[tuple[int, int, int]]:
    """(start, period, count) of runs where a block of `period` keys repeats `count` times.

    Greedy from the left, the run covering the most keys at each start.
    """
    out = []
    n, i = len(keys), 0
    while i < n:
        best = None
        for p in range(1, min(max_period, (n - i) // 2) + 1):
            block = keys[i:i + p]
            k = 1
            while i + (k + 1) * p <= n and keys[i + k * p:i + (k + 1) * p] == block:
                k += 1
            covers = k * p
            if k >= min_count and covers >= min_total and (best is None
                                                            or covers > best[1] * best[2]):
                best = (i, p, k)
        if best is None:
            i += 1
        else:
            out.append(best)
            i += best[1] * best[2]
    return out


_PATH_PART = re.compile(r"\[[^\]]*\]|\.[^.\[]+|[^.\[]+")


def argument_keys(names: Sequence[str], budget: int, depth_limit: int = 3) -> list[str]:
    """Each leaf's group: its key path cut to the shallowest depth that splits the leaves
    (`params[0][1]` -> `params`; all under `args` -> `args[0]`, `args[1]`), with no more
    groups than a quarter of the budget."""
    parts = [_PATH_PART.findall(n) or [n] for n in names]
    keys = ["".join(p[:1]) for p in parts]
    for depth in range(2, depth_limit + 1):
        if len(set(keys)) > 1:
            break
        deeper = ["".join(p[:depth]) for p in parts]
        if len(set(deeper)) > max(2, budget // 4):
            break
        keys = deeper
    return keys


def padded(avals: Sequence[str], values: Sequence[str]) -> list[str]:
    return [avals[i] if i < len(avals) else "" for i in range(len(values))]


def aval_summary(avals: Iterable[str], top: int = 3) -> str:
    counts = Counter(short_aval(a) for a in avals if a)
    text = ", ".join(f"{a} x{n}" if n > 1 else a for a, n in counts.most_common(top))
    more = len(counts) - top
    return text + (f", {more} more shapes" if more > 0 else "")


def sub_count(eqn: EqnRecord) -> int:
    return sum(len(s.eqns) + len(s.in_vars) + sum(sub_count(e) for e in s.eqns)
               for s in eqn.subjaxprs)
