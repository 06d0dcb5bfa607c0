"""Load-time consistency checks: what the readers of a Session rely on, checked once.

The codec (`_codec.py`) checks that every value has its field's type and that
every table index is in range. This pass, run by the loader on the decoded
Session, checks what types cannot say: indices unique and references pointing
at something (a step's level, its cause, an error's step, a tree node's parent
and children, a pair's rows), parents before children, and sizes a reader
loops over or allocates by kept sane (a level's depth, a tree's depth, a mesh's
device count, nesting of values and sub-jaxprs). A dump that breaks one raises
`DumpFormatError` naming the record and the value; nothing here executes data.

NB: kept apart from the decoding (which is tuned for speed) so either can change
alone; each check is a function in CHECKS, run in order.
"""
from __future__ import annotations

import math
from itertools import chain
from operator import attrgetter
from typing import Any, Callable, Iterable

from .._common import safe_repr
from ._codec import DumpFormatError

# Bounds no recording reaches and every reader can afford.
MAX_DEVICES = 4096          # per sharding: the devices views draw one cell per device
MAX_VALUE_NESTING = 64      # ValueRecord children (a tracer wrapping a tracer ...)
MAX_SUBJAXPR_NESTING = 64   # equations holding jaxprs holding equations ...
MAX_TREE_DEPTH = 1000       # the recorder stops at depth 100
MAX_INDEX = 2**62           # any index or count, so arithmetic on it stays small

_index = attrgetter("index")


def check_session(session: Any, tables: dict[str, list] | None = None) -> None:
    """Raise DumpFormatError for the first inconsistency; `tables`: the file's shared tables."""
    for check in CHECKS:
        check(session, tables or {})


# --- calls, levels, steps, errors -------------------------------------------------------

def _calls(session: Any, tables: dict[str, list]) -> None:
    # NB: call indices may repeat (sessions joined, one per process): readers take the first.
    stages_seen: set[int] = set()  # ids of the stages checked: the session keeps them alive
    # A loaded session shares a part between the calls whose dumps wrote the same text (a
    # loop's calls): each object checked once (steps once per set of levels they refer to).
    parts_seen: dict[Any, set[int] | None] = {}
    for position, call in enumerate(session.calls):
        where = f"calls[{position}]"
        _bounded(call.index, f"{where}.index")
        if call.parent is not None:
            _bounded(call.parent, f"{where}.parent")
        level_ids = _levels(call.levels, f"{where}.levels")
        for i, error in enumerate(call.errors):
            _reference(error.level, level_ids, f"{where}.errors[{i}].level", "level")
            if error.mismatch is not None:
                _pair(error.mismatch, f"{where}.errors[{i}].mismatch")
        for name in CALL_PARTS:
            part = getattr(call, name)
            # NB: a part not decoded yet (record.Lazy) is checked when it is decoded.
            if getattr(part, "decoded", True):
                check_call_part(call, name, part, where, level_ids, parts_seen)
        for i, record in enumerate(call.shardings):
            _sharding(record, f"{where}.shardings[{i}]")
        for i, stage in enumerate(call.stages):
            if id(stage) not in stages_seen:  # shared stages (one object) are checked once
                stages_seen.add(id(stage))
                _stage(stage, f"{where}.stages[{i}]")
        for i, growth in enumerate(call.growth):
            for j, series in enumerate(growth.series):
                for k, point in enumerate(series.points):
                    at = f"{where}.growth[{i}].series[{j}].points[{k}]"
                    _bounded(point.size, f"{at}.size")
                    if point.eqn_count is not None:
                        _bounded(point.eqn_count, f"{at}.eqn_count")
                    _histogram(point.histogram, at)


def check_call_part(call: Any, name: str, items: tuple, where: str,
                    level_ids: set[int] | None = None,
                    seen: dict[Any, set[int] | None] | None = None) -> None:
    """The checks of one call's steps, trees or pairs (`name`, one of CALL_PARTS): a lazy load
    runs them when it decodes the part; `where` names the call (`calls[3]`). `seen`: the
    parts checked already, by id (the session keeps them alive), skipped."""
    if name == "steps":
        if level_ids is None:
            level_ids = _levels(call.levels, f"{where}.levels")
        key = (id(items), frozenset(level_ids))
        step_ids = seen.get(key) if seen is not None else None
        if step_ids is None:
            step_ids = _steps(items, level_ids, f"{where}.steps")
            if seen is not None:
                seen[key] = step_ids
        for i, error in enumerate(call.errors):
            _reference(error.step, step_ids, f"{where}.errors[{i}].step", "step")
        return
    if seen is not None:
        if id(items) in seen:
            return
        seen[id(items)] = None
    if name == "trees":
        for i, tree in enumerate(items):
            _tree(tree, f"{where}.trees[{i}]")
    else:
        for i, pair in enumerate(items):
            _pair(pair, f"{where}.pairs[{i}]")


# The parts of a Call a lazy load decodes on first read (record.LAZY_FIELDS).
CALL_PARTS = ("steps", "trees", "pairs")


def _levels(levels: tuple, where: str) -> set[int]:
    """Level indices (unique), each parent an earlier level, depths within the level count."""
    seen: set[int] = set()
    for position, level in enumerate(levels):
        at = f"{where}[{position}]"
        _bounded(level.index, f"{at}.index")
        if level.index in seen:
            raise DumpFormatError(f"{at}.index: level {level.index} appears twice")
        if level.parent is not None and level.parent not in seen:
            raise DumpFormatError(f"{at}.parent: {_num(level.parent)} is not a level listed "
                                  f"before it")
        if not 0 <= level.depth <= len(levels):
            raise DumpFormatError(f"{at}.depth: {_num(level.depth)} is not between 0 and the "
                                  f"call's {len(levels)} levels")
        seen.add(level.index)
    return seen


def _steps(steps: tuple, level_ids: set[int], where: str) -> set[int]:
    """Step indices unique; each step's level a level of the call; each cause a step of it."""
    indices = list(map(_index, steps))
    ids = _unique(indices, "Step.index", where)
    if ids and (min(ids) < 0 or max(ids) > MAX_INDEX):
        raise DumpFormatError(f"{where}: a step index is out of range "
                              f"({_num(min(ids))}..{_num(max(ids))})")
    levels = set(map(attrgetter("level"), steps))
    if not levels <= level_ids:
        bad = min(levels - level_ids)
        raise DumpFormatError(f"{where}: a step is at level {_num(bad)}, which the call does "
                              f"not have")
    causes = set(map(attrgetter("cause"), steps))
    causes.discard(None)
    if not causes <= ids:
        bad = min(causes - ids)
        raise DumpFormatError(f"{where}: a step's cause {_num(bad)} is not a step of the call")
    return ids


# --- pytrees ---------------------------------------------------------------------------

def _tree(tree: Any, where: str) -> None:
    """Nodes in preorder: node i at position i, parents before children, links both ways."""
    nodes = tree.nodes
    if _tree_holds(nodes):
        return
    for position in range(len(nodes)):  # the first bad node, with its message
        _bad_node(nodes, position, f"{where}.nodes[{position}]")
    raise DumpFormatError(f"{where}: the nodes' links do not hold")  # NB: not reached


def _tree_holds(nodes: Any) -> bool:
    """_bad_node's checks, a column at a time (a big dump has millions of nodes)."""
    count = len(nodes)
    if not count:
        return True
    if list(map(attrgetter("index"), nodes)) != list(range(count)):
        return False
    parents = list(map(attrgetter("parent"), nodes))
    if parents[0] is not None or not all(p is not None and 0 <= p < i
                                         for i, p in enumerate(parents[1:], 1)):
        return False
    if not all(0 <= d <= i for i, d in enumerate(map(attrgetter("depth"), nodes[:MAX_TREE_DEPTH]))) \
            or not all(0 <= n.depth <= MAX_TREE_DEPTH for n in nodes[MAX_TREE_DEPTH:]):
        return False
    # each node listed by its parent, each listed child's parent the node: the same links
    listed = {(i, c) for i, n in enumerate(nodes) for c in n.children}
    return listed == {(p, i) for i, p in enumerate(parents) if i}


def _bad_node(nodes: Any, position: int, at: str) -> None:
    node, count = nodes[position], len(nodes)
    if node.index != position:
        raise DumpFormatError(f"{at}.index: {_num(node.index)}, expected {position}")
    if position == 0:
        if node.parent is not None:
            raise DumpFormatError(f"{at}.parent: the root has a parent")
    elif node.parent is None or not 0 <= node.parent < position:
        raise DumpFormatError(f"{at}.parent: {_num(node.parent)} is not a node before it")
    elif position not in nodes[node.parent].children:
        raise DumpFormatError(f"{at}.parent: node {node.parent} does not list it as a child")
    if not 0 <= node.depth <= min(position, MAX_TREE_DEPTH):
        raise DumpFormatError(f"{at}.depth: {_num(node.depth)} is out of range")
    for child in node.children:
        if not position < child < count or nodes[child].parent != position:
            raise DumpFormatError(f"{at}.children: {_num(child)} is not a child node "
                                  f"after it")


def _pair(pair: Any, where: str) -> None:
    _tree(pair.left, f"{where}.left")
    _tree(pair.right, f"{where}.right")
    left, right = len(pair.left.nodes), len(pair.right.nodes)
    for i, row in enumerate(pair.rows):
        for side, value, count in (("left", row.left, left), ("right", row.right, right)):
            if value is not None and not 0 <= value < count:
                raise DumpFormatError(f"{where}.rows[{i}].{side}: {_num(value)} is not a node "
                                      f"of the {side} tree ({count} nodes)")


# --- shardings, stages -----------------------------------------------------------------

def _sharding(record: Any, where: str) -> None:
    """A mesh small enough to draw, its shape matching its devices, blocks as wide as the array."""
    if any(not 0 < n <= MAX_DEVICES for n in record.mesh_shape):
        raise DumpFormatError(f"{where}.mesh_shape: {_short(record.mesh_shape)} has a size "
                              f"outside 1..{MAX_DEVICES}")
    devices = math.prod(record.mesh_shape) if record.mesh_shape else len(record.mesh_devices)
    if devices > MAX_DEVICES or len(record.mesh_devices) > MAX_DEVICES:
        raise DumpFormatError(f"{where}: more than {MAX_DEVICES} devices")
    if record.mesh_shape and record.mesh_devices and devices != len(record.mesh_devices):
        raise DumpFormatError(f"{where}.mesh_shape: {_short(record.mesh_shape)} does not hold "
                              f"its {len(record.mesh_devices)} devices")
    if len(record.mesh_axes) > len(record.mesh_shape):
        raise DumpFormatError(f"{where}.mesh_axes: more axes than mesh_shape has sizes")
    if len(record.blocks) > MAX_DEVICES:
        raise DumpFormatError(f"{where}.blocks: more than {MAX_DEVICES} blocks")
    for i, block in enumerate(record.blocks):
        if len(block.starts) != len(block.stops):
            raise DumpFormatError(f"{where}.blocks[{i}]: starts and stops differ in length")


def _stage(stage: Any, where: str) -> None:
    _histogram(stage.histogram, where)
    for i, record in enumerate(stage.shardings):
        _sharding(record, f"{where}.shardings[{i}]")
    for i, collective in enumerate(stage.collectives):
        if len(collective.groups) > MAX_DEVICES:
            raise DumpFormatError(f"{where}.collectives[{i}].groups: more than {MAX_DEVICES}")
    if stage.jaxpr is not None:
        _bounded(stage.jaxpr.eqn_count, f"{where}.jaxpr.eqn_count")
    _subjaxpr_nesting(stage.eqns, f"{where}.eqns")
    _eqn_spans(stage.eqn_spans, len(stage.eqns), f"{where}.eqn_spans")
    _eqn_steps(stage.eqn_steps, len(stage.eqns), f"{where}.eqn_steps")


def _eqn_spans(spans: tuple, eqn_count: int, where: str) -> None:
    """One (first, last) line per equation, in order and not overlapping, or none."""
    if not spans:
        return
    if len(spans) != eqn_count:
        raise DumpFormatError(f"{where}: {len(spans)} spans for {eqn_count} equations")
    previous = -1
    for i, span in enumerate(spans):
        if len(span) != 2 or not previous < span[0] <= span[1] <= MAX_INDEX:
            raise DumpFormatError(f"{where}[{i}]: {_short(str(span))} is not a span after "
                                  f"line {previous}")
        previous = span[1]


def _eqn_steps(steps: tuple, eqn_count: int, where: str) -> None:
    """One step index (or -1) per equation, or none. Which call's steps they index is the
    capturing call's (stages are shared): a reader finds no step for an index it lacks."""
    if not steps:
        return
    if len(steps) != eqn_count:
        raise DumpFormatError(f"{where}: {len(steps)} steps for {eqn_count} equations")
    if min(steps) < -1 or max(steps) > MAX_INDEX:
        raise DumpFormatError(f"{where}: a step index out of range")


def _subjaxpr_nesting(eqns: Iterable[Any], where: str) -> None:
    level = [e for e in eqns if e.subjaxprs]
    for _ in range(MAX_SUBJAXPR_NESTING):
        if not level:
            return
        subs = list(chain.from_iterable(e.subjaxprs for e in level))
        for sub in subs:
            _bounded(sub.eqn_count, f"{where}: a sub-jaxpr's eqn_count")
            if any(o < -1 for o in sub.operands):
                raise DumpFormatError(f"{where}: a sub-jaxpr operand below -1")
        level = [e for s in subs for e in s.eqns if e.subjaxprs]
    if level:
        raise DumpFormatError(f"{where}: jaxprs nested more than {MAX_SUBJAXPR_NESTING} deep")


def _histogram(histogram: tuple, where: str) -> None:
    # NB: the message only for a bad bar: a million-step dump has a million bars
    for bar in histogram:
        if not 0 <= bar.count <= MAX_INDEX:
            _bounded(bar.count, f"{where}.histogram ({_short(bar.primitive)})")


# --- shared values ---------------------------------------------------------------------

def _values(session: Any, tables: dict[str, list]) -> None:
    """Tracer descriptions nest boundedly (readers describe them recursively)."""
    level = [v for v in tables.get("ValueRecord", ()) if v.children]
    for _ in range(MAX_VALUE_NESTING):
        if not level:
            return
        level = [c for v in level for _, c in v.children if c.children]
    if level:
        raise DumpFormatError(f"tables['ValueRecord']: a value nests more than "
                              f"{MAX_VALUE_NESTING} deep")


def _sources(session: Any, tables: dict[str, list]) -> None:
    for i, loc in enumerate(tables.get("SourceLocation", ())):
        if not 0 <= loc.line <= MAX_INDEX:
            raise DumpFormatError(f"tables['SourceLocation'][{i}].line: {_num(loc.line)} is "
                                  f"out of range")


# --- helpers ---------------------------------------------------------------------------

def _unique(indices: list[int], what: str, where: str) -> set[int]:
    ids = set(indices)
    if len(ids) != len(indices):
        seen: set[int] = set()
        bad = next(i for i in indices if i in seen or seen.add(i))  # type: ignore[func-returns-value]
        raise DumpFormatError(f"{where}: {what} {_num(bad)} appears twice")
    return ids


def _reference(value: int | None, known: set[int], where: str, what: str) -> None:
    if value is not None and value not in known:
        raise DumpFormatError(f"{where}: {_num(value)} is not a {what} of the call")


def _bounded(value: int, where: str) -> None:
    if not 0 <= value <= MAX_INDEX:
        raise DumpFormatError(f"{where}: {_num(value)} is out of range (0..2**62)")


def _num(value: Any) -> str:
    """An echoed number, cut: a 4,000-digit integer is not repeated whole."""
    return _short(value)


def _short(value: Any, limit: int = 40) -> str:
    return safe_repr(value, limit)


CHECKS: list[Callable[[Any, dict[str, list]], None]] = [_values, _sources, _calls]

__all__ = ["CHECKS", "MAX_DEVICES", "check_session"]
