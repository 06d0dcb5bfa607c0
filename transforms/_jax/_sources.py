"""Where things are bound: JAX's name stack and source info (the current one, an equation's
frame, a traceback's frames), and binding again at a recorded place (staged_at). Part of
the door.
"""
from __future__ import annotations

from typing import Any

# NB: jax._src: the source context and `user_frame` have no public reader (see below).
from jax._src import source_info_util as _source_info
from jax.extend import source_info_util

from .._common import BoundedCache

# NB: keyed by the stack's elements and their classes, not by the NameStack: its dataclass
# hash and == run Python code (about a third of a step's recording cost when JAX makes a new
# NameStack per bind, as its transform_name_stack does), and its == takes Scope('jvp') for
# Transform('jvp') (both are NamedTuples: equal as tuples), which print differently.
_name_stack_facts: BoundedCache = BoundedCache(10_000)  # key -> (text, scope path)
_last_name_stack: list[Any] = [None, ("", "")]  # the stack seen last and its facts

# Where the current name stack is, for the C step core's look without a call:
# (holder, context attribute, name stack attribute), as current_name_stack reads it
# (NB: jax._src; the same on 0.10 and 0.12).
NAME_STACK_PLACE = (_source_info._source_info_context, "context", "name_stack")

# NB: jax._src.source_info_util: NameStack.stack is a tuple of Scope (a module's or
# named_scope's name) and Transform (jvp, transpose, vmap ...) NamedTuples; neither class
# has a public alias.
_SCOPE = _source_info.Scope


def name_stack_facts(stack: Any) -> tuple[str, str]:
    """A NameStack's text as JAX prints it (`transpose(jvp(MLP))/attn/query`) and its scope
    path: its modules and named scopes, the transformations left out (`MLP/attn/query`; "" for
    `vmap(jvp())`). Made once per distinct stack."""
    elements = stack.stack  # NB: NameStack.stack, a tuple of Scope / Transform NamedTuples
    key = (elements, *map(type, elements))
    facts = _name_stack_facts.get(key)
    if facts is None:
        facts = _name_stack_facts.put(key, (str(stack), _scope_path(elements)))
    return facts


def _scope_path(elements: tuple) -> str:
    return "/".join([e.name for e in elements if type(e) is _SCOPE])


def joined_scope(outer: str, inner: str) -> str:
    """A scope path inside another (an inner jaxpr's, a level JAX traced with a fresh name
    stack, under the equation or step holding it): `MLP/attn` and `query` are
    `MLP/attn/query`."""
    return f"{outer}/{inner}" if outer and inner else outer or inner


def current_name_stack() -> tuple[str, str]:
    """The current name stack's text (`vmap(transpose(jvp()))`) and scope path, as
    name_stack_facts gives them (the step cores' callback)."""
    stack = source_info_util.current_name_stack()
    last = _last_name_stack
    if stack is last[0]:  # consecutive steps mostly share one
        return last[1]
    facts = name_stack_facts(stack)
    last[0], last[1] = stack, facts
    return facts


# NB: jax._src: the source context has no public reader. eval_jaxpr and the
# backward pass bind a staged jaxpr's equations inside
# user_context(eqn.source_info.traceback): the traceback of where they were written.
_source_context = _source_info._source_info_context


def context_traceback() -> Any:
    """The traceback JAX binds the current equation under (a staged jaxpr being
    evaluated again), or None when primitives are bound by live code."""
    return _source_context.context.traceback


def source_frame(source_info: Any) -> tuple[str, int, str] | None:
    """(file, line, function) of the frame an equation's source info names, as
    `source_info_util.summarize` prints it (the innermost frame outside JAX), or None.

    NB: jax._src.source_info_util: `user_frame` has no public alias (summarize prints it).
    """
    frame = _source_info.user_frame(source_info.traceback)
    return None if frame is None else (frame.file_name, frame.start_line, frame.function_name)


def traceback_frames(tb: Any) -> list[tuple[str, int, str]]:
    """(file, line, function) of a JAX traceback's frames, innermost first."""
    return [(f.file_name, f.line_num, f.function_name) for f in tb.frames]


def source_now() -> Any:
    """Where a primitive is being bound (traceback and name stack), to stage it there later."""
    return source_info_util.current()


def name_depth() -> int:
    """How many scopes the name stack has now: a level's scopes are the ones after these."""
    return len(source_info_util.current_name_stack().stack)


class staged_at:
    """Bind as if at `source`: its traceback, and the name scopes after `depth`.

    NB: jax._src.source_info_util: NameStack.stack holds Scope and Transform
    entries (each with a `name`); transformations staging the replay push
    their own names, the user's `named_scope`s are pushed again here.
    """
    __slots__ = ("_source", "_depth", "_contexts")

    def __init__(self, source: Any, depth: int):
        self._source, self._depth = source, depth

    def __enter__(self) -> None:
        contexts: list[Any] = [source_info_util.user_context(self._source.traceback)]
        for entry in getattr(self._source.name_stack, "stack", ())[self._depth:]:
            push = (source_info_util.transform_name_stack
                    if type(entry).__name__ == "Transform" else source_info_util.extend_name_stack)
            contexts.append(push(entry.name))
        for c in contexts:
            c.__enter__()
        self._contexts = contexts

    def __exit__(self, *exc: Any) -> None:
        for c in reversed(self._contexts):
            c.__exit__(*exc)
