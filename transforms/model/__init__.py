"""The recorded data model, and everything that reads or writes it; imports no JAX or numpy.

Records: Session -> Call (one outermost transformed invocation) -> Level (one transformation
applied, `vmap#1/grad#2`) -> Step (a primitive or an event as one level saw it), with the
call's stages, trees, errors and devices. Plain, frozen, typed, JSON-able.

    load(path) / loads(text) / Session.save(path)   dumps (schema version 4; 1-3 still read)
    diff_stages(a, b)                                two stages compared, equation by equation
    kind_of(name)                                    the table of transformation kinds
    session_schema() / schema_problems(data)         the dump's JSON Schema and a validator
    register_display(display)                        how a notebook shows the records
"""
from __future__ import annotations

from ._compile_reasons import (
    REASON_KINDS as REASON_KINDS,
    ReasonKind as ReasonKind,
    compile_reasons as compile_reasons,
    explain as explain,
    hint as hint,
    jax_says as jax_says,
    miss_reasons as miss_reasons,
    same_function as same_function,
)
from ._compile_records import (
    CompileKey as CompileKey,
    CompileRecord as CompileRecord,
    KeyLeaf as KeyLeaf,
    MissReason as MissReason,
    StaticKey as StaticKey,
)
from ._device_records import (
    CollectiveRecord as CollectiveRecord,
    DeviceGroup as DeviceGroup,
    DeviceRecord as DeviceRecord,
    ProcessInfo as ProcessInfo,
    ShardBlock as ShardBlock,
    ShardingRecord as ShardingRecord,
)
from ._diff import (
    AvalChange as AvalChange,
    EqnChange as EqnChange,
    PrimitiveDelta as PrimitiveDelta,
    StageDiff as StageDiff,
    align as align,
    default_pair as default_pair,
    diff_stages as diff_stages,
    find_stage as find_stage,
    short_aval as short_aval,
    stage_function as stage_function,
    stage_groups as stage_groups,
    whole_program as whole_program,
)
from ._display import (
    ENTRY_POINT_GROUP as ENTRY_POINT_GROUP,
    Display as Display,
    Displayed as Displayed,
    register_display as register_display,
)
from ._files import (
    new_file_mode as new_file_mode,
    special_file_kind as special_file_kind,
    write_atomically as write_atomically,
)
from ._jaxpr_text import eqn_line_spans as eqn_line_spans, summary_frame as summary_frame
from ._journal import (
    JOURNAL_SUFFIX as JOURNAL_SUFFIX,
    PROCESS_ENDED as PROCESS_ENDED,
    Journal as Journal,
    Recovered as Recovered,
    journal_of as journal_of,
)
from ._kinds import (
    CONCRETE_VALUE_KINDS as CONCRETE_VALUE_KINDS,
    KINDS as KINDS,
    PUBLIC_KINDS as PUBLIC_KINDS,
    TRACES as TRACES,
    TRACES_BY_CLASS as TRACES_BY_CLASS,
    TRACES_BY_TRACER as TRACES_BY_TRACER,
    Derivative as Derivative,
    TraceKind as TraceKind,
    TransformKind as TransformKind,
    kind_of as kind_of,
    tracer_kind as tracer_kind,
)
from ._layout import SCHEMA_NAME as SCHEMA_NAME, SCHEMA_VERSION as SCHEMA_VERSION, gc_paused as gc_paused
from ._lazy import Lazy as Lazy, is_decoded as is_decoded
from ._level_rows import LevelRow as LevelRow, level_rows as level_rows
from ._load import (
    LAZY_FIELDS as LAZY_FIELDS,
    SessionLoadError as SessionLoadError,
    load as load,
    loads as loads,
    read_journal as read_journal,
)
from ._records import (
    Call as Call,
    EqnRecord as EqnRecord,
    ErrorRecord as ErrorRecord,
    Growth as Growth,
    GrowthPoint as GrowthPoint,
    GrowthSeries as GrowthSeries,
    JaxprRecord as JaxprRecord,
    Level as Level,
    Metric as Metric,
    NonFiniteFound as NonFiniteFound,
    NonFiniteRecord as NonFiniteRecord,
    PrimitiveCount as PrimitiveCount,
    Stage as Stage,
    StageValues as StageValues,
    Step as Step,
    SubJaxprRecord as SubJaxprRecord,
    ValueRecord as ValueRecord,
    histogram_count as histogram_count,
    operation_name as operation_name,
)
from ._schema import (
    SCHEMA_FILE as SCHEMA_FILE,
    schema_problems as schema_problems,
    schema_text as schema_text,
    session_schema as session_schema,
)
from ._session import (
    NOTHING_RECORDED as NOTHING_RECORDED,
    NOTHING_RECORDED_IN_RUN as NOTHING_RECORDED_IN_RUN,
    RECORD_TYPES as RECORD_TYPES,
    NothingRecordedWarning as NothingRecordedWarning,
    ProcessRecord as ProcessRecord,
    Session as Session,
)
from ._source_location import SourceLocation as SourceLocation
from ._tree_records import (
    LOST as LOST,
    Diagnostic as Diagnostic,
    PairRow as PairRow,
    TreeNode as TreeNode,
    TreePair as TreePair,
    TreeRecord as TreeRecord,
    ValueSummary as ValueSummary,
)
