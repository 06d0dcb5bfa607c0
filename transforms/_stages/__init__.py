"""Stages: the jaxprs before and after each transformation of a call, rebuilt from what the
call bound (its tapes) by JAX's own transformations, never by running the user's function
again; jit's lowered and compiled stages; growth."""
from __future__ import annotations

from ._autodiff import differentiated as differentiated
from ._chain import PendingStages as PendingStages, capture as capture, growth as growth
from ._plan import (
    StagePlan as StagePlan,
    Untraced as Untraced,
    abstract_point as abstract_point,
    concrete_shardings as concrete_shardings,
    mesh_context as mesh_context,
    sharded_point as sharded_point,
    signature as signature,
)
from ._records import (
    failed_capture as failed_capture,
    forward_name as forward_name,
    keeping_jaxprs as keeping_jaxprs,
)
from ._tape import TapePair as TapePair
