"""Recording a session: record() and its SessionRecorder, each call while it runs
(CallBuilder: its levels and steps, trees, shardings and stages), its levels (LevelState,
run_level), and opening calls and levels for the wrappers (invoke, level_entry). Each
subject in a module of its own:

  _record        record(), the block
  _recorder      SessionRecorder: a session's finished calls; stages shared by signature
  _step_bound    StepBound: a recording kept to about max_steps steps
  _summaries     StepSummaries: steps' params as text, sub-jaxprs as records (every session's);
                 the functions of JAX's the user jitted (note_user_jit)
  _levels        LevelState, RuleSpec, run_level; LevelCall, what a level asks of its call
  _call_steps    CallSteps: a call's levels, steps (the step core) and errors
  _call_stages   CallStages: a call's stage capture (plan, watch, capture)
  _call          CallBuilder: one call while it runs, made of the above; begin_call
  _calls         invoke, level_entry: what the wrappers call
  _jit_values    a top-level jit's concrete arguments, summarised before its trace
  _compiles      every trace, lowering and compile of a jit in a block (CompileLog)
"""
from __future__ import annotations

from ._call import CallBuilder as CallBuilder, begin_call as begin_call, state as state
from ._call_stages import note_jit_arguments as note_jit_arguments
from ._calls import (
    build as build,
    invoke as invoke,
    level_entry as level_entry,
    open_call_level as open_call_level,
    open_invoke as open_invoke,
    open_level as open_level,
    record_failed_call as record_failed_call,
)
from ._compiles import (
    compile_key as compile_key,
    defined_at as defined_at,
    new_function_id as new_function_id,
    trace_signature as trace_signature,
)
from ._jit_values import (
    JitReplay as JitReplay,
    note_jit_values as note_jit_values,
    take_jit_values as take_jit_values,
    with_argument_values as with_argument_values,
)
from ._levels import LevelState as LevelState
from ._record import record as record
from ._recorder import SessionRecorder as SessionRecorder
from ._summaries import note_user_jit as note_user_jit
