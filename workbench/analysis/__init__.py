"""Readings of recorded sessions as plain data, shared by every reader (the command, the TUI,
the exporter): what a call's records say (failing steps, steps per level, the default pair of
stages), the processes of a multi-process run (merged, one Session each, who owns which
device, where they diverge), what changed between two sessions, and the jit compiles per
function with why each function traced again."""
from __future__ import annotations

from ._call_index import (
    UNKNOWN_LEVEL as UNKNOWN_LEVEL,
    default_stage_pair as default_stage_pair,
    failing_steps as failing_steps,
    function_program as function_program,
    no_stages_reason as no_stages_reason,
    phased as phased,
    steps_by_level as steps_by_level,
)
from ._call_label import (
    TRANSFORMATIONS as TRANSFORMATIONS,
    call_label as call_label,
    composition as composition,
    level_note as level_note,
    level_title as level_title,
)
from ._compiles import (
    CompileChange as CompileChange,
    CompileGroup as CompileGroup,
    CompileTotals as CompileTotals,
    compile_changes as compile_changes,
    compile_groups as compile_groups,
    compile_totals as compile_totals,
    reason_lines as reason_lines,
    short_place as short_place,
)
from ._empty import nothing_recorded as nothing_recorded
from ._process_merge import (
    PROCESS_FILE as PROCESS_FILE,
    Divergence as Divergence,
    crossing as crossing,
    group_processes as group_processes,
    load_run as load_run,
    merge as merge,
    owners as owners,
    process_label as process_label,
    process_session as process_session,
    process_sessions as process_sessions,
    run_divergence as run_divergence,
)
from ._session_diff import diff_sessions as diff_sessions, format_diff as format_diff
from ._step_groups import (
    ScopeRun as ScopeRun,
    library_body as library_body,
    library_operation as library_operation,
    scope_runs as scope_runs,
    scope_totals as scope_totals,
    step_group as step_group,
    step_label as step_label,
)
from ._values import (
    StepValue as StepValue,
    eqn_values as eqn_values,
    stage_values as stage_values,
    step_values as step_values,
    values_text as values_text,
)
