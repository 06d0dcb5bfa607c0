"""`workbench run` and `workbench dump`: a script run unchanged and recorded, then opened in
the terminal UI or saved (`--watch`: recorded again on every change; `--processes N`: a
jax.distributed job, by _process_commands.py)."""
from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from ._args import take_trailing_options
from ._shared import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    error,
    no_terminal,
    note,
    open_tui,
    usable_folder,
)

if TYPE_CHECKING:
    from transforms.model import Session


def run_command(args: argparse.Namespace) -> int:
    from .. import run
    problem = take_trailing_options(args) or _process_options(args)
    if problem:
        error(f"{problem}; see `workbench {args.command} --help`")
        return EXIT_BAD_INPUT
    if args.command == "run" and args.output is None:
        reason = no_terminal()
        if reason:
            error(f"{reason}; use `workbench run -o trace.json {args.script} ...` or "
                  f"`workbench dump` to write the dump instead")
            return EXIT_BAD_INPUT
    if args.output is not None:
        from ..run import is_folder, usable_output
        # NB: a folder (DIR/) takes one dump per process of a jax.distributed job.
        problem = usable_folder(args.output) if is_folder(args.output) and \
            args.processes is None else usable_output(args.output)
        if problem:
            error(problem)
            return EXIT_BAD_INPUT
    if getattr(args, "watch", False):
        if args.processes is not None:
            error("--watch records the script in one process; it does not take --processes")
            return EXIT_BAD_INPUT
        return _watch(args)
    if args.processes is not None:
        from ._process_commands import run_processes
        return run_processes(args, note, error, open_tui)
    try:
        result = run.run_script(args.script, args.args, stages=args.stages,
                                   inline_jnp=args.inline_jnp,
                                   max_steps=args.max_steps or None,
                                   note=lambda message: note(args, message))
    except run.ScriptError as e:
        error(str(e))
        return EXIT_BAD_INPUT
    session = result.session
    what = f"{len(session.calls)} calls, {session.step_count} steps"
    if result.interrupted:
        what += f" (interrupted: what was recorded until {result.signal or 'Ctrl-C'})"
    elif result.error is not None:
        what += " (up to the script's failure)"
    if session.dropped_calls:
        what += f"; {session.dropped_note()} (--max-steps)"
    if args.output is not None:
        from ..run import dump_path
        try:
            path, where = dump_path(args.output, session)
        except OSError:  # a folder that cannot be made: the save falls back, and says so
            path, where = os.path.join(args.output, "process-0.json"), ""
        _save(args, session, what, path, where)
        return result.exit_code
    note(args, f"recorded {what}")
    code = open_tui(session, session.title or args.script, "use -o trace.json",
                    export_dir=args.export_dir)
    return result.exit_code if code == EXIT_OK else code


def _watch(args: argparse.Namespace) -> int:
    """`run --watch`: record in a fresh process now and on every change, the TUI open."""
    from .. import run
    from ..run import Watch
    if args.output is not None:
        error("--watch shows each recording in the terminal UI; it does not take -o")
        return EXIT_BAD_INPUT
    try:
        run.check_script(args.script)
    except run.ScriptError as e:
        error(str(e))
        return EXIT_BAD_INPUT
    options = [flag for flag, on in (("--stages", args.stages), ("--inline-jnp", args.inline_jnp))
               if on]
    watch = Watch(args.script, list(args.args), options)
    note(args, f"recording {args.script} (watching it for changes)")
    first = watch.record()
    if first.session is None:
        error(first.note)
        return EXIT_BAD_INPUT
    note(args, f"recorded {first.note}")
    return open_tui(first.session, first.session.title or args.script, "use -o trace.json",
                    export_dir=args.export_dir, watch=watch)


def _save(args: argparse.Namespace, session: Session, what: str, path: str,
          where: str = "") -> None:
    """Save the recording to `path`, saying where it went; the exit code stays the script's.

    `where`: what to say when it was written there (a process's dump in a folder).
    NB: the notes of a failure are printed even with --quiet: they say where the
    recording is."""
    from ..run import fallback_paths, save_recording
    outcome = save_recording(session, path, lambda message: note(args, message))
    if outcome.path == path:
        note(args, f"recorded {what}; " + (where or f"wrote {path}"))
    elif outcome.path is not None:
        error(f"recorded {what}; could not write {path} ({outcome.problem}), so "
              f"the recording was saved to {outcome.path}")
    elif outcome.abandoned:
        error(f"recorded {what}; {outcome.problem}: nothing was written "
              f"(an existing {path} is kept)")
    else:
        error(f"recorded {what}; could not write {path} ({outcome.problem}) nor any "
              f"fallback ({', '.join(fallback_paths(path)) or 'none'}): the recording "
              f"is lost")


def _process_options(args: argparse.Namespace) -> str:
    if args.processes is None:
        if args.timeout is not None or args.devices_per_process is not None:
            return "--timeout and --devices-per-process go with --processes N"
        return ""
    from ..run import MAX_PROCESSES
    if not 1 <= args.processes <= MAX_PROCESSES:
        return f"--processes takes 1 to {MAX_PROCESSES}"
    if args.timeout is not None and args.timeout <= 0:
        return "--timeout takes a positive number of seconds"
    if args.devices_per_process is not None and args.devices_per_process < 1:
        return "--devices-per-process takes a positive count"
    return ""
