"""The commands that only read dumps: open (the terminal UI), show (a text summary), diff,
merge and schema (the JSON Schema, or `--validate` dumps against it). None imports JAX
(tests/workbench/cli/test_read_only_imports.py)."""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from .._safe_text import terminal as _t
from .._words import plural
from ._shared import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_SCRIPT_FAILED,
    error,
    load_or_report,
    no_terminal,
    print_lines,
    usable_output,
)

if TYPE_CHECKING:
    from transforms.model import Session


def open_command(args: argparse.Namespace) -> int:
    reason = no_terminal()
    if reason or not (os.path.exists(args.trace) or os.path.exists(args.trace + ".journal")):
        # No terminal, or no such file: say what is wrong with the file first, as `show` does.
        session = load_or_report(args.trace, lazy=True)
        if session is None:
            return EXIT_BAD_INPUT
        problem = _process_problem(args, session)
        error(problem or f"{reason}; use `workbench show {args.trace}` for a text summary")
        return EXIT_BAD_INPUT
    # The terminal UI draws its first frame at once and reads the dump behind it, lazily:
    # a call's steps are decoded when it is unfolded (a big dump opens at once).
    from ..tui import open_dump
    return open_dump(args.trace, export_dir=args.export_dir, process=args.process,
                     load=_load_lazily,
                     check=lambda session: _process_problem(args, session))


def _load_lazily(path: str) -> Session:
    """The open command's loader, run behind the first frame (it imports the model)."""
    from ..analysis import load_run
    return load_run(path, lazy=True)


def _process_problem(args: argparse.Namespace, session: Session) -> str:
    """What is wrong with `open --process I` for this session ("" when nothing is)."""
    if not session.processes:
        return ""
    from ._process_commands import check_process
    problem = check_process(session, args.process)
    return f"{args.trace}: {problem}" if problem else ""


def show_command(args: argparse.Namespace) -> int:
    from ..analysis import nothing_recorded
    from ._compile_table import compile_lines
    from ._summary import stage_lines, summarize_call
    session = load_or_report(args.trace)
    if session is None:
        return EXIT_BAD_INPUT
    if session.processes:
        from ._process_commands import show_processes
        return show_processes(session, args, error)
    calls = session.calls
    if args.call is not None:
        # By index: with calls dropped (--max-steps) indices are not positions.
        chosen = [c for c in calls if c.index == args.call]
        if not chosen:
            known = f"0..{len(calls) - 1}" if not session.dropped_calls else \
                f"{calls[0].index}..{calls[-1].index}; {session.dropped_note()}"
            error(f"{args.trace} has no call {args.call} (it has {len(calls)}: {known})")
            return EXIT_BAD_INPUT
        calls = chosen
    print_lines([f"{_t(args.trace)}: {plural(len(session.calls), 'call')}, "
                 f"{plural(session.step_count, 'step')} "
                 f"(jax {_t(session.jax_version)}, python {_t(session.python_version)})"])
    if session.title:
        print_lines([f"title: {_t(session.title)}"])
    if session.dropped_calls:
        print_lines([f"dropped: {session.dropped_note()}"])
    empty = nothing_recorded(session)
    if empty is not None:
        print_lines([empty])
    if session.unrecorded_calls:
        print_lines([f"not recorded: {session.unrecorded_note()}"])
    for key in ("ended", "journal_notes", "journal"):
        if session.metadata.get(key):
            print_lines([f"{key.replace('_', ' ')}: {_t(session.metadata[key])}"])
    first_with: dict[int, int] = {}  # id of a stages tuple -> the first call holding it
    for call in calls:
        print_lines(summarize_call(call, with_steps=args.steps, expand=args.expand))
        print_lines(stage_lines(call, first_with))
    compiles = compile_lines(session) if args.call is None else []
    if compiles:
        print_lines(compiles)
    return EXIT_OK


def diff_command(args: argparse.Namespace) -> int:
    from ..analysis import diff_sessions, format_diff
    a = load_or_report(args.a)
    if a is None:
        return EXIT_BAD_INPUT
    if args.b is None or args.processes is not None:
        from ._process_commands import pick_processes
        picked = pick_processes(a, args)
        if isinstance(picked, str):
            error(f"{args.a}: {picked}")
            return EXIT_BAD_INPUT
        a, b, args.a, args.b = picked
    else:
        other = load_or_report(args.b)
        if other is None:
            return EXIT_BAD_INPUT
        b = other
    d = diff_sessions(a, b)
    if args.json:
        print(json.dumps({"a": args.a, "b": args.b, **d.to_json_dict()}, indent=2))
    else:
        print_lines(format_diff(d, args.a, args.b, verbose=args.verbose))
    if not d.related:
        if args.json:
            error(f"{args.a} and {args.b} look unrelated: no call matches")
        return EXIT_BAD_INPUT
    if args.fail_on_growth and d.grown:
        error(f"equation counts grew in {len(d.grown)} stage(s): " + ", ".join(
           f"{c.title} {s.name} {s.eqns_a} -> {s.eqns_b}" for c, s in d.grown[:5]))
        return EXIT_SCRIPT_FAILED
    if args.fail_on_recompile and d.retraced_more:
        error("traced again more often in B: " + ", ".join(
            f"{c.function} at {c.place} {c.retraces[0]} -> {c.retraces[1]}"
            for c in d.retraced_more[:5]))
        return EXIT_SCRIPT_FAILED
    if args.fail_on_change and d.changed:
        error("the traces differ")
        return EXIT_SCRIPT_FAILED
    return EXIT_OK


# --- merge -------------------------------------------------------------------------

def merge_command(args: argparse.Namespace) -> int:
    from ..analysis import merge
    problem = usable_output(args.output)
    if problem:
        error(problem)
        return EXIT_BAD_INPUT
    sessions = []
    for path in args.dumps:
        session = load_or_report(path)
        if session is None:
            return EXIT_BAD_INPUT
        sessions.append(session)
    try:
        merged = merge(sessions)
    except ValueError as e:
        error(str(e))
        return EXIT_BAD_INPUT
    merged.save(args.output)
    print(f"{args.output}: {plural(len(merged.processes), 'process', 'processes')}, "
          f"{plural(merged.step_count, 'step')}")
    return EXIT_OK


# --- schema -------------------------------------------------------------------------

def schema_command(args: argparse.Namespace) -> int:
    from transforms import model as schema
    if args.validate:
        return _validate(args.validate, schema)
    text = schema.schema_text()
    if args.output:
        problem = usable_output(args.output)
        if problem:
            error(problem)
            return EXIT_BAD_INPUT
        from transforms.model import write_atomically
        write_atomically(args.output, text)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _validate(paths: list[str], schema: Any) -> int:
    """Each dump through the loader (its checks), then the schema of the dump's own layout.

    So `schema --validate` accepts exactly the files `transforms.load` reads: a dump
    written by an older workbench (fewer fields, named in its `fields` header; steps as
    rows, versions 2 and 3) is checked against the schema of that layout, and a version 1
    dump is read by the old decoder."""
    from transforms.model import SCHEMA_VERSION
    code = EXIT_OK
    for path in paths:
        if load_or_report(path) is None:  # the loader's message says what is wrong
            code = EXIT_BAD_INPUT
            continue
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if data.get("schema_version") == 1:
            print(f"{_t(path)}: valid (schema version 1, the old layout that transforms.load "
                  f"still reads; the schema describes version {SCHEMA_VERSION})")
            continue
        problems = schema.schema_problems(data, schema.session_schema(
            data["fields"], data["schema_version"], data["tables"]))
        if problems:
            code = EXIT_BAD_INPUT
            error(f"{path}: does not match the schema:\n  " + "\n  ".join(problems))
        else:
            print(f"{_t(path)}: valid")
    return code
