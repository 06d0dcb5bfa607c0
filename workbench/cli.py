"""The `workbench` command: browse, run, dump, compare and document recorded JAX traces.

    workbench demo [--export DIR]          the gallery of seed examples (TUI, or files in DIR)
    workbench run SCRIPT.py [ARGS...]      run a script unchanged, recording jax.grad/vmap/jit/...
    workbench dump SCRIPT.py -o OUT.json   the same, writing the dump, no terminal UI
    workbench open TRACE.json              browse a dump in the terminal UI
    workbench show TRACE.json              a plain-text summary of a dump
    workbench diff A.json B.json           calls, stages and equation counts that changed
    workbench schema                       the JSON Schema of a dump

Exit codes: 0 ok; 1 the user's script failed (run/dump: the script's own exit
code is passed through, 1 for an uncaught exception, 130 for Ctrl-C; diff: a
--fail-on-* check failed; demo: a gallery example broke); 2 bad usage or bad
input (a missing file, a script with a syntax error, a corrupt, truncated or
newer-version dump, unrelated traces given to diff, no terminal UI available).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .safe_text import first_line as _first_line
from .safe_text import terminal as _t

if TYPE_CHECKING:
    from transforms.record import Call, Session, Step

# NB: transforms.record and .saving are imported where they are used: `workbench open`
# draws its first frame before the dump's model is imported (the gate in bench/bench_tui.py).

EXIT_OK, EXIT_SCRIPT_FAILED, EXIT_BAD_INPUT = 0, 1, 2

# `workbench run --max-steps`: about 100 MB of dump and 1 GB of memory at this many steps.
DEFAULT_MAX_STEPS = 1_000_000

EXIT_CODES_TEXT = ("Exit codes: 0 ok, 1 the user's script failed, 2 bad usage or bad input "
                   "(details in each command's --help).")


class _Formatter(argparse.HelpFormatter):
    pass


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="workbench", formatter_class=_Formatter,
        description="See what JAX's transformations do: record them, browse, dump and compare "
                    "the recordings.",
        epilog=EXIT_CODES_TEXT)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, help: str, description: str, exits: str) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=help, description=description,
                                   epilog=f"Exit codes: {exits}", formatter_class=_Formatter)

    demo = command(
        "demo", "the gallery of seed examples, recorded live (TUI, or --export DIR)",
        "Record every example of the gallery (the seed documents: grad, vmap, jit, tracers, "
        "jaxprs, control flow, pytrees, custom_jvp), each into its own session, and open them "
        "in the terminal UI; with --export DIR, write one JSON dump per example, graph images "
        "where the Graphviz exporter is available, and index.json + index.md, with no "
        "terminal needed.",
        "0 ok; 1 a gallery example itself broke (the others are still written); "
        "2 bad usage, DIR unusable, or no terminal UI without --export.")
    demo.add_argument("--export", metavar="DIR", help="write the dumps and the index to DIR")
    demo.add_argument("--only", metavar="NAME", action="append",
                      help="only this example (repeatable); see --list")
    demo.add_argument("--list", action="store_true", help="list the examples and exit")
    demo.add_argument("--no-graphs", action="store_true", help="with --export: skip images")
    demo.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    _export_dir_argument(demo)

    run_exits = ("the script's own exit code (0 when it ends normally, its sys.exit code, "
                 "1 for an uncaught exception with the traceback printed as Python prints it, "
                 "130, 143, 129 for Ctrl-C, SIGTERM, SIGHUP); the dump is written in every "
                 "case: when -o cannot be written (disk full, folder gone or read-only) it goes "
                 "to a fallback path that is printed, and the exit code stays the script's; 2 "
                 "the script could not be run at all (no such file, a syntax error) or bad "
                 "usage: nothing ran and no dump is written.")
    run_description = (
        "Run SCRIPT.py as `python SCRIPT.py ARGS...` would (sys.argv, __name__ == '__main__', "
        "its folder first on sys.path), with jax.grad, value_and_grad, vmap, jit, jvp, vjp, "
        "linearize, jacfwd, jacrev and hessian replaced by the recording versions from "
        "`transforms` for the duration of the run (also for libraries that call them as "
        "jax.grad(...) at call time), then restored. The script's output and exit code are "
        "unchanged; workbench's own notes go to stderr, prefixed `workbench:`. A script that "
        "raises, or Ctrl-C (or SIGTERM, SIGHUP), still leaves the dump of what was recorded; "
        "a single Ctrl-C during the final save does not stop it. -o may name a symlink (its "
        "target is written), a FIFO or a device (streamed into, never replaced).")
    run = command("run", "run a JAX script unchanged, recording its transformations",
                  run_description + " Without -o, opens the terminal UI on the recording; "
                  "with --watch, records again whenever SCRIPT.py changes and shows the new "
                  "recording in place, at the same call and step.",
                  run_exits)
    run.add_argument("--watch", action="store_true",
                     help="re-record when SCRIPT.py changes and refresh the open terminal UI "
                          "in place (each run in a fresh process; what it prints is in the "
                          "Output view)")
    _export_dir_argument(run)
    _script_arguments(run, output_required=False)
    dump = command("dump", "like run, writing the dump (-o) with no terminal UI",
                   run_description, run_exits)
    _script_arguments(dump, output_required=True)

    open_ = command("open", "browse a dump in the terminal UI",
                    "Open a session dump (written by `workbench run -o`, `demo --export` or "
                    "Session.save()) in the terminal UI.",
                    "0 ok; 2 the file is missing, corrupt, truncated or from a newer schema, "
                    "or no terminal UI is available.")
    open_.add_argument("trace", metavar="TRACE.json", help="a session dump")
    open_.add_argument("--process", type=int, metavar="I",
                       help="a multi-process run: start at process I (p switches)")
    _export_dir_argument(open_)

    show = command("show", "print a summary of a dump (calls, levels, steps, errors)",
                   "Print a summary of a session file written by Session.save().",
                   "0 ok; 2 the file is missing, corrupt, truncated or from a newer schema, "
                   "or --call names no call.")
    show.add_argument("trace", metavar="TRACE.json", help="a session file")
    show.add_argument("--call", type=int, metavar="N", help="only call N (its index)")
    show.add_argument("--steps", action="store_true", help="list every step of each call")
    show.add_argument("--expand", action="store_true",
                      help="list every level: by default a run of identical sibling levels (a "
                           "relu's custom_jvp once per layer, a solver step per iteration) is "
                           "one row with its count")
    show.add_argument("--process", type=int, metavar="I",
                      help="a multi-process run: only process I (default: every process)")

    diff = command(
        "diff", "what changed between two dumps: calls, stages, equation counts",
        "Compare two session dumps. Calls are matched by index, transform and function; for "
        "each matched call the step count, levels, errors and every stage's equation count "
        "and primitive histogram are compared (stages exist when recorded with "
        "stages=True or `workbench run --stages`). Two traces with calls but none in common "
        "are reported as unrelated. In CI: `workbench diff base.json new.json "
        "--fail-on-growth` fails the build when a refactor grows a jaxpr.",
        "0 compared (and no --fail-on-* check failed); 1 --fail-on-growth and an equation "
        "count grew, or --fail-on-change and anything changed; 2 a file is missing or "
        "unreadable, or the traces are unrelated.")
    diff.add_argument("a", metavar="A.json", help="the first (baseline) dump")
    diff.add_argument("b", metavar="B.json", nargs="?",
                      help="the second dump; leave it out to compare two processes of the "
                           "multi-process run A.json (see --processes)")
    diff.add_argument("--processes", metavar="I,J",
                      help="with one multi-process run: the two processes to compare "
                           "(default: the first divergent pair, else 0,1)")
    diff.add_argument("--json", action="store_true", help="print the diff as JSON")
    diff.add_argument("--fail-on-growth", action="store_true",
                      help="exit 1 if any stage's equation count grew from A to B")
    diff.add_argument("--fail-on-change", action="store_true",
                      help="exit 1 if anything changed")
    diff.add_argument("-v", "--verbose", action="store_true", help="also list unchanged calls")

    merge = command(
        "merge", "merge the dumps of a multi-process run's processes into one session",
        "Merge per-process dumps (each written by `workbench run`/`dump` inside one process "
        "of a jax.distributed job, e.g. started by your own launcher) into one session file, "
        "ordered by process index. `workbench run --processes N` merges by itself.",
        "0 merged; 2 a dump is unreadable, is not from a process of a jax.distributed run, "
        "or two dumps are of the same process.")
    merge.add_argument("output", metavar="OUT.json", help="the merged session file to write")
    merge.add_argument("dumps", metavar="PROCESS.json", nargs="+",
                       help="the per-process dumps (or a folder of them)")

    # `workbench graph` is the Graphviz exporter's (workbench.export); main() hands it its
    # arguments, so this entry is only for the command list and --help.
    commands.add_parser("graph", help="draw a call of a dump with Graphviz (see "
                        "`workbench graph --help`)", add_help=False).add_argument(
        "rest", nargs=argparse.REMAINDER)

    schema = command("schema", "print the JSON Schema of a dump (or validate dumps against it)",
                     "Print the JSON Schema (draft 2020-12) of session dumps, generated from "
                     "the record classes of transforms/record.py; the project keeps a copy in "
                     "workbench/schema/session.schema.json. With --validate, check dumps "
                     "against it instead.",
                     "0 ok (every dump valid); 2 a dump is invalid or unreadable, or bad usage.")
    schema.add_argument("-o", "--output", metavar="FILE", help="write to FILE (atomically)")
    schema.add_argument("--validate", metavar="TRACE.json", nargs="+",
                        help="validate these dumps against the schema")
    return parser


def _export_dir_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--export-dir", metavar="DIR",
                   help="where the terminal UI's e/i/s keys write a call's JSON, its graph and "
                        "the view as SVG (default: workbench-exports/ here, made when needed)")


def _script_arguments(p: argparse.ArgumentParser, output_required: bool) -> None:
    p.add_argument("-o", "--output", metavar="TRACE.json",
                   help="write the dump here (atomically)"
                        + ("; required" if output_required else ""))
    p.add_argument("--no-stages", dest="stages", action="store_false",
                   help="keep no jaxprs before/after each transformation (by default each "
                        "call keeps them, captured once per signature from what the call "
                        "traced; the script's functions never run again)")
    p.add_argument("--stages", dest="stages", action="store_true",
                   help=argparse.SUPPRESS)  # the default; accepted for older command lines
    p.add_argument("--inline-jnp", action="store_true",
                   help="record inside jnp functions (steps read sin, mul, not jit[name=sin])")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no `workbench:` notes on stderr (the script's output is never touched)")
    p.add_argument("--max-steps", type=_max_steps, default=DEFAULT_MAX_STEPS, metavar="N",
                   help=f"keep about N steps (default {DEFAULT_MAX_STEPS:,}): a long run keeps "
                        f"its first calls (up to N/2 steps) and its latest, and counts the "
                        f"calls dropped between (shown by `show` and the terminal UI); "
                        f"0 keeps everything")
    p.add_argument("--processes", type=int, metavar="N",
                   help="start N processes of the script on this machine as one "
                        "jax.distributed job (a free port on 127.0.0.1, CPU collectives via "
                        "gloo; the script calls jax.distributed.initialize() and the "
                        "coordinator address, process count and index it leaves out come "
                        "from the launcher), each recorded, output lines prefixed [i], the "
                        "dumps merged into one session")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="with --processes: stop every process still running after SECONDS "
                        "(each keeps what it recorded) and name it")
    p.add_argument("--devices-per-process", type=int, metavar="K",
                   help="with --processes: K CPU devices in each process "
                        "(XLA_FLAGS=--xla_force_host_platform_device_count=K)")
    p.add_argument("script", metavar="SCRIPT.py", help="the script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS",
                   help="arguments passed to the script. The options above may also come "
                        "right after SCRIPT.py (`SCRIPT.py -o trace.json --epochs 3`); the "
                        "script's arguments start at the first other one. After `--`, "
                        "everything goes to the script (`SCRIPT.py -- -o theirs.txt`).")


def _max_steps(text: str) -> int:
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of steps: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"a number of steps is 0 (keep all) or more: {value}")
    return value


# flag -> (attribute, value) for the options that may follow SCRIPT.py
_SCRIPT_FLAGS = {"--stages": ("stages", True), "--no-stages": ("stages", False),
                 "--inline-jnp": ("inline_jnp", True), "-q": ("quiet", True),
                 "--quiet": ("quiet", True)}


_SCRIPT_VALUES: dict[str, tuple[str, Callable[[str], Any]]] = {
    "--processes": ("processes", int), "--timeout": ("timeout", float),
    "--devices-per-process": ("devices_per_process", int)}


def _take_trailing_options(args: argparse.Namespace) -> str:
    """Move workbench options written right after SCRIPT.py out of the script's arguments."""
    rest = list(args.args)
    while rest:
        head = rest[0]
        if head == "--":
            rest.pop(0)
            break
        if head in _SCRIPT_FLAGS:
            setattr(args, *_SCRIPT_FLAGS[rest.pop(0)])
        elif head in ("-o", "--output"):
            if len(rest) < 2:
                return f"{head} needs a file name"
            rest.pop(0)
            args.output = rest.pop(0)
        elif head.startswith("--output="):
            args.output = rest.pop(0).split("=", 1)[1]
        elif head == "--max-steps" or head.startswith("--max-steps="):
            if head == "--max-steps":
                if len(rest) < 2:
                    return "--max-steps needs a number of steps"
                given = rest[1]
                del rest[:2]
            else:
                given = rest.pop(0).split("=", 1)[1]
            try:
                args.max_steps = _max_steps(given)
            except argparse.ArgumentTypeError as e:
                return f"--max-steps: {e}"
        elif head in _SCRIPT_VALUES:
            if len(rest) < 2:
                return f"{head} needs a value"
            name, convert = _SCRIPT_VALUES[rest.pop(0)]
            try:
                setattr(args, name, convert(rest.pop(0)))
            except ValueError:
                return f"{head} needs a number"
        else:
            break
    args.args = rest
    if args.command == "dump" and not args.output:
        return "dump needs -o TRACE.json (where to write the dump)"
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["graph"]:
        return _graph(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {
        "demo": _demo, "run": _run, "dump": _run, "open": _open, "show": _show,
        "diff": _diff, "schema": _schema, "merge": _merge}
    try:
        return handlers[args.command](args)
    except BrokenPipeError:
        # `workbench show big.json | head`: the reader left; say nothing more.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


def _error(message: str) -> None:
    print(f"workbench: {_t(message, lines=True)}", file=sys.stderr)


def _note(args: argparse.Namespace, message: str) -> None:
    if not getattr(args, "quiet", False):
        print(f"workbench: {_t(message, lines=True)}", file=sys.stderr, flush=True)


def _load_or_report(path: str, lazy: bool = False) -> Session | None:
    from transforms.record import SessionLoadError
    from workbench.processes import load_run
    try:
        return load_run(path, lazy=lazy)
    except SessionLoadError as e:
        _error(str(e))
        return None


# --- the terminal UI (issue 5): used when it is there -------------------------

def tui_opener() -> tuple[Callable[..., Any] | None, str]:
    """INTEGRATION POINT (TUI): the function that opens the TUI, or None and why not.

    `workbench.tui.run(session | [(title, session), ...], title=...)`; the TUI
    needs a terminal on stdin and stdout.
    """
    try:
        import workbench.tui as tui
    except ImportError as e:
        if getattr(e, "name", None) in ("workbench.tui", None):
            return None, "the terminal UI (workbench.tui) is not in this installation"
        return None, f"the terminal UI cannot be imported ({type(e).__name__}: {e})"
    run = getattr(tui, "run", None)
    if not callable(run):
        return None, "the terminal UI (workbench.tui.run) is not in this installation"
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return None, "the terminal UI needs a terminal (stdin and stdout are not one)"
    return run, ""


def _open_tui(sessions: Session | list[tuple[str, Session]], title: str, alternative: str,
              process: int | None = None, **options: Any) -> int:
    """options: export_dir, watch (as workbench.tui.run takes them)."""
    opener, reason = tui_opener()
    if opener is None:
        _error(f"{reason}; {alternative}")
        return EXIT_BAD_INPUT
    # A multi-process run opens at process 0, or the one asked for.
    result = opener(sessions, title=title, **options,
                    **({} if process is None else {"process": process}))
    return result if isinstance(result, int) else EXIT_OK


# --- graph images (issue 6): used when it is there ----------------------------

def graph_exporter() -> Callable[[Session, str, str], list[str]] | None:
    """INTEGRATION POINT (Graphviz): a function (session, folder, stem) -> image paths written.

    Uses `workbench.export.export_session_graphs(session, folder, stem)` when the
    exporter provides it; None (no images) until then.
    """
    try:
        import workbench.export as export
    except ImportError:
        return None
    fun = getattr(export, "export_session_graphs", None)
    return fun if callable(fun) else None


def _graph(argv: list[str]) -> int:
    """INTEGRATION POINT (Graphviz): `workbench graph ...` is `workbench.export.main`."""
    try:
        from workbench.export import main as graph_main
    except ImportError as e:
        _error(f"the Graphviz exporter (workbench.export) is not available ({e})")
        return EXIT_BAD_INPUT
    return graph_main(argv)


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
    from workbench import gallery
    examples = list(gallery.EXAMPLES)
    if args.list:
        for ex in examples:
            print(f"{ex.name:28} seed {ex.seed}  {ex.title}")
        return EXIT_OK
    if args.only:
        known = {ex.name for ex in examples}
        unknown = [n for n in args.only if n not in known]
        if unknown:
            _error(f"no gallery example {', '.join(map(repr, unknown))}; "
                   f"`workbench demo --list` lists them")
            return EXIT_BAD_INPUT
        examples = [ex for ex in examples if ex.name in args.only]
    if args.export is None:
        opener, reason = tui_opener()
        if opener is None:
            _error(f"{reason}; use `workbench demo --export DIR` to write the gallery's "
                   f"dumps and index instead")
            return EXIT_BAD_INPUT
    else:
        problem = _usable_folder(args.export)
        if problem:
            _error(problem)
            return EXIT_BAD_INPUT
    if args.export is None:
        return _demo_tui(examples, args.export_dir)
    outcomes = _record_gallery(examples, quiet=args.quiet)
    broken = [o for o in outcomes if not o.ok]
    for o in broken:
        _error(f"gallery example {o.example.name} broke: {o.error}\n{o.traceback}")
    exporter = None if args.no_graphs else graph_exporter()
    # Writing dumps is quick; drawing graphs is the slow part that deserves a progress display.
    index = write_gallery(outcomes, args.export, exporter, quiet=args.quiet or exporter is None)
    _note(args, f"wrote {len(outcomes)} dumps and {index} "
                f"({sum(o.session.step_count for o in outcomes)} steps)"
                + ("" if exporter or args.no_graphs else
                   "; no graph images: the Graphviz exporter (workbench.export) is not "
                   "available yet"))
    return EXIT_SCRIPT_FAILED if broken else EXIT_OK


def _demo_tui(examples: list, export_dir: str | None) -> int:
    """The picker at once; each example is recorded in the background (the one opened first)."""
    from workbench import gallery
    from workbench.tui import run_gallery
    broken = []

    def record(i: int) -> Session:
        o = gallery.run_example(examples[i])
        if not o.ok:
            broken.append(o)
        return o.session

    run_gallery([(ex.title, ex.explanation) for ex in examples], record,
                title="Gallery of the seed examples", export_dir=export_dir)
    for o in broken:
        _error(f"gallery example {o.example.name} broke: {o.error}\n{o.traceback}")
    return EXIT_SCRIPT_FAILED if broken else EXIT_OK


def _usable_folder(path: str) -> str:
    if os.path.exists(path) and not os.path.isdir(path):
        return f"{path}: exists and is not a folder"
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        return f"{path}: cannot create the folder ({e.strerror})"
    if not os.access(path, os.W_OK):
        return f"{path}: the folder is not writable"
    return ""


def _record_gallery(examples: list, quiet: bool) -> list:
    from workbench import gallery
    from workbench._progress import Progress
    outcomes = []
    with Progress("Recording the gallery", len(examples), quiet=quiet) as progress:
        for ex in examples:
            progress.start(ex.name)
            o = gallery.run_example(ex)
            outcomes.append(o)
            note = f"{len(o.session.calls)} calls, {o.session.step_count} steps, {o.seconds:.1f} s"
            progress.advance(ex.name, note if o.ok else f"{note}, BROKE: {o.error}")
    return outcomes


def write_gallery(outcomes: list, folder: str,
                  exporter: Callable[[Session, str, str], list[str]] | None = None,
                  quiet: bool = True) -> str:
    """One dump per example, graph images when an exporter is given, index.json and index.md."""
    from transforms.record import SCHEMA_VERSION, write_atomically
    from workbench._progress import Progress
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
        lines.append(f"`{e['name']}` (seed {e['seed']}): {e['calls']} calls, {e['steps']} steps, "
                     f"{e['stages']} stages; dump [{e['dump']}]({e['dump']})")
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
    from workbench import runner
    problem = _take_trailing_options(args) or _process_options(args)
    if problem:
        _error(f"{problem}; see `workbench {args.command} --help`")
        return EXIT_BAD_INPUT
    if args.command == "run" and args.output is None:
        opener, reason = tui_opener()
        if opener is None:
            _error(f"{reason}; use `workbench run -o trace.json {args.script} ...` or "
                   f"`workbench dump` to write the dump instead")
            return EXIT_BAD_INPUT
    if args.output is not None:
        from workbench.launch import is_folder
        from workbench.saving import usable_output
        # NB: a folder (DIR/) takes one dump per process of a jax.distributed job.
        problem = _usable_folder(args.output) if is_folder(args.output) and \
            args.processes is None else usable_output(args.output)
        if problem:
            _error(problem)
            return EXIT_BAD_INPUT
    if getattr(args, "watch", False):
        if args.processes is not None:
            _error("--watch records the script in one process; it does not take --processes")
            return EXIT_BAD_INPUT
        return _watch(args)
    if args.processes is not None:
        from workbench._cli_processes import run_processes
        return run_processes(args, _note, _error, _open_tui)
    try:
        result = runner.run_script(args.script, args.args, stages=args.stages,
                                   inline_jnp=args.inline_jnp,
                                   max_steps=args.max_steps or None,
                                   note=lambda message: _note(args, message))
    except runner.ScriptError as e:
        _error(str(e))
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
        from workbench.launch import dump_path
        try:
            path, where = dump_path(args.output, session)
        except OSError:  # a folder that cannot be made: the save falls back, and says so
            path, where = os.path.join(args.output, "process-0.json"), ""
        _save(args, session, what, path, where)
        return result.exit_code
    _note(args, f"recorded {what}")
    code = _open_tui(session, session.title or args.script, "use -o trace.json",
                     export_dir=args.export_dir)
    return result.exit_code if code == EXIT_OK else code


def _watch(args: argparse.Namespace) -> int:
    """`run --watch`: record in a fresh process now and on every change, the TUI open."""
    from workbench import runner
    from workbench.watch import Watch
    if args.output is not None:
        _error("--watch shows each recording in the terminal UI; it does not take -o")
        return EXIT_BAD_INPUT
    try:
        runner.check_script(args.script)
    except runner.ScriptError as e:
        _error(str(e))
        return EXIT_BAD_INPUT
    options = [flag for flag, on in (("--stages", args.stages), ("--inline-jnp", args.inline_jnp))
               if on]
    watch = Watch(args.script, list(args.args), options)
    _note(args, f"recording {args.script} (watching it for changes)")
    first = watch.record()
    if first.session is None:
        _error(first.note)
        return EXIT_BAD_INPUT
    _note(args, f"recorded {first.note}")
    return _open_tui(first.session, first.session.title or args.script, "use -o trace.json",
                     export_dir=args.export_dir, watch=watch)


def _save(args: argparse.Namespace, session: Session, what: str, path: str,
          where: str = "") -> None:
    """Save the recording to `path`, saying where it went; the exit code stays the script's.

    `where`: what to say when it was written there (a process's dump in a folder).
    NB: the notes of a failure are printed even with --quiet: they say where the
    recording is."""
    from workbench.saving import fallback_paths, save_recording
    outcome = save_recording(session, path, lambda message: _note(args, message))
    if outcome.path == path:
        _note(args, f"recorded {what}; " + (where or f"wrote {path}"))
    elif outcome.path is not None:
        _error(f"recorded {what}; could not write {path} ({outcome.problem}), so "
               f"the recording was saved to {outcome.path}")
    elif outcome.abandoned:
        _error(f"recorded {what}; {outcome.problem}: nothing was written "
               f"(an existing {path} is kept)")
    else:
        _error(f"recorded {what}; could not write {path} ({outcome.problem}) nor any "
               f"fallback ({', '.join(fallback_paths(path)) or 'none'}): the recording "
               f"is lost")


def _process_options(args: argparse.Namespace) -> str:
    if args.processes is None:
        if args.timeout is not None or args.devices_per_process is not None:
            return "--timeout and --devices-per-process go with --processes N"
        return ""
    from workbench.launch import MAX_PROCESSES
    if not 1 <= args.processes <= MAX_PROCESSES:
        return f"--processes takes 1 to {MAX_PROCESSES}"
    if args.timeout is not None and args.timeout <= 0:
        return "--timeout takes a positive number of seconds"
    if args.devices_per_process is not None and args.devices_per_process < 1:
        return "--devices-per-process takes a positive count"
    return ""


def _usable_output(path: str) -> str:
    from workbench.saving import usable_output
    return usable_output(path)


# --- open / show ----------------------------------------------------------------

def _open(args: argparse.Namespace) -> int:
    opener, reason = tui_opener()
    if opener is None or not os.path.exists(args.trace):
        # No terminal, or no such file: say what is wrong with the file first, as `show` does.
        session = _load_or_report(args.trace, lazy=True)
        if session is None:
            return EXIT_BAD_INPUT
        problem = _process_problem(args, session)
        _error(problem or f"{reason}; use `workbench show {args.trace}` for a text summary")
        return EXIT_BAD_INPUT
    # The terminal UI draws its first frame at once and reads the dump behind it, lazily:
    # a call's steps are decoded when it is unfolded (a big dump opens at once).
    from workbench.tui import open_dump
    return open_dump(args.trace, export_dir=args.export_dir, process=args.process,
                     load=_load_lazily,
                     check=lambda session: _process_problem(args, session))


def _load_lazily(path: str) -> Session:
    """The open command's loader, run behind the first frame (it imports the model)."""
    from workbench.processes import load_run
    return load_run(path, lazy=True)


def _process_problem(args: argparse.Namespace, session: Session) -> str:
    """What is wrong with `open --process I` for this session ("" when nothing is)."""
    if not session.processes:
        return ""
    from workbench._cli_processes import check_process
    problem = check_process(session, args.process)
    return f"{args.trace}: {problem}" if problem else ""


def _show(args: argparse.Namespace) -> int:
    session = _load_or_report(args.trace)
    if session is None:
        return EXIT_BAD_INPUT
    if session.processes:
        from workbench._cli_processes import show_processes
        return show_processes(session, args, _error)
    calls = session.calls
    if args.call is not None:
        # By index: with calls dropped (--max-steps) indices are not positions.
        chosen = [c for c in calls if c.index == args.call]
        if not chosen:
            known = f"0..{len(calls) - 1}" if not session.dropped_calls else \
                f"{calls[0].index}..{calls[-1].index}; {session.dropped_note()}"
            _error(f"{args.trace} has no call {args.call} (it has {len(calls)}: {known})")
            return EXIT_BAD_INPUT
        calls = chosen
    _print_lines([f"{_t(args.trace)}: {len(session.calls)} calls, {session.step_count} steps "
                  f"(jax {_t(session.jax_version)}, python {_t(session.python_version)})"])
    if session.title:
        _print_lines([f"title: {_t(session.title)}"])
    if session.dropped_calls:
        _print_lines([f"dropped: {session.dropped_note()}"])
    first_with: dict[int, int] = {}  # id of a stages tuple -> the first call holding it
    for call in calls:
        _print_lines(summarize_call(call, with_steps=args.steps, expand=args.expand))
        _print_lines(stage_lines(call, first_with))
    return EXIT_OK


# Each printed line is made terminal-safe once more as it is printed: nothing from a
# recording reaches the terminal raw, whatever a formatter forgot.
LINE_LIMIT = 20_000


def _print_lines(lines: Sequence[str]) -> None:
    print("\n".join(_t(line, LINE_LIMIT) for line in lines))


def stage_lines(call: Call, first_with: dict[int, int] | None = None) -> list[str]:
    """Each stage with its equation count (or what it holds, or why it is missing).

    Calls that share a signature share one stages tuple: after the first, one line.
    """
    if not call.stages:
        return ["  stages: none (recorded with stages off)"]
    if first_with is not None:
        first = first_with.setdefault(id(call.stages), call.index)
        if first != call.index:
            return [f"  stages: {len(call.stages)}, shared with call {first} (same signature)"]
    width = min(36, max(len(s.name) for s in call.stages))
    lines = [f"  stages: {len(call.stages)}"]
    for s in call.stages:
        lines.append(f"    {s.name:<{width}}  {_stage_summary(s)}")
    notes = dict.fromkeys(s.note for s in call.stages if s.note)
    lines.extend(f"    note: {note}" for note in notes)
    return lines


def _stage_summary(stage: Any) -> str:
    if not stage.available:
        reason = (stage.reason or "unavailable").splitlines()[0]
        return "unavailable: " + (reason if len(reason) <= 100 else reason[:99] + "…")
    if stage.jaxpr is not None:
        return f"{stage.jaxpr.eqn_count} eqns"
    if stage.text is not None:
        collectives = f", {len(stage.collectives)} collectives" if stage.collectives else ""
        return f"{stage.text.count(chr(10)) + 1} lines{collectives}"
    if stage.metrics:
        return ", ".join(f"{m.name}={m.value:g}" for m in stage.metrics[:3])
    return ""


def summarize_call(call: Call, with_steps: bool = False, expand: bool = False) -> list[str]:
    """Plain-text lines describing one call: its levels, step counts and errors."""
    from transforms.record import level_rows
    status = "ok" if call.ok else "FAILED"
    where = f" at {_t(call.source)}" if call.source else ""
    lines = [f"call {call.index}: {_t(call.transform)}({_t(call.function)}){where}  [{status}]"]
    by_level: dict[int, list[Step]] = {}
    for s in call.steps:
        by_level.setdefault(s.level, []).append(s)
    # Levels nest by parent (a root at its own depth: jit#1 below where eval#0 would be);
    # runs of identical sibling levels are one row (`expand`: each).
    base = 0
    for row in level_rows(call, range(len(call.levels)) if expand else ()):
        level = call.levels[row.position]
        if row.depth == 0:
            base = level.depth if isinstance(level.depth, int) and level.depth > 0 else 0
        depth = base + row.depth
        steps = by_level.get(level.index, [])
        repeats = f"  ×{row.repeats} identical levels" if row.folded else ""
        lines.append(f"  {_indent(depth)}{_t(level.label)}  {_t(level.trace_type)}  "
                     f"{len(steps)} steps{repeats}")
        if with_steps:
            lines.extend(_step_lines(steps, depth))
    for error in call.errors:
        at = f" at step {error.step}" if error.step is not None else ""
        message = _first_line(error.message) or "(no message)"
        lines.append(f"  error{at}: {_t(error.type_name)}: {message}")
    return lines


# Levels nest at most this deep on screen; a dump's depth is only checked to be sane.
MAX_INDENT = 20


def _indent(depth: int) -> str:
    return "  " * min(depth, MAX_INDENT)


def _step_lines(steps: list[Step], depth: int) -> list[str]:
    pad = "  " + _indent(depth + 1)
    lines = []
    for step in steps:
        ins = ", ".join(v.describe() for v in step.inputs)
        outs = ", ".join(v.describe() for v in step.outputs)
        lines.append(f"{pad}#{step.index} {_t(step.title)} [{_t(step.phase)}] "
                     f"({_t(ins)}) -> ({_t(outs)})")
    return lines


# --- diff -------------------------------------------------------------------------

def _diff(args: argparse.Namespace) -> int:
    from workbench.session_diff import diff_sessions, format_diff
    a = _load_or_report(args.a)
    if a is None:
        return EXIT_BAD_INPUT
    if args.b is None or args.processes is not None:
        from workbench._cli_processes import pick_processes
        picked = pick_processes(a, args)
        if isinstance(picked, str):
            _error(f"{args.a}: {picked}")
            return EXIT_BAD_INPUT
        a, b, args.a, args.b = picked
    else:
        other = _load_or_report(args.b)
        if other is None:
            return EXIT_BAD_INPUT
        b = other
    d = diff_sessions(a, b)
    if args.json:
        print(json.dumps({"a": args.a, "b": args.b, **d.to_json_dict()}, indent=2))
    else:
        _print_lines(format_diff(d, args.a, args.b, verbose=args.verbose))
    if not d.related:
        if args.json:
            _error(f"{args.a} and {args.b} look unrelated: no call matches")
        return EXIT_BAD_INPUT
    if args.fail_on_growth and d.grown:
        _error(f"equation counts grew in {len(d.grown)} stage(s): " + ", ".join(
            f"{c.title} {s.name} {s.eqns_a} -> {s.eqns_b}" for c, s in d.grown[:5]))
        return EXIT_SCRIPT_FAILED
    if args.fail_on_change and d.changed:
        _error("the traces differ")
        return EXIT_SCRIPT_FAILED
    return EXIT_OK


# --- merge -------------------------------------------------------------------------

def _merge(args: argparse.Namespace) -> int:
    from workbench.processes import merge
    problem = _usable_output(args.output)
    if problem:
        _error(problem)
        return EXIT_BAD_INPUT
    sessions = []
    for path in args.dumps:
        session = _load_or_report(path)
        if session is None:
            return EXIT_BAD_INPUT
        sessions.append(session)
    try:
        merged = merge(sessions)
    except ValueError as e:
        _error(str(e))
        return EXIT_BAD_INPUT
    merged.save(args.output)
    print(f"{args.output}: {len(merged.processes)} processes, {merged.step_count} steps")
    return EXIT_OK


# --- schema -------------------------------------------------------------------------

def _schema(args: argparse.Namespace) -> int:
    from workbench import schema
    if args.validate:
        return _validate(args.validate, schema)
    text = schema.schema_text()
    if args.output:
        problem = _usable_output(args.output)
        if problem:
            _error(problem)
            return EXIT_BAD_INPUT
        from transforms.record import write_atomically
        write_atomically(args.output, text)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _validate(paths: list[str], schema: Any) -> int:
    """Each dump through the loader (its checks), then the schema of the dump's own layout.

    So `schema --validate` accepts exactly the files `transforms.load` reads: a dump
    written by an older workbench (fewer fields, named in its `fields` header) is checked
    against the schema of that layout, and a version 1 dump is read by the old decoder."""
    from transforms.record import SCHEMA_VERSION
    code = EXIT_OK
    for path in paths:
        if _load_or_report(path) is None:  # the loader's message says what is wrong
            code = EXIT_BAD_INPUT
            continue
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if data.get("schema_version") == 1:
            print(f"{_t(path)}: valid (schema version 1, the old layout that transforms.load "
                  f"still reads; the schema describes version {SCHEMA_VERSION})")
            continue
        problems = schema.validate(data, schema.session_schema(data["fields"]))
        if problems:
            code = EXIT_BAD_INPUT
            _error(f"{path}: does not match the schema:\n  " + "\n  ".join(problems))
        else:
            print(f"{_t(path)}: valid")
    return code


if __name__ == "__main__":
    sys.exit(main())
