"""A call's label, one rule for every reader (the navigator, `show`, the exporter's titles):
the transformations applied to the call's own function, outermost first, around its name:
`vmap(grad(cubic))`, `jit(step)`. A transformation the function applies inside its body
(a jitted step that calls `value_and_grad(loss)`) is a level of the call, not part of its
label."""
from __future__ import annotations

from typing import Callable

from transforms.model import PUBLIC_KINDS, Call, Level

# The transformations a user applies (transforms' public wrappers): a level of one of
# these kinds can be part of a call's composition; eval, custom rules and the like are not.
TRANSFORMATIONS = frozenset(PUBLIC_KINDS)


def composition(call: Call) -> list[str]:
    """The transformations applied to the call's function, outermost first: ["vmap", "grad"]
    for vmap(grad(f)), ["jit"] for a jit of a step that calls grad(loss) inside.

    A chain of transformation levels, each the nearest transformation below the one before,
    each tracing the call's function (a level recorded without one, in an older dump,
    counts as tracing it)."""
    by_index = {lv.index: lv for lv in call.levels}
    chain: list[Level] = []
    for lv in sorted((lv for lv in call.levels if lv.kind in TRANSFORMATIONS),
                     key=lambda lv: lv.depth):
        if lv.function and lv.function != call.function:
            continue
        if _transformation_above(lv, by_index) is (chain[-1] if chain else None):
            chain.append(lv)
    kinds = [lv.kind for lv in chain]
    if call.transform and (not kinds or kinds[0] != call.transform):
        kinds.insert(0, call.transform)
    return kinds


def call_label(call: Call, safe: Callable[[str], str] = str) -> str:
    """`vmap(grad(example_loss))`, `grad(grad(cubic))`, `jit(vmap(convolve))`, `jit(step)`;
    `safe`: how the reader shows each recorded name (made safe for a terminal, cut), applied
    to each part so that a long name is cut, not the label."""
    label = safe(str(call.function))
    for kind in reversed(composition(call)):
        label = f"{safe(kind)}({label})"
    return label


def level_title(call: Call, level: Level, safe: Callable[[str], str] = str) -> str:
    """A level as readers list it: its label, and the function it traces where that is not
    the call's own: `jit#1/jit#2 (tree_bias_correction)`, `jit#2/while_body#3 (body)`,
    `custom_jvp_rule#3 (_root_jvp)`; `jit#1` for the call's jit(step)."""
    named = f" ({safe(level.function)})" if level.function and level.function != call.function \
        else ""
    return f"{safe(level.label)}{named}"


def level_note(call: Call, level: Level, safe: Callable[[str], str] = str) -> str:
    """Why a level holds no step of its own, where the recording says: "" otherwise."""
    if level.ran_as is None:
        return ""
    inner = next((lv for lv in call.levels if lv.index == level.ran_as), None)
    where = safe(inner.label) if inner is not None else f"level {level.ran_as}"
    return (f"its run's steps are at {where}: one run of {safe(level.function) or 'the rule'}, "
            f"wrapped by two traces")


def _transformation_above(level: Level, by_index: dict[int, Level]) -> Level | None:
    """The nearest transformation level `level` is nested in, or None."""
    seen = {level.index}
    parent = by_index.get(level.parent) if level.parent is not None else None
    while parent is not None and parent.index not in seen:
        if parent.kind in TRANSFORMATIONS:
            return parent
        seen.add(parent.index)
        parent = by_index.get(parent.parent) if parent.parent is not None else None
    return None
