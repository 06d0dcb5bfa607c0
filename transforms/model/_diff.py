"""Structural diff between two stages: equations added, removed or changed, and how avals changed.

Pure data in, pure data out: it reads recorded (or loaded) `Stage` records and
never touches JAX. Equations are aligned by primitive, as a longest common
subsequence, so a program that keeps its shape (f -> vmap(f)) pairs every
equation and shows what changed inside it (avals gain a batch axis,
dot_general gains a batch dimension), while grad's backward equations show
as added.
"""
from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from ._display import Displayed
from ._records import EqnRecord, Stage

# Above this many cells (equations before x after, past the common prefix and
# suffix) the exact alignment would keep too many bit rows; difflib's faster,
# coarser matching takes over.
MAX_EXACT_CELLS = 400_000_000


@dataclass(frozen=True, slots=True)
class EqnChange:
    """One row of the alignment: an equation kept, changed, added or removed."""
    kind: str                 # same | changed | added | removed
    before: int | None        # equation index in the first stage
    after: int | None         # equation index in the second stage
    details: tuple[str, ...] = ()  # for changed rows, e.g. "out: f32[] -> f32[2]"


@dataclass(frozen=True, slots=True)
class AvalChange:
    """How many values went from one aval to another, e.g. f32[5] -> f32[2,5]."""
    before: str
    after: str
    count: int
    note: str = ""            # e.g. "new axis 0 of size 2"


@dataclass(frozen=True, slots=True)
class PrimitiveDelta:
    primitive: str
    before: int
    after: int


@dataclass(frozen=True, slots=True)
class StageDiff(Displayed):
    before: str               # stage names
    after: str
    rows: tuple[EqnChange, ...]
    in_avals: tuple[tuple[str, ...], tuple[str, ...]]
    out_avals: tuple[tuple[str, ...], tuple[str, ...]]
    aval_changes: tuple[AvalChange, ...]   # most frequent first
    primitives: tuple[PrimitiveDelta, ...]  # primitives whose count changed
    exact: bool = True        # False when the coarse alignment was used

    def count(self, kind: str) -> int:
        return sum(1 for r in self.rows if r.kind == kind)

    def summary(self) -> str:
        parts = [f"{self.count(k)} {k}" for k in ("changed", "added", "removed", "same")]
        return ", ".join(parts)


def diff_stages(before: Stage, after: Stage) -> StageDiff:
    """Align two jaxpr stages equation by equation and say what changed."""
    for stage in (before, after):
        if stage.jaxpr is None:
            why = stage.reason or "it has no jaxpr (a compiled or metrics stage)"
            raise ValueError(f"cannot diff stage {stage.name!r}: {why}")
    a, b = before.eqns, after.eqns
    pairs, exact = align([e.primitive for e in a], [e.primitive for e in b])
    rows = tuple(_row(a, b, i, j) for i, j in pairs)
    jaxpr_a, jaxpr_b = before.jaxpr, after.jaxpr
    assert jaxpr_a is not None and jaxpr_b is not None  # checked above
    ins = (jaxpr_a.in_avals, jaxpr_b.in_avals)
    outs = (jaxpr_a.out_avals, jaxpr_b.out_avals)
    return StageDiff(before.name, after.name, rows, _short_all(ins), _short_all(outs),
                     _aval_changes(a, b, pairs, ins), _primitive_deltas(a, b), exact)


def find_stage(stages: Sequence[Stage], name: str) -> Stage:
    for stage in stages:
        if stage.name == name:
            return stage
    known = ", ".join(s.name for s in stages) or "none"
    raise KeyError(f"no stage named {name!r}; the stages are: {known}")


def stage_function(name: str) -> str:
    """The function a stage name is an expression of: "transpose(linear(loss))" -> "loss".

    A call's own chain is named from "f"; a transformation called inside it
    (a jitted step's value_and_grad) from its function's name.
    """
    while name.endswith(")") and "(" in name:
        name = name[name.index("(") + 1:-1]
    return name


def stage_groups(stages: Sequence[Stage]) -> list[list[int]]:
    """Indices of the jaxpr stages of each function, the call's own ("f") first."""
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(stages):
        if s.jaxpr is not None:
            groups.setdefault(stage_function(s.name), []).append(i)
    own = groups.pop("f", [])
    return ([own] if own else []) + list(groups.values())


def default_pair(stages: Sequence[Stage]) -> tuple[int, int] | None:
    """Before and after: a function and its whole transformed program, as indices.

    The call's own chain when it has two jaxpr stages (f -> vmap(grad(f))),
    else the first transformation inside the call that has (loss ->
    value_and_grad(loss) inside a jitted step); None when no function has two.
    """
    for group in stage_groups(stages):
        if len(group) < 2:
            continue
        return group[0], whole_program(stages, group)
    return None


def whole_program(stages: Sequence[Stage], indices: Sequence[int]) -> int:
    """Of some stages of one function (in order, not empty), its whole transformed program:
    the last "transformed" stage, else the last."""
    transformed = [i for i in indices if stages[i].role == "transformed"]
    return (transformed or indices)[-1]


# --- alignment -----------------------------------------------------------------

Pair = tuple[int | None, int | None]


def align(a: Sequence[str], b: Sequence[str]) -> tuple[list[Pair], bool]:
    """Pairs (i, j) of a longest common subsequence, with (i, None) / (None, j) for the rest.

    Returns the pairs in order and whether the alignment is exact (an LCS).
    """
    start = 0
    while start < len(a) and start < len(b) and a[start] == b[start]:
        start += 1
    end_a, end_b = len(a), len(b)
    while end_a > start and end_b > start and a[end_a - 1] == b[end_b - 1]:
        end_a -= 1
        end_b -= 1
    middle_a, middle_b = a[start:end_a], b[start:end_b]
    exact = len(middle_a) * len(middle_b) <= MAX_EXACT_CELLS
    middle = _lcs_pairs(middle_a, middle_b) if exact else _coarse_pairs(middle_a, middle_b)
    pairs: list[Pair] = [(i, i) for i in range(start)]
    pairs += [(None if i is None else i + start, None if j is None else j + start)
              for i, j in middle]
    pairs += [(end_a + k, end_b + k) for k in range(len(a) - end_a)]
    return pairs, exact


def _lcs_pairs(a: Sequence[str], b: Sequence[str]) -> list[Pair]:
    """An exact LCS alignment, bit-parallel (Hyyro 2004): one big-int row per element of a.

    Row i has a 0 bit at j where the LCS of a[:i] and b[:j+1] is longer than
    that of a[:i] and b[:j], so LCS(a[:i], b[:j]) = j - popcount(row_i below bit j).
    """
    n, m = len(a), len(b)
    if not n or not m:
        return [(i, None) for i in range(n)] + [(None, j) for j in range(m)]
    masks: dict[str, int] = {}
    for j, sym in enumerate(b):
        masks[sym] = masks.get(sym, 0) | (1 << j)
    full = (1 << m) - 1
    rows = [full]
    v = full
    for sym in a:
        u = v & masks.get(sym, 0)
        v = ((v + u) | (v - u)) & full
        rows.append(v)

    def lcs(i: int, j: int) -> int:
        return j - (rows[i] & ((1 << j) - 1)).bit_count()

    out: list[Pair] = []
    i, j = n, m
    while i and j:
        if a[i - 1] == b[j - 1]:
            out.append((i - 1, j - 1))
            i, j = i - 1, j - 1
        elif lcs(i - 1, j) >= lcs(i, j - 1):
            out.append((i - 1, None))
            i -= 1
        else:
            out.append((None, j - 1))
            j -= 1
    out += [(k, None) for k in range(i - 1, -1, -1)] + [(None, k) for k in range(j - 1, -1, -1)]
    out.reverse()
    return out


def _coarse_pairs(a: Sequence[str], b: Sequence[str]) -> list[Pair]:
    out: list[Pair] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=True)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out += [(i1 + k, j1 + k) for k in range(i2 - i1)]
        else:
            out += [(i, None) for i in range(i1, i2)] + [(None, j) for j in range(j1, j2)]
    return out


# --- what changed --------------------------------------------------------------

def _row(a: Sequence[EqnRecord], b: Sequence[EqnRecord], i: int | None, j: int | None) -> EqnChange:
    if i is None:
        return EqnChange("added", None, j)
    if j is None:
        return EqnChange("removed", i, None)
    details = _details(a[i], b[j])
    return EqnChange("changed" if details else "same", i, j, details)


def _details(x: EqnRecord, y: EqnRecord) -> tuple[str, ...]:
    out = []
    if x.params != y.params:
        px, py = dict(x.params), dict(y.params)
        for key in dict.fromkeys([*px, *py]):
            if px.get(key) != py.get(key):
                out.append(f"{key}: {px.get(key, '-')} -> {py.get(key, '-')}")
    if x.in_avals != y.in_avals:
        out.append(f"in: {_joined(x.in_avals)} -> {_joined(y.in_avals)}")
    if x.out_avals != y.out_avals:
        out.append(f"out: {_joined(x.out_avals)} -> {_joined(y.out_avals)}")
    return tuple(out)


def _joined(avals: Sequence[str]) -> str:
    return ", ".join(short_aval(v) for v in avals) or "()"


def _aval_changes(a: Sequence[EqnRecord], b: Sequence[EqnRecord], pairs: list[Pair],
                  ins: tuple[tuple[str, ...], tuple[str, ...]]) -> tuple[AvalChange, ...]:
    """Each value once, where it is defined: the stage inputs and the paired equations' outputs."""
    counts: Counter[tuple[str, str]] = Counter()
    defined = [ins] + [(a[i].out_avals, b[j].out_avals) for i, j in pairs
                       if i is not None and j is not None]
    for xs, ys in defined:
        if len(xs) == len(ys):
            counts.update((short_aval(x), short_aval(y)) for x, y in zip(xs, ys) if x != y)
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return tuple(AvalChange(x, y, n, _axis_note(x, y)) for (x, y), n in ordered)


def _primitive_deltas(a: Sequence[EqnRecord], b: Sequence[EqnRecord]) -> tuple[PrimitiveDelta, ...]:
    ca, cb = Counter(e.primitive for e in a), Counter(e.primitive for e in b)
    names = sorted(set(ca) | set(cb))
    return tuple(PrimitiveDelta(p, ca[p], cb[p]) for p in names if ca[p] != cb[p])


# --- avals as text -------------------------------------------------------------

_DTYPE_PREFIXES = (("bfloat", "bf"), ("float", "f"), ("uint", "u"), ("int", "i"),
                   ("complex", "c"))
_AVAL = re.compile(r"^(~?)([A-Za-z_]+)(\d*)(\[[^\]]*\])(.*)$")


def short_aval(aval: str) -> str:
    """`float32[2,5]` as JAX's jaxprs print it: `f32[2,5]`."""
    m = _AVAL.match(aval)
    if m is None or not m.group(3):
        return aval
    weak, kind, bits, dims, rest = m.groups()
    for long, short in _DTYPE_PREFIXES:
        if kind == long:
            return f"{weak}{short}{bits}{dims}{rest}"
    return aval


def _dims(aval: str) -> tuple[str, tuple[str, ...]] | None:
    m = _AVAL.match(aval)
    if m is None:
        return None
    inner = m.group(4)[1:-1]
    return m.group(2) + m.group(3), tuple(inner.split(",")) if inner else ()


def _axis_note(before: str, after: str) -> str:
    """Name the new axis when `after` is `before` with one more dimension."""
    x, y = _dims(before), _dims(after)
    if x is None or y is None or x[0] != y[0] or len(y[1]) != len(x[1]) + 1:
        return ""
    for k in range(len(y[1])):
        if y[1][:k] + y[1][k + 1:] == x[1]:
            return f"new axis {k} of size {y[1][k]}"
    return ""


AvalPair = tuple[tuple[str, ...], tuple[str, ...]]


def _short_all(pair: AvalPair) -> AvalPair:
    return tuple(short_aval(v) for v in pair[0]), tuple(short_aval(v) for v in pair[1])
