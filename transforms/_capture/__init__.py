"""The live side of recording, below every recording layer: what a wrapper was built from
(TransformSpec, Options), the recording state (open record() blocks, the call and levels in
this context), live values described as records (Describer), the user's source line, each
primitive's params as text, and the step core each level's RecordingTrace calls (C or
Python). The recording Trace itself is JAX's side of the door (transforms._jax). One subject
a module:

  _spec          TransformSpec, Options, spec_of, chain_of: what a wrapper was built from
  _signatures    a function's parameters, once per function (through our wrappers)
  _state         RecordingState: open record() blocks, the call and levels in this context
  _describe      Describer: one call's live values as shared records
  _values        concrete values as records, leaf values, aval text
  _jaxpr_records jaxprs as records
  _locations     the user's source line (the step core's frame tables)
  _lost          what the recorder could not record, as a Diagnostic on the call
  _param_rules   each primitive's params as text, one rule per primitive
  _sharding_text a sharding, a mesh and a PartitionSpec as text
  _step_core     the step core (PyStepCore, or the C one of _core.c)
  _core_types    the C core's callables, or their Python twins: which Bracket records
  _jit_call      what a transforms.jit object's call runs through (the C core's JitCall, or its twin)
"""
from __future__ import annotations

from .._common import use_bracket_class as _use_bracket_class  # noqa: E402
from ._core_types import bracket_class as _bracket_class  # noqa: E402
from ._describe import Describer as Describer
from ._jaxpr_records import jaxpr_record as jaxpr_record
from ._jit_call import PyJitCall as PyJitCall, jit_call_class as jit_call_class
from ._locations import (
    location_of as location_of,
    returned_location as returned_location,
    set_user_code as set_user_code,
    traceback_location as traceback_location,
    user_location as user_location,
)
from ._lost import (
    NoteLost as NoteLost,
    lost_diagnostic as lost_diagnostic,
)
from ._param_rules import jit_pairs_key as jit_pairs_key, summarize_params as summarize_params
from ._sharding_text import mesh_text as mesh_text, sharding_text as sharding_text, spec_text as spec_text
from ._signatures import (
    argument_names as argument_names,
    parameter_names as parameter_names,
    signature_holder as signature_holder,
    signature_parameters as signature_parameters,
)
from ._spec import (
    Options as Options,
    TransformSpec as TransformSpec,
    Wrapper as Wrapper,
    chain_of as chain_of,
    function_name as function_name,
    spec_of as spec_of,
)
from ._state import (
    ONLY_BLOCK as ONLY_BLOCK,
    OPEN_BLOCKS as OPEN_BLOCKS,
    SINGLE_BLOCK as SINGLE_BLOCK,
    RecordingState as RecordingState,
    RetraceRefused as RetraceRefused,
    active_session as active_session,
    any_block_open as any_block_open,
    check_retrace as check_retrace,
    count_if_unrecorded as count_if_unrecorded,
    enter_block as enter_block,
    entering_frame as entering_frame,
    leave_block as leave_block,
    note_jit_traced as note_jit_traced,
    open_levels as open_levels,
    recording_off as recording_off,
    refusing_retrace as refusing_retrace,
    reset_block_key as reset_block_key,
    retrace_refused as retrace_refused,
    retracing_now as retracing_now,
    retracing_to_record as retracing_to_record,
    state as state,
)
from ._step_core import (
    ERROR as ERROR,
    INLINE as INLINE,
    INLINE_FLAG as INLINE_FLAG,
    KIND as KIND,
    LEVEL as LEVEL,
    LIBRARY_FLAG as LIBRARY_FLAG,
    NONE as NONE,
    OUTPUTS as OUTPUTS,
    PARAMS as PARAMS,
    PRIMITIVE as PRIMITIVE,
    RUNNING as RUNNING,
    SCOPE as SCOPE,
    STRIDE as STRIDE,
    built_steps as built_steps,
    step_core_class as step_core_class,
    steps_from as steps_from,
)
from ._value_summary import (
    PRINTED_SIZE as PRINTED_SIZE,
    leaf_facts as leaf_facts,
    summarize_array as summarize_array,
)
from ._values import aval_text as aval_text, describe_concrete as describe_concrete, leaf_value as leaf_value

_use_bracket_class(_bracket_class)
