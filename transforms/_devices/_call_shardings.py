"""What a call records about devices (CallShardings): layouts of multi-device arrays.

Inputs' layouts when the call starts, outputs' (and gradients', named after the inputs
they belong to) when it ends, or for a jit the executable's. Guarded like CallTrees: a
fault of ours never fails a call; what it lost is noted on the call (`note_lost`).
"""
from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

from .._capture import NoteLost, Options
from ..model import TreeRecord, kind_of
from . import _sharding

__all__ = ["CallShardings", "CallTreesView"]


class CallTreesView(Protocol):
    """What a call's shardings read of its trees (_trees' CallTrees, a layer above): the
    input trees' names, and the kind whose outputs hold the gradients."""

    @property
    def inputs(self) -> Sequence[TreeRecord]: ...

    @property
    def transform(self) -> str: ...

    @property
    def options(self) -> Options: ...

    def note_lost(self, what: str, error: BaseException) -> None: ...


class CallShardings:
    """What a call records about devices: layouts of multi-device arrays (`found`).

    Guarded like CallTrees: a fault of ours never fails a call; the trees note what it lost.
    Single-device calls pay one `device_set` check per concrete leaf.
    """
    __slots__ = ("trees", "found")

    def __init__(self, trees: CallTreesView, leaves: list, args: tuple, kwargs: dict):
        self.trees = trees
        self.found: tuple = self._inputs(leaves, args, kwargs)

    def _inputs(self, leaves: list, args: tuple, kwargs: dict) -> tuple:
        try:
            if not any(map(_sharding.is_multi_device, leaves)):
                return ()
            names = [t.name for t in self.trees.inputs if t.argnum is not None]
            return tuple(_sharding.call_input_shardings(args, kwargs, names))
        except Exception as e:  # a fault of ours must not fail the user's call: noted
            self.trees.note_lost("reading the inputs' shardings", e)
            return ()

    def note_outputs(self, outputs: Any) -> None:
        """The outputs' layouts, gradients named after their inputs."""
        self.found += self._outputs(outputs)

    def _outputs(self, outputs: Any) -> tuple:
        try:
            if not _sharding.any_multi_device(outputs):
                return ()
            found = _sharding.call_output_shardings(outputs, _gradient_prefix(self.trees))
            return _gradients_named(self.trees, found)
        except Exception as e:  # a fault of ours must not fail the user's call: noted
            self.trees.note_lost("reading the outputs' shardings", e)
            return ()

    def of_call(self, stages: tuple) -> tuple:
        """Concrete arrays' layouts; for a jit (traced arguments) its executable's."""
        if not self.found and not _compiled_layouts(stages):
            return ()  # nothing to name (always so with stages off)
        return self.of_stages()(stages, self.trees.note_lost)

    def of_stages(self) -> Callable[[tuple, NoteLost], tuple]:
        """of_call of stages that come later, holding the names it needs, not the call:
        what it loses is noted where its caller says (the call's record is made by then)."""
        if self.found:
            known = self.found
            return lambda stages, note_lost: known
        try:
            names = {t.argnum: t.name for t in self.trees.inputs if t.argnum is not None}
            prefix = _gradient_prefix(self.trees)
            argnums = self.trees.options.argnums
        except Exception as e:  # a fault of ours must not fail the user's call: noted
            self.trees.note_lost("naming the executable's shardings", e)
            return lambda stages, note_lost: ()

        def named(stages: tuple, note_lost: NoteLost) -> tuple:
            try:
                compiled = _compiled_layouts(stages)
                if not compiled:
                    return ()
                found = _sharding.named_for_call(compiled[-1].shardings, names, prefix)
                return _sharding.gradient_names(found, prefix, argnums, names)
            except Exception as e:  # a fault of ours must not fail the user's call: noted
                note_lost("reading the executable's shardings", e)
                return ()
        return named


def _compiled_layouts(stages: tuple) -> list:
    """The compiled stages that hold layouts (a jit's executable's)."""
    return [s for s in stages if s.role == "hlo" and s.shardings]


# NB: the transform whose outputs hold gradients is the trees' kind: the call's, or for a jit
# of grad, grad's (CallTrees sees through transparent kinds).
def _gradient_prefix(trees: CallTreesView) -> str | None:
    """Where the gradients sit in the call's outputs."""
    return kind_of(trees.transform).gradient_prefix(trees.options.has_aux)


def _gradients_named(trees: CallTreesView, records: Any) -> tuple:
    names = {t.argnum: t.name for t in trees.inputs if t.argnum is not None}
    return _sharding.gradient_names(records, _gradient_prefix(trees), trees.options.argnums, names)
