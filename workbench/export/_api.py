"""`workbench.export.graph(...)`: pick a call and stage of a session, collect a view, write it."""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from transforms.model import (
    Call,
    Session,
    SessionLoadError,
    Stage,
    default_pair,
    stage_function,
    stage_groups,
    whole_program,
)

from .. import _safe_text as safe_text
from ..analysis import function_program, load_run, no_stages_reason, owners, process_session
from ._write import ExportError, GraphvizMissing, write_graph
from .devices import collect_devices
from .graphviz import (
    CollectError,
    Graph,
    GraphOptions,
    collect_jaxpr,
    collect_pytree,
    collect_stages,
    collect_tower,
)

VIEWS = ("jaxpr", "stages", "tower", "pytree", "devices")
TRANSFORMED = "transformed"  # the role of a function's whole transformed program


def collect(session: Session | str | os.PathLike, view: str = "jaxpr", call: int | None = None,
            stage: str | None = None, stage_b: str | None = None,
            options: GraphOptions = GraphOptions(), process: int | None = None) -> Graph:
    """The Graph of one view of one call (pure: nothing is written).

    A multi-process run draws the call of process `process` (default 0)."""
    if view not in VIEWS:
        raise ExportError(f"unknown view {view!r}; the views are: {', '.join(VIEWS)}")
    if options.max_nodes is not None and options.max_nodes < 1:
        raise ExportError(f"max_nodes={options.max_nodes}: give a positive number of nodes")
    session = _one_process(_session(session), process)
    found = find_call(session, call)
    try:
        drawn = _collect_view(found, view, stage, stage_b, options, session)
    except CollectError as e:
        raise ExportError(str(e)) from None
    if view == "jaxpr" and stage is None:
        drawn = _say_substitute(drawn, found, default_stage(found))
    elif view == "stages" and stage is None and stage_b is None:
        drawn = _say_substitute(drawn, found, _stage_pair(found, None, None)[1])
    cap = options.max_nodes
    if cap is not None and len(drawn.nodes) > cap:  # a promise: never more than asked
        hint = " (--focus draws a neighbourhood: use a smaller --radius)" \
            if options.focus is not None else ""
        raise ExportError(f"max_nodes={cap}: the {view} view of call {found.index} needs "
                          f"{len(drawn.nodes)} nodes as asked{hint}; give a larger max_nodes")
    return drawn


def _collect_view(found: Call, view: str, stage: str | None, stage_b: str | None,
                  options: GraphOptions, session: Session) -> Graph:
    if view == "jaxpr":
        return collect_jaxpr(find_stage(found, stage), found, options)
    if view == "stages":
        before, after = _stage_pair(found, stage, stage_b)
        return collect_stages(before, after, found, options)
    if view == "tower":
        return collect_tower(found, options)
    if view == "devices":
        return collect_devices(found, options, owners(session))
    return collect_pytree(found, options)


def graph(session: Session | str | os.PathLike, view: str = "jaxpr", call: int | None = None,
          stage: str | None = None, out: str | os.PathLike = "graph.svg", *,
          stage_b: str | None = None, collapse: bool | None = None,
          collapse_repeats: bool = False, max_nodes: int | None = None,
          focus: int | None = None, radius: int = 2, edge_labels: bool = True,
          force: bool = False, timeout: float | None = None, quiet: bool = False,
          process: int | None = None) -> Path:
    """Draw one view of a recorded call to `out` (.svg, .png, .pdf, or .dot for the text).

    view: "jaxpr" (a stage's dataflow), "stages" (stage vs stage_b, changes marked),
    "tower" (the call's levels and their steps), "pytree" (input and gradient trees),
    "devices" (sharded arrays on the device mesh, and the collectives of compiled stages).
    call: the call's index (default: the first call); stage: a stage name such as
    "f" or "vmap(grad(f))" (default: the call's outermost jaxpr stage; for "stages",
    "f" against it). Raises ExportError (and its kinds GraphTooLarge,
    GraphvizMissing) with a message that says what to do.
    """
    options = GraphOptions(collapse_subjaxprs=collapse, collapse_repeats=collapse_repeats,
                           max_nodes=max_nodes, focus=focus, radius=radius,
                           edge_labels=edge_labels)
    drawn = collect(session, view, call, stage, stage_b, options, process)
    if drawn.stage_note and not quiet:
        print(f"workbench graph: note: {safe_text.terminal(drawn.stage_note)}", file=sys.stderr)
    return write_graph(drawn, out, force=force, timeout=timeout, quiet=quiet)


def _session(session: Session | str | os.PathLike) -> Session:
    if isinstance(session, Session):
        return session
    try:
        return load_run(session)
    except SessionLoadError as e:
        raise ExportError(str(e)) from None


def _one_process(session: Session, process: int | None) -> Session:
    """A merged multi-process run: the process asked for (default 0) as a session."""
    if not session.processes:
        if process is not None and (session.process is None or session.process.index != process):
            raise ExportError(f"--process {process}: this is not a multi-process run")
        return session
    try:
        return process_session(session, 0 if process is None else process)
    except ValueError as e:
        raise ExportError(str(e)) from None


def find_call(session: Session, index: int | None) -> Call:
    if not session.calls:
        raise ExportError("the session has no calls: nothing was recorded")
    if index is None:
        return session.calls[0]
    for c in session.calls:
        if c.index == index:
            return c
    known = ", ".join(f"{c.index} ({c.transform} {c.function})" for c in session.calls[:20])
    more = f" and {len(session.calls) - 20} more" if len(session.calls) > 20 else ""
    raise ExportError(f"no call {index} in this session; the calls are: {known}{more}")


def jaxpr_stages(call: Call) -> list[Stage]:
    return [s for s in call.stages if s.jaxpr is not None]


def default_stage(call: Call) -> Stage:
    """The outermost jaxpr stage of the call's own chain: what its function stages to."""
    _require_stages(call)
    groups = stage_groups(call.stages)
    if not groups:
        reasons = "; ".join(f"{s.name}: {s.reason}" for s in call.stages if s.reason)
        raise ExportError(f"call {call.index} has no stage with a jaxpr"
                          + (f" ({_short(reasons)})" if reasons else ""))
    return call.stages[whole_program(call.stages, groups[0])]


def outermost_stage(call: Call) -> Stage | None:
    """The call's own whole transformed program (`vmap(grad(f))`, else `f`), whether or not
    it was captured: what the graph draws by default when it is available."""
    own = [s for s in call.stages if stage_function(s.name) == "f" and s.role in ("f", TRANSFORMED)]
    return next((s for s in reversed(own) if s.role == TRANSFORMED), own[-1] if own else None)


def substitute_note(call: Call, drawn: Stage) -> str:
    """Why the default graph of `call` draws `drawn`, when it is not the call's outermost
    stage (that one was not captured): "" when it is."""
    wanted = outermost_stage(call)
    if wanted is None or wanted is drawn or wanted.available:
        return ""
    reason = (wanted.reason or "unavailable").splitlines()[0]
    return (f"drew stage {drawn.name} of call {call.index}: its outermost stage {wanted.name} is "
            f"unavailable ({_short(reason, 200)}); --stage NAME draws another")


def _say_substitute(drawn: Graph, call: Call, stage: Stage) -> Graph:
    """`drawn` (of `stage`, chosen by default) saying so when it stands for the call's
    outermost stage, which was not captured."""
    note = substitute_note(call, stage)
    if not note:
        return drawn
    wanted = outermost_stage(call)
    assert wanted is not None  # a note names it
    return dataclasses.replace(drawn, title=f"{drawn.title}, in place of {wanted.name} "
                               f"(unavailable)", notes=(note, *drawn.notes), stage_note=note)


def find_stage(call: Call, name: str | None) -> Stage:
    if name is None:
        return default_stage(call)
    _require_stages(call)
    for s in call.stages:
        if s.name == name:
            if s.jaxpr is None:
                why = s.reason or "it is a compiled or metrics stage, not a jaxpr"
                raise ExportError(f"stage {name!r} of call {call.index} has no jaxpr to draw: "
                                  f"{_short(why)}")
            return s
    known = ", ".join(s.name for s in call.stages)
    raise ExportError(f"call {call.index} has no stage {name!r}; its stages are: {known}")


def _stage_pair(call: Call, first: str | None, second: str | None) -> tuple[Stage, Stage]:
    if first is None and second is None:
        _require_stages(call)
        pair = default_pair(call.stages)
        if pair is None:
            jaxprs = ", ".join(s.name for s in jaxpr_stages(call)) or "none"
            raise ExportError(f"call {call.index} has no function with two jaxpr stages to "
                              f"compare (jaxpr stages: {jaxprs}); name two with --stage and "
                              f"--vs")
        return call.stages[pair[0]], call.stages[pair[1]]
    if second is None:  # the named stage against its function's whole transformed program
        before = find_stage(call, first)
        after = call.stages[function_program(call.stages, before.name)]
        if after is before:
            after = default_stage(call)
        return before, after
    if first is None:
        plain = [s for s in jaxpr_stages(call) if s.role == "f"]
        return (plain[0] if plain else default_stage(call)), find_stage(call, second)
    return find_stage(call, first), find_stage(call, second)


def _require_stages(call: Call) -> None:
    if not call.stages:
        raise ExportError(f"call {call.index} ({call.transform} {call.function}) has no stages: "
                          f"{no_stages_reason(call)}")


def _short(text: str, width: int = 300) -> str:
    return safe_text.shorten(text, width)


# --- for the CLI, the TUI and `demo --export` ------------------------------------------

def add_graph_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The arguments of `workbench graph`, for `cli_graph`."""
    parser.add_argument("trace", metavar="TRACE.json", help="a session dump")
    parser.add_argument("--view", choices=VIEWS, default="jaxpr",
                        help="jaxpr (a stage's dataflow, default), stages (two stages, changes "
                             "marked), tower (levels and steps), pytree (input and gradient "
                             "trees), devices (arrays on the device mesh, collectives)")
    parser.add_argument("--call", type=int, metavar="N", help="the call's index (default: 0)")
    parser.add_argument("--process", type=int, metavar="I",
                        help="a multi-process run: the call of process I (default: 0)")
    parser.add_argument("--stage", metavar="NAME",
                        help="a stage such as f or 'vmap(grad(f))' (default: the outermost)")
    parser.add_argument("--vs", metavar="NAME", dest="stage_b",
                        help="with --view stages: the second stage (default: the outermost)")
    parser.add_argument("-o", "--output", metavar="OUT", required=True,
                        help="OUT.svg, .png, .pdf, or .dot (the DOT text, no Graphviz needed)")
    parser.add_argument("--collapse", action="store_true",
                        help="draw control-flow and inner-jit bodies as one node each")
    parser.add_argument("--expand", action="store_true",
                        help="draw every body: with --view jaxpr however large (by default "
                             "bodies are drawn only as deep as keeps the graph quick to lay "
                             "out, and its notes say so); with --view stages, the bodies too")
    parser.add_argument("--collapse-repeats", action="store_true",
                        help="draw repeated blocks of equations (unrolled loops) once")
    parser.add_argument("--max-nodes", type=int, metavar="N",
                        help="draw at most N nodes in all: the equations past a budget become "
                             "one node, and with many inputs or outputs they are grouped by "
                             "argument (the graph's notes say what was folded)")
    parser.add_argument("--focus", type=int, metavar="EQN",
                        help="only equation EQN (its index) and its neighbourhood")
    parser.add_argument("--radius", type=int, default=2, metavar="K",
                        help="with --focus: equations within K dataflow steps (default 2)")
    parser.add_argument("--no-edge-labels", action="store_true", help="no avals on edges")
    parser.add_argument("--force", action="store_true",
                        help="render even a graph too large to lay out quickly")
    parser.add_argument("--timeout", type=float, metavar="SECONDS", help="stop dot after this")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    return parser


def cli_graph(args: argparse.Namespace) -> int:
    """`workbench graph`: 0 written; 2 bad input (a missing call or stage, no dot ...)."""
    collapse = True if getattr(args, "collapse", False) else (
        False if getattr(args, "expand", False) else None)
    try:
        path = graph(args.trace, view=args.view, call=args.call, stage=args.stage,
                     out=args.output, stage_b=getattr(args, "stage_b", None), collapse=collapse,
                     collapse_repeats=getattr(args, "collapse_repeats", False),
                     max_nodes=getattr(args, "max_nodes", None),
                     focus=getattr(args, "focus", None), radius=getattr(args, "radius", 2),
                     edge_labels=not getattr(args, "no_edge_labels", False),
                     force=getattr(args, "force", False), timeout=getattr(args, "timeout", None),
                     quiet=getattr(args, "quiet", False), process=getattr(args, "process", None))
    except ExportError as e:
        print(f"workbench graph: {safe_text.terminal(e, lines=True)}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"workbench graph: cannot write {args.output}: {e.strerror or e}", file=sys.stderr)
        return 2
    if not getattr(args, "quiet", False):
        print(f"workbench graph: wrote {path}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m workbench.export TRACE.json --view ... -o OUT`."""
    parser = argparse.ArgumentParser(prog="workbench graph",
                                     description="Draw a recorded call with Graphviz.")
    add_graph_arguments(parser)
    return cli_graph(parser.parse_args(argv))


# Drawn by `workbench demo --export`: small enough for any call, image format SVG.
_GALLERY_MAX_NODES = 250


def export_session_graphs(session: Session, folder: str | os.PathLike, stem: str,
                          suffix: str = ".svg", quiet: bool = True) -> list[str]:
    """Images of every call of a session (jaxpr, tower, and pytree where trees exist).

    Without `dot`, the .dot files are written and returned instead.
    """
    written: list[str] = []
    folder = Path(folder)
    for c in session.calls:
        views: list[tuple[str, dict[str, Any]]] = [("tower", {})]
        if jaxpr_stages(c):
            views.insert(0, ("jaxpr", {"collapse_repeats": True}))
        if c.trees or c.pairs:
            views.append(("pytree", {}))
        if c.shardings or any(s.collectives for s in c.stages):
            views.append(("devices", {}))
        for view, extra in views:
            out = folder / f"{stem}-call{c.index}-{view}{suffix}"
            try:
                written.append(os.fspath(graph(session, view, c.index, out=out,
                                               max_nodes=_GALLERY_MAX_NODES, quiet=quiet,
                                               **extra)))
            except GraphvizMissing as e:
                written.append(os.fspath(e.dot_path))
            except ExportError as e:  # e.g. a stage that failed: the other views still go
                if not quiet:
                    print(f"workbench: {out.name}: {safe_text.terminal(e, lines=True)}",
                          file=sys.stderr)
    return written


def write_call_graph(call: Call, path: str | os.PathLike) -> Path:
    """The TUI's export: the call's jaxpr graph when it has stages, else its tower."""
    session = Session(calls=[call])
    view = "jaxpr" if jaxpr_stages(call) else "tower"
    try:
        return graph(session, view, call.index, out=path, max_nodes=_GALLERY_MAX_NODES,
                     collapse_repeats=True, quiet=True)
    except GraphvizMissing as e:
        return e.dot_path
