"""Why a jit traced and compiled again: the one table of reasons, and a key's differences.

Each reason is one entry of REASON_KINDS: how it reads (a template over the MissReason's
subject, before and after) and what fixes it. `miss_reasons` compares a trace's key with
the earlier keys of the same function and returns the differences from the nearest one,
as MissReason data; `explain` is the one place they become words.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

from ._compile_records import CompileKey, CompileRecord, KeyLeaf, MissReason

__all__ = ["REASON_KINDS", "ReasonKind", "compile_reasons", "explain", "hint", "jax_says",
           "miss_reasons", "same_function"]


class ReasonKind(NamedTuple):
    """One reason a jit misses its caches: how it reads, the fix, and the words of JAX's own
    explanation of the same miss (what `jax_explain_cache_misses` logs; "" for none)."""
    title: str
    template: str   # over {subject}, {before}, {after}
    hint: str
    jax_says: str = ""


REASON_KINDS: dict[str, ReasonKind] = {
    "smaller_batch": ReasonKind(
        "a smaller batch", "`{subject}` {before} -> {after} (the last, smaller batch)",
        "drop the last partial batch, or pad it to the batch size (and mask it)",
        "different input types"),
    "shape": ReasonKind(
        "a shape changed", "`{subject}` {before} -> {after}",
        "each new shape traces and compiles again: pad to a few fixed shapes",
        "different input types"),
    "dtype": ReasonKind(
        "a dtype changed", "`{subject}` {before} -> {after}",
        "cast once, before the loop, so every call passes the same dtype",
        "different input types"),
    "became_array": ReasonKind(
        "a Python scalar became an array",
        "`{subject}` was a Python scalar (weakly typed {before}) and is now a {after} array",
        "pass the same kind each call: always an array (jnp.asarray(x, jnp.float32)) "
        "or always a Python scalar",
        "different input types (weak_type)"),
    "became_scalar": ReasonKind(
        "an array became a Python scalar",
        "`{subject}` was a {before} array and is now a Python scalar (weakly typed {after})",
        "pass the same kind each call: always an array (jnp.asarray(x, jnp.float32)) "
        "or always a Python scalar",
        "different input types (weak_type)"),
    "sharding": ReasonKind(
        "a sharding changed", "`{subject}` sharding {before} -> {after}",
        "place the arguments the same way on every call (jax.device_put once)",
        "different input types (sharding)"),
    "static": ReasonKind(
        "a static argument changed", "static argument `{subject}` {before} -> {after}",
        "each value of a static argument compiles once: keep the values few, or pass "
        "it as an array"),
    "tree_leaves": ReasonKind(
        "a tree gained or lost leaves", "the tree of `{subject}` changed: {after}",
        "keep the same structure every call (the same keys, no None in place of a value)",
        "different input pytree"),
    "tree": ReasonKind(
        "a tree's structure changed", "the tree of `{subject}` changed: {before} -> {after}",
        "keep the same node types every call (a tuple stays a tuple, a dict a dict)",
        "different input pytree"),
    "new_function": ReasonKind(
        "a new function object",
        "a new function object at each call: `jax.jit({subject})` of the function "
        "defined at {after}",
        "jit it once, outside the loop, and call the jitted function",
        "never seen function (being re-defined repeatedly, preventing caching?)"),
    "config": ReasonKind(
        "a JAX setting changed", "JAX setting `{subject}` {before} -> {after}",
        "keep JAX's settings (x64, default device, mesh) the same while calling it",
        "tracing context doesn't match, e.g. due to config or context manager"),
    "placement": ReasonKind(
        "an argument moved to another device",
        "compiled again, not traced: `{subject}` was on {before} and is now on {after}",
        "put the arguments on the same device every call (jax.device_put once, before "
        "the loop), or leave them uncommitted"),
    "compiled_again": ReasonKind(
        "compiled again, not traced",
        "compiled again without tracing again: the same trace, for other argument "
        "placements, donation or compiler options (or after JAX's caches were cleared)",
        "call it the same way each time: the same devices, donate_argnums and options"),
    "same_key": ReasonKind(
        "traced again with the same key",
        "traced again with the key of an earlier trace (JAX's cache was cleared, or "
        "the jit was made with other options)",
        "keep one jitted function and do not clear its cache"),
    "not_seen": ReasonKind(
        "traced again, key not recorded",
        "`{subject}` traced again (a jit JAX ran for jnp or a library: its key is not "
        "recorded)",
        "see the line that called it: each new shape or dtype there compiles it again"),
}


def explain(reason: MissReason) -> str:
    """The reason in the user's words."""
    kind = REASON_KINDS.get(reason.kind)
    if kind is None:
        return f"{reason.kind}: {reason.subject} {reason.before} -> {reason.after}".strip()
    return kind.template.format(subject=reason.subject, before=reason.before,
                                after=reason.after)


def hint(reason: MissReason) -> str:
    kind = REASON_KINDS.get(reason.kind)
    return kind.hint if kind is not None else ""


def jax_says(reason: MissReason) -> str:
    """What JAX's own cache-miss explanation calls the same miss ("" where it has none)."""
    kind = REASON_KINDS.get(reason.kind)
    return kind.jax_says if kind is not None else ""


def same_function(a: CompileRecord, b: CompileRecord) -> bool:
    """Whether two records are traces of one function (one definition, any object)."""
    if a.function != b.function:
        return False
    if a.defined_at is not None or b.defined_at is not None:
        return a.defined_at == b.defined_at
    return a.location == b.location


def miss_reasons(earlier: Sequence[CompileRecord], record: CompileRecord) -> tuple[MissReason, ...]:
    """Why `record` was traced, against the nearest earlier trace of the same function
    (the one with the fewest differences); () when none came before."""
    before = [e for e in earlier if e.traced and same_function(e, record)]
    if not before:
        return ()
    key = record.key
    keyed = [e.key for e in before if e.key is not None]
    if key is None or not keyed:
        return (MissReason("not_seen", record.function),)
    if all(k.function_id != key.function_id for k in keyed):
        place = record.defined_at
        where = f"{place.file}:{place.line}" if place is not None else "?"
        return (MissReason("new_function", record.function, "", where),)
    same_object = [k for k in keyed if k.function_id == key.function_id]
    # the fewest differences; of equals, the latest
    found = min((key_differences(k, key) for k in reversed(same_object)), key=len)
    return found or (MissReason("same_key"),)


def compile_reasons(earlier: Sequence[CompileRecord],
                    record: CompileRecord) -> tuple[MissReason, ...]:
    """Why a function already compiled was compiled again without a new trace: against the
    latest earlier compile of it whose placements are known, each argument that moved; else
    that the same trace compiled again. () for the function's first compile."""
    before = [e for e in earlier if e.compiled and same_function(e, record)]
    if not before:
        return ()
    known = [e for e in before if len(e.placements) == len(record.placements)
             and record.placements]
    if known:
        names = _argument_names(record)
        moved = tuple(MissReason("placement", names[i] if i < len(names) else f"argument {i}",
                                 old, new)
                      for i, (old, new) in enumerate(zip(known[-1].placements,
                                                         record.placements)) if old != new)
        if moved:
            return moved
    return (MissReason("compiled_again", record.function),)


def _argument_names(record: CompileRecord) -> list[str]:
    """The dynamic arguments' leaves by name, in the order JAX passes them (its key's)."""
    return [leaf.path for leaf in record.key.leaves] if record.key is not None else []


def key_differences(old: CompileKey, new: CompileKey) -> tuple[MissReason, ...]:
    """Every difference between two keys of one function, in order: settings, static
    arguments, trees, then leaves."""
    found: list[MissReason] = []
    found += _pairs_changed("config", dict(old.config), dict(new.config))
    old_statics = {s.name: s for s in old.statics}
    for s in new.statics:
        was = old_statics.get(s.name)
        if was is not None and (was.value, was.type_name) != (s.value, s.type_name):
            found.append(MissReason("static", s.name, _static_text(was, s), _static_text(s, was)))
    found += _tree_changes(old, new)
    old_leaves = {leaf.path: leaf for leaf in old.leaves}
    for leaf in new.leaves:
        old_leaf = old_leaves.get(leaf.path)
        if old_leaf is not None:
            found += _leaf_differences(old_leaf, leaf)
    return tuple(found)


def _static_text(value, other) -> str:
    """A static value as it reads; with its type where the other's type differs (1 vs 1.0)."""
    if value.type_name != other.type_name:
        return f"{value.value} ({value.type_name})"
    return value.value


def _pairs_changed(kind: str, old: dict[str, str], new: dict[str, str]) -> list[MissReason]:
    return [MissReason(kind, name, old.get(name, ""), value)
            for name, value in new.items() if old.get(name, value) != value]


def _tree_changes(old: CompileKey, new: CompileKey) -> list[MissReason]:
    """An argument whose tree changed: the leaf paths it gained and lost, or the two trees."""
    old_trees = dict(old.trees)
    found = []
    for name, tree in new.trees:
        was = old_trees.get(name)
        if was is None or was == tree:
            continue
        gone = sorted(_paths_of(old, name) - _paths_of(new, name))
        added = sorted(_paths_of(new, name) - _paths_of(old, name))
        if gone or added:
            parts = ([f"now has {_listed(added)}"] if added else []) + \
                    ([f"no longer {_listed(gone)}"] if gone else [])
            found.append(MissReason("tree_leaves", name, "", ", ".join(parts)))
        else:
            found.append(MissReason("tree", name, was, tree))
    return found


def _listed(paths: list[str]) -> str:
    return ", ".join(f"`{p}`" for p in paths[:3]) + (
        f" and {len(paths) - 3} more" if len(paths) > 3 else "")


def _paths_of(key: CompileKey, argument: str) -> set[str]:
    return {leaf.path for leaf in key.leaves
            if leaf.path == argument or leaf.path.startswith((argument + "[", argument + "."))}


def _leaf_differences(old: KeyLeaf, new: KeyLeaf) -> list[MissReason]:
    if old.weak_type != new.weak_type:
        kind = "became_array" if old.weak_type else "became_scalar"
        return [MissReason(kind, new.path, old.aval, new.aval)]
    found = []
    if old.dtype != new.dtype:
        found.append(MissReason("dtype", new.path, old.aval, new.aval))
    elif old.shape != new.shape:
        smaller = (len(old.shape) == len(new.shape) > 0 and new.shape[1:] == old.shape[1:]
                   and new.shape[0] < old.shape[0])
        found.append(MissReason("smaller_batch" if smaller else "shape", new.path,
                                old.aval, new.aval))
    if old.sharding != new.sharding:
        found.append(MissReason("sharding", new.path, old.sharding or "(default)",
                                new.sharding or "(default)"))
    return found
