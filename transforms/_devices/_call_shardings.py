"""What a CallBuilder records about devices: layouts of multi-device arrays.

Inputs' layouts when the call starts, outputs' (and gradients', named after the inputs
they belong to) when it ends, or for a jit the executable's. Guarded like CallTrees: a
fault of ours records nothing, never fails a call.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from .._capture import Options
from ..model import kind_of
from . import _sharding

if TYPE_CHECKING:
    from .._recording import CallBuilder

__all__ = ["sharding_hook"]


class _ShardingHook:
    """What a CallBuilder records about devices: layouts of multi-device arrays.

    Guarded like CallTrees: a fault of ours records nothing, never fails a call.
    Single-device calls pay one `device_set` check per concrete leaf.
    """

    @staticmethod
    def inputs(call: CallBuilder, leaves: list, args: tuple, kwargs: dict) -> tuple:
        try:
            if not any(map(_sharding.is_multi_device, leaves)):
                return ()
            names = [t.name for t in call.trees.inputs if t.argnum is not None]
            return tuple(_sharding.call_input_shardings(args, kwargs, names))
        except Exception:
            return ()

    @staticmethod
    def outputs(call: CallBuilder, outputs: Any) -> tuple:
        try:
            if not _sharding.any_multi_device(outputs):
                return ()
            found = _sharding.call_output_shardings(outputs, _gradient_prefix(call))
            return _gradients_named(call, found)
        except Exception:
            return ()

    @staticmethod
    def call_shardings(call: CallBuilder, stages: tuple) -> tuple:
        """Concrete arrays' layouts; for a jit (traced arguments) its executable's."""
        if not call.shardings and not _compiled_layouts(stages):
            return ()  # nothing to name (always so with stages off)
        return _ShardingHook.stage_shardings(call)(stages)

    @staticmethod
    def stage_shardings(call: CallBuilder) -> Callable[[tuple], tuple]:
        """call_shardings of stages that come later, holding the names it needs, not the call."""
        if call.shardings:
            known = call.shardings
            return lambda stages: known
        try:
            names = {t.argnum: t.name for t in call.trees.inputs if t.argnum is not None}
            prefix = _gradient_prefix(call)
            argnums = _derivative(call)[1].argnums
        except Exception:
            return lambda stages: ()

        def named(stages: tuple) -> tuple:
            try:
                compiled = _compiled_layouts(stages)
                if not compiled:
                    return ()
                found = _sharding.named_for_call(compiled[-1].shardings, names, prefix)
                return _sharding.gradient_names(found, prefix, argnums, names)
            except Exception:
                return ()
        return named


sharding_hook = _ShardingHook()


def _compiled_layouts(stages: tuple) -> list:
    """The compiled stages that hold layouts (a jit's executable's)."""
    return [s for s in stages if s.role == "hlo" and s.shardings]


def _derivative(call: CallBuilder) -> tuple[str, Options]:
    """The transform whose outputs hold gradients: the call's, or for a jit of grad, grad's
    (the kind whose trees the call has: CallTrees sees through transparent kinds)."""
    return call.trees.transform, call.trees.options


def _gradient_prefix(call: CallBuilder) -> str | None:
    """Where the gradients sit in the call's outputs."""
    transform, options = _derivative(call)
    return kind_of(transform).gradient_prefix(options.has_aux)


def _gradients_named(call: CallBuilder, records: Any) -> tuple:
    _, options = _derivative(call)
    names = {t.argnum: t.name for t in call.trees.inputs if t.argnum is not None}
    return _sharding.gradient_names(records, _gradient_prefix(call), options.argnums, names)
