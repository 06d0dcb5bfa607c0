"""Where things are in text JAX printed: each top-level equation's lines in a jaxpr's text,
the file and line in an equation's source summary, and the scopes of a name stack's text.

The recorder applies the first two once, when a stage is made (transforms/_stages/_chain.py),
and records the answers as data (Stage.eqn_spans, EqnRecord.location; a name stack's scope path
it records from JAX's NameStack itself: Step.scope, EqnRecord.scope); the loader applies them to
dumps written before those fields existed (transforms/model/_load.py). Readers never parse the
text.
NB: JAX-free (the loader imports no JAX), so this one fact about JAX's printing, its
layout, lives here rather than in the transforms/_jax package.
"""
from __future__ import annotations

import re

__all__ = ["eqn_line_spans", "name_stack_scope", "summary_frame"]

# A line of a jaxpr's equations that is not an equation's first: deeper, or closing a bracket.
_CONTINUED = ("", " ", "]", ")", "}")


def eqn_line_spans(text: str, eqn_count: int) -> tuple[tuple[int, int], ...]:
    """(first, last) line, 0-based, of each top-level equation in a jaxpr's text; () unless
    exactly `eqn_count` equations are found, so a span is only ever given where it is certain.

    The main jaxpr is the last `{ lambda` at column 0 (shared sub-jaxprs may be printed
    before it as `let name = { lambda ...`). Its equations start at an indent of 4 spaces;
    continuation lines are deeper or close a bracket; the last ends before `  in (...)`.
    """
    if not text or eqn_count <= 0:
        return ()
    lines = text.split("\n")
    head = text.rfind("\n{ lambda")
    start = text.count("\n", 0, head + 1) if head >= 0 else 0
    starts = [i for i in range(start + 1, len(lines))
              if lines[i][:4] == "    " and lines[i][4:5] not in _CONTINUED]
    if len(starts) != eqn_count:
        return ()
    end = next((i for i in range(starts[-1] + 1, len(lines)) if lines[i].startswith("  in ")),
               starts[-1] + 1)
    ends = [s - 1 for s in starts[1:]] + [end - 1]
    return tuple(zip(starts, ends))


# `file:line (function)` or `file:line:column (function)`, as source_info_util.summarize prints.
_SUMMARY = re.compile(r"^(.*?):(\d+)(?::\d+)? \((.*)\)$")


def summary_frame(summary: str) -> tuple[str, int, str] | None:
    """(file, line, function) of an equation's source summary, or None (no user frame)."""
    m = _SUMMARY.match(summary)
    return (m.group(1), int(m.group(2)), m.group(3)) if m is not None else None


def name_stack_scope(name_stack: str) -> str:
    """The modules and named scopes of a name stack's text, the transformations left out:
    `MLP/attn/query` for `transpose(jvp(MLP))/attn/query`, "" for `jvp()`.

    JAX prints a name stack (NameStack.__str__) as its scopes joined by `/`, each
    transformation wrapping the scope after it: `name(scope)`, or `name()` at the end. A
    scope named with parentheses of its own (`f(x)`) reads as a transformation here: the text
    cannot tell them apart (the recorder reads the NameStack's elements instead).
    """
    parts = []
    for part in name_stack.split("/"):
        while part.endswith(")") and "(" in part:
            head, _, inner = part.partition("(")
            if not head.replace("_", "").isalnum():
                break  # a scope's own parentheses, not a transformation's
            part = inner[:-1]
        if part:
            parts.append(part)
    return "/".join(parts)
