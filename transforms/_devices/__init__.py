"""Where a call's arrays sit on devices: layouts of multi-device arrays (jax.sharding's
public API), collectives parsed from the optimised HLO text, and the hook a call holds for them
(sharding_hook)."""
from __future__ import annotations

from ._call_shardings import sharding_hook as sharding_hook
from ._sharding import process_info as process_info, with_compiled_view as with_compiled_view
