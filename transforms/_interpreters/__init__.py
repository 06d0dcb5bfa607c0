"""The one door to JAX's internals: the recording Trace, and every fact about JAX that a JAX
release may change (internal names, object layouts, parameter layouts), each behind a named
function. tests/test_jax_door.py fails when such a fact appears outside this package, and
tests each function on both JAX versions. Other modules import this package (`from . import
_interpreters as _i`), never its parts; each part holds one subject:

  _base          JAX's classes handed out, the package and JAX folders, our exclusions
  _trace         RecordingTrace, the table of Trace methods, install
  _tracers       what a tracer holds, its trace, a jit tracer's variable
  _sources       name stacks, source info, binding at a recorded place (staged_at)
  _params        primitives' parameter layouts (scan, while, calls, jit's inline flag)
  _custom_rules  custom_jvp/custom_vjp rule functions: bound again, identified, wrapped
  _tracebacks    traceback filtering as JAX does it, what JAX's errors leave in frames
  _jax_api       JAX's own transformations (jax_own), the objects vjp/linearize return,
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

from ._base import (
    JAX_DIR as JAX_DIR,
)
from ._base import (
    PACKAGE_DIR as PACKAGE_DIR,
)
from ._base import (
    ClosedJaxpr as ClosedJaxpr,
)
from ._base import (
    Jaxpr as Jaxpr,
)
from ._base import (
    Trace as Trace,
)
from ._base import (
    Tracer as Tracer,
)
from ._base import (
    set_current_trace as set_current_trace,
)
from ._base import (
    take_current_trace as take_current_trace,
)
from ._custom_rules import (
    bind_with_rules as bind_with_rules,
)
from ._custom_rules import (
    rewound as rewound,
)
from ._custom_rules import (
    rule_identity as rule_identity,
)
from ._custom_rules import (
    wrapped_like as wrapped_like,
)
from ._custom_rules import (
    wrapped_python_function as wrapped_python_function,
)
from ._jax_api import (
    _RECORDING_CACHE_KEY as _RECORDING_CACHE_KEY,
)
from ._jax_api import (
    JaxTransforms as JaxTransforms,
)
from ._jax_api import (
    _MissSignature as _MissSignature,
)
from ._jax_api import (
    cache_miss_signature as cache_miss_signature,
)
from ._jax_api import (
    jax_function_name as jax_function_name,
)
from ._jax_api import (
    jax_own as jax_own,
)
from ._jax_api import (
    jit_cache_key as jit_cache_key,
)
from ._jax_api import (
    legacy_mesh as legacy_mesh,
)
from ._jax_api import (
    swap_linear_function as swap_linear_function,
)
from ._jax_api import (
    swap_vjp_function as swap_vjp_function,
)
from ._params import (
    INLINE_ENUM_NAME as INLINE_ENUM_NAME,
)
from ._params import (
    call_consts as call_consts,
)
from ._params import (
    custom_vjp_out_count as custom_vjp_out_count,
)
from ._params import (
    inline_token as inline_token,
)
from ._params import (
    is_inline_jit_params as is_inline_jit_params,
)
from ._params import (
    scan_groups as scan_groups,
)
from ._params import (
    while_consts as while_consts,
)
from ._sources import (
    NAME_STACK_PLACE as NAME_STACK_PLACE,
)
from ._sources import (
    _name_stack_texts as _name_stack_texts,
)
from ._sources import (
    _source_context as _source_context,
)
from ._sources import (
    context_traceback as context_traceback,
)
from ._sources import (
    name_depth as name_depth,
)
from ._sources import (
    name_stack as name_stack,
)
from ._sources import (
    source_frame as source_frame,
)
from ._sources import (
    source_now as source_now,
)
from ._sources import (
    staged_at as staged_at,
)
from ._sources import (
    traceback_frames as traceback_frames,
)
from ._trace import (
    TRACE_METHODS as TRACE_METHODS,
)
from ._trace import (
    UNKNOWN_TRACE_METHODS as UNKNOWN_TRACE_METHODS,
)
from ._trace import (
    RecordingTrace as RecordingTrace,
)
from ._trace import (
    _forward_unknown_base_methods as _forward_unknown_base_methods,
)
from ._trace import (
    _is_inlinable_jit as _is_inlinable_jit,
)
from ._trace import (
    _record_rule as _record_rule,
)
from ._trace import (
    _record_rule_body as _record_rule_body,
)
from ._trace import (
    _recording_forwarder as _recording_forwarder,
)
from ._trace import (
    current_trace as current_trace,
)
from ._trace import (
    enclosing_traces as enclosing_traces,
)
from ._trace import (
    eval_jaxpr as eval_jaxpr,
)
from ._trace import (
    install as install,
)
from ._trace import (
    trace_base_names as trace_base_names,
)
from ._trace import (
    trace_has_ended as trace_has_ended,
)
from ._tracebacks import (
    _MISMATCH_SITES as _MISMATCH_SITES,
)
from ._tracebacks import (
    MISMATCH_KINDS as MISMATCH_KINDS,
)
from ._tracebacks import (
    MismatchSides as MismatchSides,
)
from ._tracebacks import (
    _filter_as_jax_would as _filter_as_jax_would,
)
from ._tracebacks import (
    _frames as _frames,
)
from ._tracebacks import (
    _hidden_as_jax_would as _hidden_as_jax_would,
)
from ._tracebacks import (
    _is_ours as _is_ours,
)
from ._tracebacks import (
    _MismatchSite as _MismatchSite,
)
from ._tracebacks import (
    _walk as _walk,
)
from ._tracebacks import (
    _without_our_frames as _without_our_frames,
)
from ._tracebacks import (
    api_boundary as api_boundary,
)
from ._tracebacks import (
    ended_tracer_in_traceback as ended_tracer_in_traceback,
)
from ._tracebacks import (
    mismatch_sides as mismatch_sides,
)
from ._tracebacks import (
    public_error_name as public_error_name,
)
from ._tracers import (
    TRACER_PART_NAMES as TRACER_PART_NAMES,
)
from ._tracers import (
    _has_attrs as _has_attrs,
)
from ._tracers import (
    _Var as _Var,
)
from ._tracers import (
    autodiff_parts as autodiff_parts,
)
from ._tracers import (
    batched_parts as batched_parts,
)
from ._tracers import (
    staged_var as staged_var,
)
from ._tracers import (
    trace_of as trace_of,
)
from ._tracers import (
    tracer_shape as tracer_shape,
)
from ._tracers import (
    tracer_shapes as tracer_shapes,
)
