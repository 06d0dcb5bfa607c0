"""What each trace, lowering and compilation of a jit cost and why it happened: the records.

A `CompileRecord` is one trace of a jitted function (and the lowering and compilation
that followed it), or a lowering or compilation of a trace made earlier. Where the jit
was one of ours (transforms.jit, or jax.jit under `workbench run`), its cache key is
kept as data (`CompileKey`): each argument leaf with its key path, shape, dtype, weak
type and sharding, the static arguments' values, each argument's tree, the function
object's identity and the settings that key JAX's caches. A trace after the first of the
same function holds why it missed (`MissReason`s, against the nearest earlier key);
their words are the table in `_compile_reasons.py`.
"""
from __future__ import annotations

from dataclasses import dataclass

from ._source_location import SourceLocation

__all__ = ["CompileKey", "CompileRecord", "KeyLeaf", "MissReason", "StaticKey"]


@dataclass(frozen=True, slots=True)
class KeyLeaf:
    """One array argument leaf as JAX keys its caches on it."""
    path: str                 # in the user's terms: `batch['x']`, `lr`, `params[0].w`
    dtype: str                # float32
    shape: tuple[int, ...] = ()
    weak_type: bool = False   # a Python scalar (or what JAX made of one): weakly typed
    sharding: str = ""        # "" where none was given (the default placement)

    @property
    def aval(self) -> str:
        """As JAX prints it: float32[32,784]."""
        return f"{self.dtype}[{','.join(map(str, self.shape))}]"


@dataclass(frozen=True, slots=True)
class StaticKey:
    """A static argument (static_argnums / static_argnames): JAX keys on its value."""
    name: str
    value: str                # its repr, bounded
    type_name: str


@dataclass(frozen=True, slots=True)
class CompileKey:
    """What a jit's caches were keyed on for one trace, as data."""
    leaves: tuple[KeyLeaf, ...] = ()
    statics: tuple[StaticKey, ...] = ()
    trees: tuple[tuple[str, str], ...] = ()    # (argument, its PyTreeDef as JAX prints it)
    function_id: int = 0      # which function object (a number per object, within a session)
    config: tuple[tuple[str, str], ...] = ()  # the settings JAX's caches are keyed on


@dataclass(frozen=True, slots=True)
class MissReason:
    """Why a function was traced (or compiled) again: one difference from its nearest
    earlier key. `kind` names an entry of REASON_KINDS (its words and hint)."""
    kind: str
    subject: str = ""         # the argument, static argument, setting or function
    before: str = ""
    after: str = ""


@dataclass(frozen=True, slots=True)
class CompileRecord:
    """One trace of a jitted function and what followed it, or a later lowering/compile."""
    function: str             # JAX's name for it: `train_step`, `<lambda>`, `_reduce_sum`
    location: SourceLocation | None = None  # the user's line that called it
    defined_at: SourceLocation | None = None  # where the function was written, when known
    traced: bool = False
    lowered: bool = False
    compiled: bool = False
    trace_seconds: float = 0.0
    lower_seconds: float = 0.0
    compile_seconds: float = 0.0
    key: CompileKey | None = None  # None: a jit JAX ran for a library, seen by its events only
    reasons: tuple[MissReason, ...] = ()  # why it missed; () for a function's first trace
    number: int = 0           # how many traces of the same function came before it
    call_index: int | None = None  # the recorded call this trace became, when it did
    # Where each dynamic argument sat for its compilation (`cpu:1`, `uncommitted`, "" for a
    # Python scalar), when JAX compiled it for a call; () when not known
    placements: tuple[str, ...] = ()

    @property
    def seconds(self) -> float:
        return self.trace_seconds + self.lower_seconds + self.compile_seconds

    @property
    def is_miss(self) -> bool:
        """A trace of a function traced before: a retrace (and usually a recompile)."""
        return self.traced and self.number > 0
