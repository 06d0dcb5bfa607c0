"""Where a call's arrays sit on devices: layouts of multi-device arrays (jax.sharding's
public API), collectives parsed from the optimised HLO text, and what a call records of them
(CallShardings)."""
from __future__ import annotations

from ._call_shardings import CallShardings as CallShardings, CallTreesView as CallTreesView
from ._sharding import process_info as process_info, with_compiled_view as with_compiled_view
