"""The one door to JAX's internals: the recording Trace, and every fact about JAX that a JAX
release may change (internal names, object layouts, parameter layouts), each behind a named
function. tests/test_jax_door.py fails when such a fact appears outside this package, and
tests each function on both JAX versions. Other modules import this package (`from . import
_jax as _i`), never its parts; each part holds one subject:

  _base          JAX's classes handed out, the package and JAX folders, our exclusions
  _trace         RecordingTrace, the table of Trace methods, install
  _tracers       what a tracer holds, its trace, a jit tracer's variable
  _sources       name stacks, source info, binding at a recorded place (staged_at)
  _params        primitives' parameter layouts (scan, while, calls, jit's names, inline flag
                 and summary key)
  _custom_rules  custom_jvp/custom_vjp rule functions: bound again, identified, wrapped
  _tracebacks    traceback filtering as JAX does it, what JAX's errors leave in frames
  _replay       recorded jaxprs evaluated again (after the call): callbacks, one equation at a time
  _compiles     jit's monitoring events (trace, lower, compile) and its cache key's parts
  _api       JAX's own transformations (jax_own), the objects vjp/linearize return,
                 jit's cache key and cache misses, function names, the legacy mesh

A RecordingTrace wraps the trace JAX is running (its `parent`) and is made the
current trace while user code runs at that level. Every `process_*` call is
recorded, then forwarded to the parent unchanged, so JAX computes exactly what
it would have computed. JAX's own traces bind their inner work on their
`parent_trace`, which is one of our recorders when transforms nest, so every
level is seen.

Everything here is public surface (`jax.core`, `jax.extend.*`) except where a
comment says `# NB: jax._src`.
"""
from __future__ import annotations

from ._api import (
    _RECORDING_CACHE_KEY as _RECORDING_CACHE_KEY,
    JaxTransforms as JaxTransforms,
    _MissSignature as _MissSignature,
    cache_miss_signature as cache_miss_signature,
    jax_function_name as jax_function_name,
    jax_own as jax_own,
    jit_cache_key as jit_cache_key,
    jit_disabled as jit_disabled,
    legacy_mesh as legacy_mesh,
    swap_linear_function as swap_linear_function,
    swap_vjp_function as swap_vjp_function,
)
from ._base import (
    JAX_DIR as JAX_DIR,
    PACKAGE_DIR as PACKAGE_DIR,
    ClosedJaxpr as ClosedJaxpr,
    Jaxpr as Jaxpr,
    Trace as Trace,
    Tracer as Tracer,
    set_current_trace as set_current_trace,
    take_current_trace as take_current_trace,
)
from ._compiles import (
    COMPILE_EVENTS as COMPILE_EVENTS,
    LeafKey as LeafKey,
    cache_config as cache_config,
    compiling_placements as compiling_placements,
    event_function as event_function,
    event_phase as event_phase,
    jit_cache_size as jit_cache_size,
    key_leaves as key_leaves,
    listen_to_compiles as listen_to_compiles,
    path_text as path_text,
    tree_def as tree_def,
    tree_text as tree_text,
)
from ._custom_rules import (
    bind_with_rules as bind_with_rules,
    custom_call_name as custom_call_name,
    innermost_function as innermost_function,
    is_defjvps_rule as is_defjvps_rule,
    jaxpr_body as jaxpr_body,
    rewound as rewound,
    rule_identity as rule_identity,
    wrapped_like as wrapped_like,
    wrapped_python_function as wrapped_python_function,
)
from ._params import (
    INLINE_ENUM_NAME as INLINE_ENUM_NAME,
    JIT_PRIMITIVE_NAMES as JIT_PRIMITIVE_NAMES,
    JIT_SUMMARY_PARAMS as JIT_SUMMARY_PARAMS,
    PRIMITIVE_NAME_ATTRIBUTE as PRIMITIVE_NAME_ATTRIBUTE,
    call_consts as call_consts,
    custom_vjp_out_count as custom_vjp_out_count,
    inline_token as inline_token,
    is_inline_jit_params as is_inline_jit_params,
    is_library_jit_params as is_library_jit_params,
    jax_function_source as jax_function_source,
    jit_function_source as jit_function_source,
    jit_summary_key as jit_summary_key,
    scan_groups as scan_groups,
    while_consts as while_consts,
)
from ._replay import (
    calls_back as calls_back,
    consts_of as consts_of,
    eqn_facts as eqn_facts,
    eval_equations as eval_equations,
    inner_call as inner_call,
    inner_jaxprs as inner_jaxprs,
    input_types as input_types,
    values_by_var as values_by_var,
    watching_vars as watching_vars,
    with_consts as with_consts,
)
from ._sources import (
    NAME_STACK_PLACE as NAME_STACK_PLACE,
    _name_stack_facts as _name_stack_facts,
    _source_context as _source_context,
    context_traceback as context_traceback,
    current_name_stack as current_name_stack,
    joined_scope as joined_scope,
    name_depth as name_depth,
    name_stack_facts as name_stack_facts,
    source_frame as source_frame,
    source_now as source_now,
    staged_at as staged_at,
    traceback_frames as traceback_frames,
)
from ._trace import (
    TRACE_METHODS as TRACE_METHODS,
    UNKNOWN_TRACE_METHODS as UNKNOWN_TRACE_METHODS,
    RecordingTrace as RecordingTrace,
    _forward_unknown_base_methods as _forward_unknown_base_methods,
    _is_inlinable_jit as _is_inlinable_jit,
    _record_rule as _record_rule,
    _recording_forwarder as _recording_forwarder,
    binding_params as binding_params,
    current_trace as current_trace,
    enclosing_traces as enclosing_traces,
    eval_jaxpr as eval_jaxpr,
    install as install,
    trace_base_names as trace_base_names,
    trace_has_ended as trace_has_ended,
    traced_for as traced_for,
)
from ._tracebacks import (
    _MISMATCH_SITES as _MISMATCH_SITES,
    MISMATCH_KINDS as MISMATCH_KINDS,
    FilteredRun as FilteredRun,
    MismatchSides as MismatchSides,
    _filter_as_jax_would as _filter_as_jax_would,
    _frames as _frames,
    _hidden_as_jax_would as _hidden_as_jax_would,
    _is_ours as _is_ours,
    _MismatchSite as _MismatchSite,
    _walk as _walk,
    _without_our_frames as _without_our_frames,
    api_boundary as api_boundary,
    ended_tracer_in_traceback as ended_tracer_in_traceback,
    mismatch_sides as mismatch_sides,
    public_error_name as public_error_name,
)
from ._tracers import (
    TRACER_PART_NAMES as TRACER_PART_NAMES,
    _has_attrs as _has_attrs,
    _Var as _Var,
    autodiff_parts as autodiff_parts,
    batched_parts as batched_parts,
    is_variable as is_variable,
    staged_var as staged_var,
    trace_key as trace_key,
    trace_of as trace_of,
    traced_avals as traced_avals,
    tracer_shape as tracer_shape,
    tracer_shapes as tracer_shapes,
)
