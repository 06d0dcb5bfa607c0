"""The `workbench` command's handling of multi-process runs: run --processes, show, diff.

Kept out of cli.py so that the command's other handlers stay as they are; each
function here is called from one place there.
"""
from __future__ import annotations

import argparse
import os
from typing import Callable

from transforms.model import ProcessInfo, Session

from .._words import plural
from ..analysis import owners, process_label, process_session, process_sessions, run_divergence

EXIT_OK, EXIT_BAD_INPUT = 0, 2


def run_processes(args: argparse.Namespace, note: Callable[[argparse.Namespace, str], None],
                  error: Callable[[str], None], open_tui: Callable[..., int]) -> int:
    """`workbench run --processes N SCRIPT.py ARGS`: launch, merge, write or open."""
    from .. import run
    try:
        run.check_script(args.script)
    except run.ScriptError as e:
        error(str(e))
        return EXIT_BAD_INPUT
    workdir = os.path.dirname(os.path.abspath(args.output)) if args.output else None
    try:
        result = run.launch(
            os.path.abspath(args.script), args.args, args.processes, timeout=args.timeout,
            devices=args.devices_per_process, stages=args.stages, inline_jnp=args.inline_jnp,
            note=lambda text: note(args, text), workdir=workdir)
    except run.NotOneJob as e:
        error(str(e))
        return e.exit_code or EXIT_BAD_INPUT
    session = result.session
    session.title = next((p.title for p in session.processes if p.title), "") or \
        os.path.basename(args.script)
    summary = "; ".join(_process_line(p.info, len(p.calls), p.step_count)
                        for p in session.processes)
    if args.output is not None:
        session.save(args.output)
        note(args, f"recorded {len(session.processes)} processes ({summary}); "
                   f"wrote {args.output}")
        return result.exit_code
    note(args, f"recorded {len(session.processes)} processes ({summary})")
    code = open_tui(session, session.title, "use -o trace.json")
    return result.exit_code if code == EXIT_OK else code


def _process_line(info: ProcessInfo, calls: int, steps: int) -> str:
    status = info.status or "ended"
    return f"process {info.index}: {plural(calls, 'call')}, {plural(steps, 'step')}, {status}"


def check_process(session: Session, index: int | None) -> str:
    """"" when `index` is None or a process of the run, else what is wrong."""
    known = [p.info.index for p in session.processes]
    if index is None or index in known:
        return ""
    return f"has no process {index} (its processes: {', '.join(map(str, known))})"


def info_text(info: ProcessInfo) -> str:
    """`process 1/2 on host (pid 4242): devices 2048,2049 of 4; stopped (...)`."""
    where = f" on {info.host}" if info.host else ""
    pid = f" (pid {info.pid})" if info.pid else ""
    local = ",".join(map(str, info.local_devices)) or "?"
    text = (f"{process_label(info)}{where}{pid}: devices {local} "
            f"of {len(info.devices) or '?'}")
    if info.status:
        text += f"; {info.status}"
        if info.message and info.message != "ended normally":
            text += f": {info.message}"
    if not info.complete:
        text += "; recorded until stopped (the call in progress is not included)"
    return text


def show_processes(session: Session, args: argparse.Namespace,
                   error: Callable[[str], None]) -> int:
    """`workbench show RUN.json`: the processes, their devices, then each one's calls."""
    from .._safe_text import terminal
    from ._compile_table import compile_lines
    from ._summary import summarize_call

    def say(text: str = "") -> None:  # every line made terminal-safe
        print(terminal(text, 20_000, lines=True))

    problem = check_process(session, args.process)
    if problem:
        error(f"{args.trace}: {problem}")
        return EXIT_BAD_INPUT
    views = process_sessions(session)
    say(f"{args.trace}: a run of {plural(len(views), 'process', 'processes')}, "
        f"{plural(session.step_count, 'step')} "
        f"(jax {session.jax_version}, python {session.python_version})")
    if session.title:
        say(f"title: {session.title}")
    owner = owners(session)
    if owner:
        groups = ", ".join(f"process {p}: {','.join(str(d) for d, q in owner.items() if q == p)}"
                           for p in sorted(set(owner.values())))
        say(f"devices: {len(owner)} global ({groups})")
    found = run_divergence(session)
    if found is not None:
        say(f"WARNING: {found.describe()}")
    for view in views:
        info = view.process
        if args.process is not None and (info is None or info.index != args.process):
            continue
        say()
        say(info_text(info) if info is not None else "process ?")
        say(f"  {plural(len(view.calls), 'call')}, {plural(view.step_count, 'step')}")
        calls = view.calls
        if args.call is not None:
            calls = [c for c in calls if c.index == args.call]
        for call in calls:
            say("\n".join("  " + line for line in summarize_call(call, with_steps=args.steps,
                                                                   expand=args.expand)))
        compiles = compile_lines(view) if args.call is None else []
        if compiles:  # this process's jits: what it traced and compiled
            say("\n".join("  " + line for line in compiles))
    return EXIT_OK


def pick_processes(session: Session,
                   args: argparse.Namespace) -> tuple[Session, Session, str, str] | str:
    """The two processes `workbench diff RUN.json [--processes I,J]` compares, named."""
    if not session.processes:
        return ("not a multi-process run: give a second dump to compare with (or use "
                "`workbench run --processes N` to record one)")
    indices: list[int]
    if args.processes is not None:
        try:
            indices = [int(x) for x in args.processes.split(",")]
        except ValueError:
            return f"--processes takes two process indices, I,J (got {args.processes!r})"
        if len(indices) != 2:
            return f"--processes takes two process indices, I,J (got {args.processes!r})"
    else:
        found = run_divergence(session)
        indices = [found.process_a, found.process_b] if found is not None else \
            sorted(p.info.index for p in session.processes)[:2]
    for i in indices:
        problem = check_process(session, i)
        if problem:
            return problem
    if len(session.processes) < 2:
        return "the run has one process: nothing to compare it with"
    a, b = (process_session(session, i) for i in indices)
    return a, b, f"{args.a} process {indices[0]}", f"{args.a} process {indices[1]}"
