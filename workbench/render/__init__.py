"""Rich renderables over the recorded data model; each reads records, nothing live."""
from .stages import ChainView as ChainView
from .stages import CompiledView as CompiledView
from .stages import DiffView as DiffView
from .stages import GrowthChart as GrowthChart
from .stages import GrowthPanel as GrowthPanel
from .stages import GrowthView as GrowthView
from .stages import JaxprView as JaxprView
from .stages import MetricsView as MetricsView
from .stages import StageStats as StageStats
from .stages import StageView as StageView
from .stages import fold_jaxpr as fold_jaxpr
from .stages import growing_primitive as growing_primitive

__all__ = ["ChainView", "CompiledView", "DiffView", "GrowthChart", "GrowthPanel", "GrowthView",
           "JaxprView", "MetricsView", "StageStats", "StageView", "fold_jaxpr",
           "growing_primitive"]
