"""Primitives' parameter layouts that JAX releases change: scan's, while's and call-like
primitives' constants, jit's names and inline flag, what keys a jit step's summary, a
custom_vjp_call's primal outputs. Part of the door.
"""
from __future__ import annotations

import functools
import inspect
import os
from typing import Any

import jax
from jax._src.api_util import fun_sourceinfo as _fun_sourceinfo


def custom_vjp_out_count(params: dict) -> int | None:
    """How many primal outputs a custom_vjp_call has (the last outputs of its fwd).

    NB: jax._src.custom_derivatives: `out_trees()` gives (out_tree, res_tree,
    input_fwds), read from the fwd's stores once it has run.
    """
    try:
        return params["out_trees"]()[0].num_leaves
    except Exception:  # the fwd's stores are empty, or another layout
        return None


def is_inline_jit_params(params: dict) -> bool:
    """True for the params of a jnp wrapper: `jit(inline=True)`.

    NB: jax 0.12 made `inline` an enum (Inline.JAX_EARLY for inline=True; a
    user's plain jit gets another member, and enum members are all truthy).
    """
    inline = params.get("inline", False)
    return inline is True or getattr(inline, "name", None) == INLINE_ENUM_NAME


def is_library_jit_params(params: dict) -> bool:
    """True for a jit of JAX's own function (jnp.take's `_take`, jnp.mean): its jaxpr's
    function was written in JAX's package, not in the user's code or another library.

    NB: jax._src.core.DebugInfo.func_filename (None when JAX did not know the function).
    """
    info = getattr(params.get("jaxpr"), "jaxpr", None)
    info = getattr(info, "debug_info", None)
    filename = getattr(info, "func_filename", None)
    return isinstance(filename, str) and filename.startswith(_JAX_PACKAGE)


def jit_function_source(params: dict) -> str | None:
    """The function a jit step's jaxpr was traced from, as JAX names it
    (`sin at .../jax/_src/numpy/ufuncs.py:584`); None when JAX did not know it. The jaxprs
    JAX derives from it (a grad's known part, its transpose) keep the name.

    NB: jax._src.core.DebugInfo.func_src_info, made by api_util.fun_sourceinfo.
    """
    info = getattr(getattr(params.get("jaxpr"), "jaxpr", None), "debug_info", None)
    source = getattr(info, "func_src_info", None)
    return source if isinstance(source, str) else None


def jax_function_source(fun: Any) -> str | None:
    """For a function of JAX's package (jnp.sin, jax.nn.softmax, through partials and
    `__wrapped__`), the name a jit of it gives its jaxpr (`jit_function_source`); None
    for any other function.

    NB: jax._src.api_util.fun_sourceinfo names the function jax.jit traces from.
    """
    inner = fun
    while isinstance(inner, functools.partial):
        inner = inner.func
    try:
        code = getattr(inspect.unwrap(inner), "__code__", None)
    except ValueError:  # a cycle of __wrapped__: JAX's own name for it is not ours to make
        return None
    filename = getattr(code, "co_filename", None)
    if not isinstance(filename, str) or not filename.startswith(_JAX_PACKAGE):
        return None
    return _fun_sourceinfo(fun)


# The folder of JAX's package, with a separator: `jax/`, not `jax_extra/`.
_JAX_PACKAGE = os.path.join(os.path.dirname(jax.__file__), "")


# jit's `inline=True` on jax 0.12's Inline enum (the C step core reads it too).
INLINE_ENUM_NAME = "JAX_EARLY"


# The names of jit's primitive: renamed pjit -> jit in 0.7.
JIT_PRIMITIVE_NAMES = ("jit", "pjit")

# A primitive's attribute holding its name (jax.extend.core.Primitive.name), for the C step
# core, which spells no JAX name itself.
PRIMITIVE_NAME_ATTRIBUTE = "name"

# The params jit_summary_key reads, as the C step core reads them (handed to it by
# _step_core): the jaxpr, the params keyed as they are, and the inline flag (by inline_token).
JIT_SUMMARY_PARAMS = ("jaxpr", "name", "donated_invars", "inline")


def jit_summary_key(params: dict) -> tuple[Any, tuple]:
    """What a jit step's summary is kept by: its jaxpr object, and its name, donated
    inputs and inline token (tests/transforms/_jax/test_jax_door.py checks it reads
    JIT_SUMMARY_PARAMS)."""
    return params.get("jaxpr"), (params.get("name"), params.get("donated_invars"),
                                 inline_token(params))


def inline_token(params: dict) -> Any:
    """jit's `inline` param as a cache key part: a bool (or None) as it is, an enum member
    (jax 0.12) by its id. NB: Enum hashes and names are Python code, a few us a step on the
    hot path; the members are module-level singletons, never freed, so their ids are theirs."""
    inline = params.get("inline")
    return inline if inline is None or type(inline) is bool else id(inline)


def scan_groups(params: Any) -> tuple[int, int]:
    """How many of a scan equation's inputs are constants, then carries (the rest: xs).

    NB: jax 0.10 has num_consts / num_carry; jax 0.12 a flat tree of the three groups, ft_in.
    """
    if "num_consts" in params:
        return int(params["num_consts"]), int(params["num_carry"])
    consts, carry, _ = params["ft_in"].unpack()
    return len(consts.vals), len(carry.vals)


def while_consts(params: Any) -> tuple[int, int]:
    """How many constants a while equation's cond and body jaxprs take (they come first)."""
    return int(params["cond_nconsts"]), int(params["body_nconsts"])


def call_consts(params: Any) -> int:
    """How many leading inputs of a custom_jvp_call / custom_vjp_call jaxpr are constants."""
    return int(params.get("num_consts", 0))
