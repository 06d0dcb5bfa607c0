"""What the navigator's search and filters look in: each step's search text, made once per
distinct text (SearchTexts), and the filter `p:sin l:grad#2 is:error words` (StepFilter)."""
from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Protocol

from transforms.model import Call, Step

from .texts import step_haystack, step_title

__all__ = ["IndexedCall", "SearchTexts", "StepFilter"]


class IndexedCall(Protocol):
    """What SearchTexts reads of a call's index (navigation.CallIndex)."""
    call: Call

    def label(self, level: int | None) -> str: ...


class SearchTexts:
    """What search looks in, per step: `ids[pos]` indexes `texts`. Steps that differ only
    in their index share one text, found by the identity of their parts (a loaded dump
    shares its params and source records between steps). Built in slices (`build`), so
    the TUI can make it in idle moments before the first search needs it."""

    SLICE = 5_000  # steps per slice: a few milliseconds

    def __init__(self, index: IndexedCall):
        self.index = index
        self._found: dict[tuple, int] = {}
        self.texts: list[str] = []
        self.ids = array("l")

    @property
    def done(self) -> bool:
        return len(self.ids) >= len(self.index.call.steps)

    def build(self, steps: int | None = None) -> bool:
        """Index the next `steps` steps (all of them by default); whether it is done."""
        call, found, texts, ids = self.index.call, self._found, self.texts, self.ids
        start = len(ids)
        end = len(call.steps) if steps is None else min(len(call.steps), start + steps)
        label = self.index.label
        for step in call.steps[start:end]:
            key = (step.primitive, id(step.params), id(step.source), step.kind, step.phase,
                   step.level, step.name_stack, step.error)
            t = found.get(key)
            if t is None:
                t = found[key] = len(texts)
                texts.append(step_haystack(step, label(step.level)))
            ids.append(t)
        return self.done

    def hits(self, q: str) -> bytes:
        """A flag per distinct text: whether it holds q (lower-cased already)."""
        self.build()
        return bytes(q in text for text in self.texts)


@dataclass(frozen=True)
class StepFilter:
    """`p:sin l:grad#2 is:error some text`: every term must match."""
    primitives: tuple[str, ...] = ()
    levels: tuple[str, ...] = ()
    words: tuple[str, ...] = ()
    errors_only: bool = False

    @classmethod
    def parse(cls, text: str) -> StepFilter:
        prims, levels, words, errors = [], [], [], False
        for term in text.lower().split():
            key, _, value = term.partition(":")
            if value and key in ("p", "prim", "primitive"):
                prims.append(value)
            elif value and key in ("l", "level"):
                levels.append(value)
            elif term in ("is:error", "is:failed", "!"):
                errors = True
            else:
                words.append(term)
        return cls(tuple(prims), tuple(levels), tuple(words), errors)

    def matches_body(self, body: tuple[str, ...]) -> bool:
        """Whether a library body has an equation of a `p:` primitive."""
        return any(p in eqn.lower() for p in self.primitives for eqn in body)

    @property
    def empty(self) -> bool:
        return not (self.primitives or self.levels or self.words or self.errors_only)

    def matches(self, step: Step, label: str, failing: bool, body: tuple[str, ...] = ()) -> bool:
        """`body`: the step's recorded library body: `p:gather` finds jnp.take's step."""
        if self.errors_only and not failing:
            return False
        if self.primitives:
            title = step_title(step).lower()
            if not any(p in title for p in self.primitives) and not self.matches_body(body):
                return False
        if self.levels:
            lab = label.lower()
            if not all(lv in lab for lv in self.levels):
                return False
        if self.words:
            hay = step_haystack(step, label)
            if not all(w in hay for w in self.words):
                return False
        return True
