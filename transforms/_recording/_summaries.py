"""Steps' params as text, and their sub-jaxprs as records: StepSummaries, shared by every
session recorded at one detail (what a step core asks when its own tables miss)."""
from __future__ import annotations

import dataclasses
from functools import cache
from typing import Any

from .. import _jax as _i
from .._capture import INLINE_FLAG, LIBRARY_FLAG, jaxpr_record, jit_pairs_key, summarize_params
from .._common import BoundedCache, ByObject
from .._jax import is_inline_jit_params, is_library_jit_params

__all__ = ["SHARED_JAXPRS", "USER_JITTED", "StepSummaries", "note_user_jit", "shared_summaries"]

# The most jaxprs a session keeps alive for its records' sake (then it starts again).
SHARED_JAXPRS = 512


class StepSummaries:
    """Steps' params as text pairs, and the records of their sub-jaxprs: what a step core
    asks when its own tables do not have them (`step_params`, `jit_step`). One for each
    detail, shared by every session (`shared_summaries`): what it keeps depends only on
    the jaxpr and params, and a new session meets the jaxprs the last one did.

    Kept by jaxpr object while it lives (JAX reuses the jaxprs of jnp functions; their
    constants are the user's arrays). Holds no call: a core holds its methods.
    """

    def __init__(self, full_detail: bool):
        self.full_detail = full_detail
        self.jaxpr_records: ByObject[Any] = ByObject(SHARED_JAXPRS)
        # _i.jit_summary_key(params) -> (pairs, subjaxprs, flags); the C step core reads
        # the entries with the same key
        self.jit_summaries: ByObject[tuple] = ByObject(SHARED_JAXPRS)
        # jit_pairs_key(params) -> the pairs of a jnp wrapper's jit step (default detail)
        self._pairs_by_text: BoundedCache = BoundedCache(10_000)

    def jaxpr(self, name: str, jaxpr: Any):
        # JAX caches the jaxprs of jnp wrappers: print each object once.
        rec = self.jaxpr_records.get(jaxpr)
        if rec is None:
            rec = jaxpr_record(name, jaxpr)
            self.jaxpr_records.put(jaxpr, None, rec)
        return rec if rec.name == name else dataclasses.replace(rec, name=name)

    def step_params(self, name: str, params: dict) -> tuple:
        """(pairs, subjaxprs) of a step that is not a jit."""
        pairs, jaxprs = summarize_params(name, params)
        return pairs, tuple([self.jaxpr(key, j) for key, j in jaxprs]) if jaxprs else ()

    def _inline_pairs(self, params: dict) -> tuple:
        key = jit_pairs_key(params)
        try:
            pairs = self._pairs_by_text.get(key) if key is not None else None
        except TypeError:  # flags of a kind that cannot be hashed
            key = pairs = None
        if pairs is None:
            pairs = summarize_params("jit", params)[0]
            if key is not None:
                self._pairs_by_text.put(key, pairs)
        return pairs

    def jit_step(self, params: dict) -> tuple:
        """(pairs, subjaxprs, flags) of a jit step, once per jaxpr object: flags are
        INLINE_FLAG (a jnp wrapper JAX inlines) | LIBRARY_FLAG (a jit of JAX's own function).

        Every jnp function is a jit step, and JAX reuses their jaxprs (eight
        layers call one tanh jaxpr), so this is the hottest rule.
        """
        jaxpr, extra = _i.jit_summary_key(params)
        key: tuple | None = extra
        try:
            hit = self.jit_summaries.get(jaxpr, key)
        except TypeError:  # params of a shape we do not know: no caching
            hit, key = None, None
        if hit is not None:
            return hit
        inline = is_inline_jit_params(params)
        if self.full_detail or not inline:
            pairs, jaxprs = summarize_params("jit", params)
            subjaxprs = tuple([self.jaxpr(k, j) for k, j in jaxprs])
        else:
            # At the default detail a jnp wrapper's body is named in its params
            # (`jaxpr={jaxpr: sin, cos}`), not kept: the pairs of a jaxpr met for the
            # first time (JAX's rules make one for each wrapper under vmap and grad)
            # by what they print.
            pairs = self._inline_pairs(params)
            subjaxprs = ()
        flags = (INLINE_FLAG if inline else 0) | (
            LIBRARY_FLAG if is_library_jit_params(params) and not _user_jit(params, inline)
            else 0)
        summary = (pairs, subjaxprs, flags)
        if key is not None:
            self.jit_summaries.put(jaxpr, key, summary)
        return summary


# The functions of JAX's package the user jitted with transforms.jit (`jax.jit(jnp.sin)`
# under `workbench run`), as their jaxprs name them: a jit of one is the user's, not one
# JAX made for jnp. Kept for the process: JAX shares one trace cache between jax.jit(f) and
# transforms.jit(f), and the jit steps' summaries are kept per jaxpr object.
USER_JITTED: set[str] = set()


def note_user_jit(fun: Any) -> None:
    """The user jitted `fun` with transforms.jit: where it is JAX's own (jnp.sin), its jits
    (and the ones JAX derives from them) are read as the user's jit, not a library step."""
    source = _i.jax_function_source(fun)
    if source is not None:
        USER_JITTED.add(source)


def _user_jit(params: dict, inline: bool) -> bool:
    """A jit of JAX's function that the user wrote: never a jnp wrapper (inline)."""
    return bool(USER_JITTED) and not inline and _i.jit_function_source(params) in USER_JITTED


@cache
def shared_summaries(full_detail: bool) -> StepSummaries:
    """The step summaries of every session recorded at this detail."""
    return StepSummaries(full_detail)
