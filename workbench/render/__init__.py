"""Rich renderables over the recorded data model; each reads records, nothing live."""
from .stages import (
           ChainView as ChainView,
           CompiledView as CompiledView,
           DiffView as DiffView,
           GrowthChart as GrowthChart,
           GrowthPanel as GrowthPanel,
           GrowthView as GrowthView,
           JaxprView as JaxprView,
           MetricsView as MetricsView,
           StageStats as StageStats,
           StageView as StageView,
           fold_jaxpr as fold_jaxpr,
           growing_primitive as growing_primitive,
)

__all__ = ["ChainView", "CompiledView", "DiffView", "GrowthChart", "GrowthPanel", "GrowthView",
           "JaxprView", "MetricsView", "StageStats", "StageView", "fold_jaxpr",
           "growing_primitive"]
