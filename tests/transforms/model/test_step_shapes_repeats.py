"""Saving a loop's calls: steps, trees and pairs that repeat an earlier call's, as other
objects with the same values, are compared rather than keyed (transforms/model/_step_shapes.py's
`_repeats`, transforms/model/_codec.py's `_once_per_repeat`). The bytes are those of every call
converted on its own, and the file loads back to the same calls."""
from __future__ import annotations

import copy
import gc
import random

import pytest
from test_step_shapes import LEVELS, _random_steps

from transforms.model import (
    Call,
    Lazy,
    PairRow,
    Session,
    Step,
    TreeNode,
    TreePair,
    TreeRecord,
    _layout,
    _load as dump,
    _step_shapes,
)


def _tree(name: str, aval: str) -> TreeRecord:
    leaf = TreeNode(0, None, 0, "", "", "leaf", "jax.Array", aval=aval, traced=True)
    return TreeRecord("input", name, "PyTreeDef(*)", (leaf,), argnum=0)


TREES = ((), (_tree("x", "f32[3]"),), (_tree("x", "f32[3]"), _tree("y", "f32[]")),
         (_tree("x", "f32[4]"),))
PAIRS = ((), (TreePair("gradient", "x and its gradient", _tree("x", "f32[3]"),
                       _tree("grad", "f32[3]"), (PairRow("", 0, 0, "same"),)),))


def _cut(steps: tuple, n: int) -> tuple:
    """The first n steps, a cause outside them dropped (the loader checks causes)."""
    kept = steps[:n]
    indices = {s.index for s in kept}
    return tuple(s if s.cause in indices else s._replace(cause=None) for s in kept)


def _loop_session(rng: random.Random) -> Session:
    """Calls that repeat a few bodies as other objects (deep copies), now and then with a
    step changed, cut short, or new; alternating bodies; some parts lazy."""
    bodies = [_random_steps(rng, rng.randint(0, 14), rng.random() < 0.7, True)
              for _ in range(3)]
    calls = []
    for n in range(rng.randint(1, 24)):
        steps = copy.deepcopy(rng.choice(bodies))
        roll = rng.random()
        if steps and roll < 0.2:  # one step not as before
            at = rng.randrange(len(steps))
            changed = steps[at]._replace(name_stack=f"changed{rng.randrange(2)}")
            steps = steps[:at] + (changed,) + steps[at + 1:]
        elif steps and roll < 0.3:
            steps = _cut(steps, rng.randrange(len(steps)))
        elif roll < 0.4:
            steps = _random_steps(rng, rng.randint(0, 14), rng.random() < 0.7, True)
        trees, pairs = copy.deepcopy(rng.choice(TREES)), copy.deepcopy(rng.choice(PAIRS))
        if rng.random() < 0.3:
            steps = Lazy(len(steps), lambda s=steps: s)  # type: ignore[assignment]
        calls.append(Call(n, "vmap", "loss", None, levels=LEVELS, steps=steps, trees=trees,
                          pairs=pairs))
    return Session(calls=calls, jax_version="0.0")


def _no_repeats(cells: list) -> tuple[list[int], list[int]]:
    """_repeats finding none: every call's steps keyed on their own."""
    return list(range(len(cells))), list(range(sum(map(len, cells))))


@pytest.mark.parametrize("seed", range(30))
def test_repeats_write_the_bytes_of_every_call_converted_alone(seed, monkeypatch):
    session = _loop_session(random.Random(seed))
    text = session.to_json_text()
    assert dump.loads(text).calls == session.calls
    monkeypatch.setattr(_step_shapes, "_repeats", _no_repeats)
    monkeypatch.setattr(_layout, "repeated_parts", lambda types, version: frozenset())
    assert session.to_json_text() == text


def test_a_call_is_compared_with_the_latest_of_its_length_else_the_latest():
    a = (Step(0, 0, "sin"), Step(1, 0, "cos", cause=0), Step(2, 0, "tan"))
    b = a[:2] + (Step(2, 0, "exp"),)  # a's, but its last step
    c = copy.deepcopy(a[:2])  # shorter: compared with b, the latest call, up to its end
    roots, origin = _step_shapes._repeats([a, copy.deepcopy(a), b, c, (), ()])
    assert roots == [0, 0, 2, 3, 4, 4]  # the second call is the first's again; so are ()s
    # the steps of the calls with their own arrays (a, b, c): each its own position or
    # that of the step it equals
    assert origin == [0, 1, 2, 0, 1, 5, 0, 1]


def test_repeated_parts_are_one_array_in_the_data():
    steps = (Step(0, 0, "sin"), Step(1, 0, "cos"))
    session = Session(calls=[Call(n, "jit", "f", None, levels=LEVELS[:1],
                                  steps=copy.deepcopy(steps), trees=copy.deepcopy(TREES[2]))
                             for n in range(3)])
    data = session.to_json_dict()
    for name in ("steps", "trees"):
        at = data["fields"]["Call"].index(name)
        first, *rest = [call[at] for call in data["calls"]]
        assert all(part is first for part in rest)


def test_a_save_leaves_nothing_for_the_cyclic_gc():
    """The writer's caches refer back to it; it lets go of them when done (else the
    collector would walk them: a quarter of a second after a million-step save)."""
    session = _loop_session(random.Random(5))
    session.to_json_text()
    gc.collect()
    gc.disable()
    try:
        session.to_json_text()
        assert gc.collect() == 0
    finally:
        gc.enable()
