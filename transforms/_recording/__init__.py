"""Recording a session: record() and its SessionRecorder, each call while it runs
(CallBuilder), its levels (LevelState, run_level), and opening calls and levels for the
wrappers (invoke, level_entry)."""
from __future__ import annotations

from ._calls import (
    build as build,
    invoke as invoke,
    level_entry as level_entry,
    record_failed_call as record_failed_call,
    run_recorded_level as run_recorded_level,
)
from ._levels import LevelState as LevelState
from ._recorder import (
    CallBuilder as CallBuilder,
    SessionRecorder as SessionRecorder,
    note_jit_arguments as note_jit_arguments,
    record as record,
)
