"""The `workbench` command: browse, run, dump, compare and document recorded JAX traces.

    workbench demo [--export DIR]          the gallery of seed examples (TUI, or files in DIR)
    workbench run SCRIPT.py [ARGS...]      run a script unchanged, recording jax.grad/vmap/jit/...
    workbench dump SCRIPT.py -o OUT.json   the same, writing the dump, no terminal UI
    workbench open TRACE.json              browse a dump in the terminal UI
    workbench show TRACE.json              a plain-text summary of a dump
    workbench diff A.json B.json           calls, stages and equation counts that changed
    workbench html TRACE.json -o OUT.html  a dump as one standalone HTML page
    workbench schema                       the JSON Schema of a dump

Exit codes: 0 ok; 1 the user's script failed (run/dump: the script's own exit
code is passed through, 1 for an uncaught exception, 130 for Ctrl-C; diff: a
--fail-on-* check failed; demo: a gallery example broke); 2 bad usage or bad
input (a missing file, a script with a syntax error, a corrupt, truncated or
newer-version dump, unrelated traces given to diff, no terminal UI available).

The commands that only read dumps (open, show, diff, merge, schema) are `_read_commands.py`,
what every handler shares `_shared.py`; demo and run/dump stay here.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .._safe_text import terminal as _t
from .._words import plural
from ._args import build_parser, take_trailing_options
from ._read_commands import diff_command, merge_command, open_command, schema_command, show_command
from ._shared import (
    EXIT_BAD_INPUT,
    EXIT_NONFINITE,
    EXIT_OK,
    EXIT_SCRIPT_FAILED,
    EXIT_TOO_MANY_COMPILES,
    error,
    no_terminal,
    note,
    open_tui,
    usable_folder,
)

if TYPE_CHECKING:
    from transforms.model import Session

# NB: transforms.model and .saving are imported where they are used (in _read_commands.py
# and _shared.py too): `workbench open` draws its first frame before the dump's model is
# imported (the gate in bench/bench_tui.py).


def main(argv: Sequence[str] | None = None) -> int:
    supervised = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["graph"]:
        return _graph(argv[1:])
    if argv[:1] == ["html"]:
        return _html(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    # run/dump as the command (not called in-process): a parent process watches the script's
    # and says how it ended if it dies (workbench/run/_supervise.py)
    args.supervised = supervised
    if args.command is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {
        "demo": _demo, "run": _run, "dump": _run, "open": open_command, "show": show_command,
        "diff": diff_command, "schema": schema_command, "merge": merge_command}
    try:
        return handlers[args.command](args)
    except BrokenPipeError:
        # `workbench show big.json | head`: the reader left; say nothing more.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


def _graph(argv: list[str]) -> int:
    """`workbench graph ...` is `workbench.export.main`."""
    from ..export import main as graph_main
    return graph_main(argv)


def _html(argv: list[str]) -> int:
    """`workbench html ...` is `workbench.html.main`."""
    from ..html import main as html_main
    return html_main(argv)


# --- demo ---------------------------------------------------------------------

# `workbench demo` runs the sharded example on this many CPU devices.
DEMO_DEVICES_FLAG = "--xla_force_host_platform_device_count"


def ask_for_demo_devices(count: int = 8) -> None:
    """Ask XLA for `count` CPU devices unless the user set the flag themselves.

    NB: XLA reads XLA_FLAGS when JAX creates its CPU backend, at the first
    computation or device query, so this must run before the gallery imports
    (which build arrays). Only `demo` calls it: `run` leaves scripts unchanged.
    """
    flags = os.environ.get("XLA_FLAGS", "")
    if DEMO_DEVICES_FLAG not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {DEMO_DEVICES_FLAG}={count}".strip()


def _demo(args: argparse.Namespace) -> int:
    ask_for_demo_devices()
    from .. import gallery
    examples = list(gallery.EXAMPLES)
    if args.list:
        for ex in examples:
            print(f"{ex.name:28} seed {ex.seed}  {ex.title}")
        return EXIT_OK
    if args.only:
        known = {ex.name for ex in examples}
        unknown = [n for n in args.only if n not in known]
        if unknown:
            error(f"no gallery example {', '.join(map(repr, unknown))}; "
                  f"`workbench demo --list` lists them")
            return EXIT_BAD_INPUT
        examples = [ex for ex in examples if ex.name in args.only]
    if args.export is None:
        reason = no_terminal()
        if reason:
            error(f"{reason}; use `workbench demo --export DIR` to write the gallery's "
                  f"dumps and index instead")
            return EXIT_BAD_INPUT
    else:
        problem = usable_folder(args.export)
        if problem:
            error(problem)
            return EXIT_BAD_INPUT
    if args.export is None:
        return _demo_tui(examples, args.export_dir)
    outcomes = _record_gallery(examples, quiet=args.quiet)
    broken = [o for o in outcomes if not o.ok]
    for o in broken:
        error(f"gallery example {o.example.name} broke: {o.error}\n{o.traceback}")
    exporter: Callable[[Session, str, str], list[str]] | None = None
    if not args.no_graphs:
        from ..export import export_session_graphs as exporter
    # Writing dumps is quick; drawing graphs is the slow part that deserves a progress display.
    index = write_gallery(outcomes, args.export, exporter, quiet=args.quiet or exporter is None)
    note(args, f"wrote {len(outcomes)} dumps and {index} "
               f"({plural(sum(o.session.step_count for o in outcomes), 'step')})")
    return EXIT_SCRIPT_FAILED if broken else EXIT_OK


def _demo_tui(examples: list, export_dir: str | None) -> int:
    """The picker at once; each example is recorded in the background (the one opened first).

    On quit, an example still recording is abandoned: its output must not reach the shell,
    and the process must not wait for it (the gallery keeps nothing on disk to save).
    """
    from .. import gallery
    from ..tui import run_gallery
    broken = []
    quitting = threading.Event()
    recording = threading.Event()

    def record(i: int) -> Session:
        if quitting.is_set():
            raise RuntimeError("the gallery was closed")
        recording.set()
        try:
            o = gallery.run_example(examples[i])
        finally:
            recording.clear()
        if not o.ok:
            broken.append(o)
        return o.session

    # NB: an example prints into its own buffer (run_example's redirect_stdout), but once the
    # app restores the stream it found, one still running on quit would print into the shell.
    shell = sys.stdout
    sys.stdout = _MainThreadOnly(shell)
    try:
        run_gallery([(ex.title, ex.explanation) for ex in examples], record,
                    title="Gallery of the seed examples", export_dir=export_dir)
    finally:
        quitting.set()
    for o in broken:
        error(f"gallery example {o.example.name} broke: {o.error}\n{o.traceback}")
    code = EXIT_SCRIPT_FAILED if broken else EXIT_OK
    if recording.is_set():  # an example is still running in its thread: leave it
        shell.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.stdout = shell
    return code


class _MainThreadOnly:
    """A stream that takes the main thread's writes and drops the others'."""

    def __init__(self, stream: Any):
        self._stream = stream

    def write(self, text: str) -> int:
        if threading.current_thread() is threading.main_thread():
            return self._stream.write(text)
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _record_gallery(examples: list, quiet: bool) -> list:
    from .. import gallery
    from ._progress import Progress
    outcomes = []
    with Progress("Recording the gallery", len(examples), quiet=quiet) as progress:
        for ex in examples:
            progress.start(ex.name)
            o = gallery.run_example(ex)
            outcomes.append(o)
            done = (f"{plural(len(o.session.calls), 'call')}, "
                    f"{plural(o.session.step_count, 'step')}, {o.seconds:.1f} s")
            progress.advance(ex.name, done if o.ok else f"{done}, BROKE: {o.error}")
    return outcomes


def write_gallery(outcomes: list, folder: str,
                  exporter: Callable[[Session, str, str], list[str]] | None = None,
                  quiet: bool = True) -> str:
    """One dump per example, graph images when an exporter is given, index.json and index.md."""
    from transforms.model import SCHEMA_VERSION, write_atomically

    from ._progress import Progress
    entries = []
    with Progress("Writing the exports", len(outcomes), quiet=quiet) as progress:
        for number, o in enumerate(outcomes, 1):
            stem = f"{number:02d}-{o.example.name}"
            progress.start(stem)
            o.session.save(os.path.join(folder, stem + ".json"))
            graphs = []
            if exporter is not None:
                graphs = [os.path.relpath(p, folder) for p in exporter(o.session, folder, stem)]
            entries.append(_index_entry(number, stem, o, graphs))
            progress.advance(stem)
    index = {
        "gallery": "jax-transform-workbench/gallery",
        "schema_version": SCHEMA_VERSION,
        "jax_version": outcomes[0].session.jax_version if outcomes else "",
        "python_version": outcomes[0].session.python_version if outcomes else "",
        "examples": entries,
    }
    write_atomically(os.path.join(folder, "index.json"), json.dumps(index, indent=2) + "\n")
    write_atomically(os.path.join(folder, "index.md"), _index_markdown(index))
    return os.path.join(folder, "index.json")


def _index_entry(number: int, stem: str, o: Any, graphs: list[str]) -> dict[str, Any]:
    s = o.session
    return {
        "number": number, "name": o.example.name, "title": o.example.title,
        "seed": o.example.seed, "explanation": o.example.explanation,
        "dump": stem + ".json", "graphs": graphs,
        "calls": len(s.calls), "steps": s.step_count,
        "stages": sum(len(c.stages) for c in s.calls),
        "errors": [{"call": c.index, "transform": c.transform, "function": c.function,
                    "type": e.type_name, "message": e.message.splitlines()[0] if e.message else ""}
                   for c in s.calls for e in c.errors],
        "shows_failure": o.example.shows_failure,
        "shown_failures": list(o.shown_failures),
        "output": o.output, "ok": o.ok, "error": o.error,
        "seconds": round(o.seconds, 3),
    }


def _index_markdown(index: dict[str, Any]) -> str:
    lines = ["# Gallery of the seed examples", "",
             f"Recorded with jax {index['jax_version']}, Python {index['python_version']}. "
             f"Open a dump with `workbench open FILE` or `workbench show FILE`.", "",
             "| # | example | seed | calls | steps | errors | dump |",
             "|---|---|---|---|---|---|---|"]
    for e in index["examples"]:
        errors = ", ".join(sorted({x["type"].rsplit(".", 1)[-1] for x in e["errors"]})) or "-"
        if e["error"]:
            errors += f" (example BROKE: {e['error']})"
        lines.append(f"| {e['number']} | {_md(e['title'])} | {e['seed']} | {e['calls']} | "
                     f"{e['steps']} | {_md(errors)} | [{e['dump']}]({e['dump']}) |")
    for e in index["examples"]:
        lines += ["", f"## {e['number']}. {e['title']}", "", e["explanation"], ""]
        lines.append(f"`{e['name']}` (seed {e['seed']}): {plural(e['calls'], 'call')}, "
                     f"{plural(e['steps'], 'step')}, {plural(e['stages'], 'stage')}; "
                     f"dump [{e['dump']}]({e['dump']})")
        for g in e["graphs"]:
            lines.append(f"- graph: [{g}]({g})")
        for x in e["errors"]:
            lines.append(f"- call {x['call']} {x['transform']}({x['function']}) failed: "
                         f"`{x['type']}`: {_md(x['message'])}")
        if e["output"].strip():
            lines += ["", "Printed:", "", "```", e["output"].rstrip("\n"), "```"]
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# --- run / dump ---------------------------------------------------------------

def _run(args: argparse.Namespace) -> int:
    from .. import run
    problem = take_trailing_options(args) or _process_options(args)
    if problem:
        error(f"{problem}; see `workbench {args.command} --help`")
        return EXIT_BAD_INPUT
    try:  # what is wrong with the script first (no such file), before how to run it
        run.check_script(args.script)
    except run.ScriptError as e:
        error(str(e))
        return EXIT_BAD_INPUT
    if args.command == "run" and args.output is None:
        reason = no_terminal()
        if reason:
            error(f"{reason}; use `workbench run -o trace.json {args.script} ...` or "
                  f"`workbench dump` to write the dump instead")
            return EXIT_BAD_INPUT
    to_stdout = args.output is not None and run.is_stdout(args.output)
    if to_stdout and args.processes is not None:
        error(f"-o {args.output} streams one dump to stdout; --processes writes one a process: "
              f"give a folder (-o DIR/) or a file name")
        return EXIT_BAD_INPUT
    if args.output is not None and not to_stdout:
        from ..run import is_folder, usable_output
        # NB: a folder (DIR/) takes one dump per process of a jax.distributed job.
        problem = usable_folder(args.output) if is_folder(args.output) and \
            args.processes is None else usable_output(args.output)
        if problem:
            error(problem)
            return EXIT_BAD_INPUT
    if getattr(args, "max_compiles", None) is not None and (
            getattr(args, "watch", False) or args.processes is not None):
        error("--max-compiles checks one recording of the script; it does not take "
              "--watch or --processes")
        return EXIT_BAD_INPUT
    if getattr(args, "watch", False):
        if args.processes is not None:
            error("--watch records the script in one process; it does not take --processes")
            return EXIT_BAD_INPUT
        return _watch(args)
    if args.processes is not None:
        from ._process_commands import run_processes
        return run_processes(args, note, error, open_tui)
    if sys.stderr.isatty():  # a person waits: say what happens until the script ends
        then = "the terminal UI opens" if args.output is None else \
            "the dump is written to stdout" if to_stdout else f"{args.output} is written"
        note(args, f"running {args.script}, recording its jax.grad, vmap, jit, ... calls; "
                   f"{then} when it ends")
    # The journal: what is recorded reaches a file as each call finishes (a hard death of
    # the script keeps it). NB: not in a process of `--processes`: its launcher watches it.
    journal_file = None if os.environ.get(run.ENV_CONTROL_FD) or not args.journal else \
        run.journal_path(args.output)
    if journal_file is not None and getattr(args, "supervised", False):
        death = run.watch_in_parent(journal_file)
        if death is not None:
            return _after_child(args, death, journal_file)
    journal, problem = run.open_journal(journal_file, args.script, args.args) \
        if journal_file is not None else (None, "")
    if problem:
        note(args, problem)
    try:
        # NB: with the dump on stdout, what the script prints goes to stderr meanwhile.
        with run.stdout_to_stderr() if to_stdout else contextlib.nullcontext():
            result = run.run_script(args.script, args.args, stages=args.stages,
                                    inline_jnp=args.inline_jnp,
                                    max_steps=args.max_steps or None,
                                    note=lambda message: note(args, message),
                                    find_nans=args.find_nans, keep_going=args.keep_going,
                                    values=args.values, journal=journal)
    except run.ScriptError as e:
        if journal is not None:
            journal.remove()
        error(str(e))
        return EXIT_BAD_INPUT
    if journal is not None:
        journal.close()
    session = result.session
    exit_code = _nonfinite_exit(args, result)
    if exit_code == EXIT_OK:
        exit_code = _compiles_exit(args, session)
    what = f"{plural(len(session.calls), 'call')}, {plural(session.step_count, 'step')}"
    if result.interrupted:
        what += f" (interrupted: what was recorded until {result.signal or 'Ctrl-C'})"
    elif result.error is not None:
        what += " (up to the script's failure)"
    if session.dropped_calls:
        what += f"; {session.dropped_note()} (--max-steps)"
    if session.unrecorded_calls:
        what += f"; {session.unrecorded_note()}"
    if to_stdout:
        _save(args, session, what, args.output, "wrote the dump to stdout", journal_file)
        return exit_code
    if args.output is not None:
        from ..run import dump_path
        try:
            path, where = dump_path(args.output, session)
        except OSError:  # a folder that cannot be made: the save falls back, and says so
            path, where = os.path.join(args.output, "process-0.json"), ""
        _save(args, session, what, path, where, journal_file)
        return exit_code
    if journal_file is not None:  # the session is whole in memory: the journal is not needed
        _remove(journal_file)
    note(args, f"recorded {what}")
    code = open_tui(session, session.title or args.script, "use -o trace.json",
                    export_dir=args.export_dir)
    return exit_code if code == EXIT_OK else code


def _nonfinite_exit(args: argparse.Namespace, result: Any) -> int:
    """`run --find-nans`: the finding said on stderr (unless its traceback said it), and the
    exit code: EXIT_NONFINITE when one was found without --keep-going, else the script's."""
    if not args.find_nans:
        return result.exit_code
    found = next((c for c in result.session.calls if c.nonfinite), None)
    if found is None:
        note(args, "--find-nans: no NaN or Inf in the recorded calls' outputs")
        return result.exit_code
    from transforms import NonFiniteFound
    if not isinstance(result.error, NonFiniteFound):
        lines = [f"call {found.index} ({found.function}) returned a NaN or Inf"]
        lines += [line for f in found.nonfinite for line in f.lines()]
        error("--find-nans: " + "\n".join(_t(line) for line in lines))
    return result.exit_code if args.keep_going else EXIT_NONFINITE


def _compiles_exit(args: argparse.Namespace, session: Any) -> int:
    """`run --max-compiles N`: EXIT_TOO_MANY_COMPILES, with each function's count and
    reasons on stderr, when the script's jitted functions compiled more than N times."""
    if args.max_compiles is None:
        return EXIT_OK
    from ..analysis import compile_groups, reason_lines, short_place
    groups = [g for g in compile_groups(session) if not g.internal]
    total = sum(g.compiles for g in groups)
    if total <= args.max_compiles:
        return EXIT_OK
    lines = [f"--max-compiles {args.max_compiles}: your jitted functions compiled {total} times"]
    for group in groups:
        lines.append(f"  {group.function} at {short_place(group.location)}: "
                     f"{plural(group.compiles, 'compile')}")
        lines += [f"    {text}" for text, _, _ in reason_lines(group)]
    error("\n".join(_t(line) for line in lines))
    return EXIT_TOO_MANY_COMPILES


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
    code = open_tui(first.session, first.session.title or args.script, "use -o trace.json",
                    export_dir=args.export_dir, watch=watch)
    # Said once the TUI has closed, of the latest recording (the TUI showed each in turn).
    if code == EXIT_OK and watch.last is not None:
        note(args, f"last recorded: {watch.last.note}")
    return code


def _after_child(args: argparse.Namespace, death: Any, journal_file: str) -> int:
    """The parent, once the script's process ended: its exit code when it saved; else what
    its journal holds, saved (or shown) with how it ended."""
    if isinstance(death, int):
        return death
    if death.recovered is None:
        error(f"{death.how}; its journal {journal_file} could not be read ({death.problem})")
        return death.exit_code
    died_in = death.recovered.died_in() is not None  # listed as a failed call
    session = death.recovered.as_session()
    what = plural(len(session.calls) - died_in, 'call') + \
        (" and the call it died in" if died_in else "") + f", {plural(session.step_count, 'step')}"
    error(f"{_t(session.metadata['ended'])}; recovered {what} from its journal")
    if session.metadata.get("journal_notes"):
        error(_t(session.metadata["journal_notes"]))
    if args.output is not None:
        _save(args, session, what + " (recovered)", args.output, "", journal_file)
        return death.exit_code
    _remove(journal_file)
    code = open_tui(session, session.title or args.script, "use -o trace.json",
                    export_dir=args.export_dir)
    return death.exit_code if code == EXIT_OK else code


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _save(args: argparse.Namespace, session: Session, what: str, path: str,
          where: str = "", journal_file: str | None = None) -> None:
    """Save the recording to `path`, saying where it went; the exit code stays the script's.

    `where`: what to say when it was written there (a process's dump in a folder).
    NB: the notes of a failure are printed even with --quiet: they say where the
    recording is."""
    from ..run import fallback_paths, save_recording
    outcome = save_recording(session, path, lambda message: note(args, message))
    if journal_file is not None and outcome.path is not None:  # the dump holds it all now
        _remove(journal_file)
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


if __name__ == "__main__":
    sys.exit(main())
