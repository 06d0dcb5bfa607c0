"""The `workbench` command's arguments: its parser (every subcommand, its options, its exit
codes in --help) and the options a user writes right after SCRIPT.py."""
from __future__ import annotations

import argparse
from typing import Any, Callable

__all__ = ["DEFAULT_MAX_STEPS", "build_parser", "take_trailing_options"]

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
                 "usage: nothing ran and no dump is written; 3 with --find-nans: a NaN or Inf "
                 "was found (the script was stopped there, unless --keep-going); 4 with "
                 "--max-compiles N: the script ended normally but its jitted functions "
                 "compiled more than N times (each with its reasons on stderr).")
    run_description = (
        "Run SCRIPT.py as `python SCRIPT.py ARGS...` would (sys.argv, __name__ == '__main__', "
        "its folder first on sys.path), with jax.grad, value_and_grad, vmap, jit, jvp, vjp, "
        "linearize, jacfwd, jacrev and hessian replaced by the recording versions from "
        "`transforms` for the duration of the run (also for libraries that call them as "
        "jax.grad(...) at call time), then restored. The script's output and exit code are "
        "unchanged; workbench's own notes go to stderr, prefixed `workbench:`. A script that "
        "raises, or Ctrl-C (or SIGTERM, SIGHUP), still leaves the dump of what was recorded; "
        "a single Ctrl-C during the final save does not stop it. -o may name a symlink (its "
        "target is written), a FIFO or a device (streamed into, never replaced). `-o -` (or "
        "-o /dev/stdout) streams the dump to stdout, a pipe included (`workbench dump "
        "SCRIPT.py -o - | jq .calls[0]`); the script's own stdout then goes to stderr, so that "
        "stdout holds the dump alone.")
    run = command("run", "run a JAX script unchanged, recording its transformations",
                  run_description + " Without -o, opens the terminal UI on the recording; "
                  "with --watch, records again whenever SCRIPT.py changes and shows the new "
                  "recording in place, at the same call and step.",
                  run_exits)
    run.add_argument("--watch", action="store_true",
                     help="re-record when SCRIPT.py changes and refresh the open terminal UI "
                          "in place (each run in a fresh process; what it prints is in the "
                          "Story view, key 6)")
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
    show.add_argument("--steps", action="store_true",
                      help="list every step of each call (and, for a dump recorded with "
                           "--values, every equation of its stages with its values)")
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
        "and primitive histogram are compared (stages are recorded unless turned off with "
        "record(stages=False) or `workbench run --no-stages`). Two traces with calls but none in common "
        "are reported as unrelated. In CI: `workbench diff base.json new.json "
        "--fail-on-growth` fails the build when a refactor grows a jaxpr.",
        "0 compared (and no --fail-on-* check failed); 1 --fail-on-growth and an equation "
        "count grew, or --fail-on-change and anything changed, or --fail-on-recompile and B "
        "traced a jitted function again more often than A; 2 a file is missing or "
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
    diff.add_argument("--fail-on-recompile", action="store_true",
                      help="exit 1 if B traced (and so compiled) one of your jitted functions "
                           "again more often than A did; the reasons are printed")
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

    # `workbench html` is workbench.html's, handed its arguments the same way.
    commands.add_parser("html", help="write a dump as one standalone HTML page (see "
                        "`workbench html --help`)", add_help=False).add_argument(
        "rest", nargs=argparse.REMAINDER)

    schema = command("schema", "print the JSON Schema of a dump (or validate dumps against it)",
                     "Print the JSON Schema (draft 2020-12) of session dumps, generated from "
                     "the record classes of transforms.model; the project keeps a copy in "
                     "transforms/model/session.schema.json. With --validate, check dumps "
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
                   help="write the dump here (atomically); `-` or /dev/stdout: to stdout, "
                        "with the script's own stdout sent to stderr"
                        + ("; required" if output_required else ""))
    p.add_argument("--no-journal", dest="journal", action="store_false",
                   help="write no journal while the script runs (by default each call is "
                        "appended to TRACE.json.journal as it finishes, so that a script that "
                        "is killed, segfaults or calls os._exit leaves the calls it finished, "
                        "with how it ended; the dump replaces it at the end)")
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
    p.add_argument("--find-nans", action="store_true",
                   help="check every recorded call's outputs for NaN and Inf; the first call "
                        "with one is replayed equation by equation after it returns, and the "
                        "equation that first made one from finite inputs is named (stage, "
                        "primitive, level, your line, its input values, a hint); the script "
                        "stops there (transforms.NonFiniteFound) and the exit code is 3")
    p.add_argument("--values", action="store_true",
                   help="evaluate every call's stages that take its inputs (the function, the "
                        "transformed program with its forward and backward equations, a jit's "
                        "jaxpr) again after the call, on copies of its inputs, and keep each "
                        "equation's outputs summarised (`show --steps` prints them)")
    p.add_argument("--keep-going", action="store_true",
                   help="with --find-nans: name the first NaN or Inf but let the script run "
                        "on (the exit code is then the script's)")
    p.add_argument("--max-compiles", type=_max_compiles, metavar="N",
                   help="exit 4 when the script's jitted functions (jax.jit and "
                        "transforms.jit, not jnp's or a library's own jits) compiled more "
                        "than N times in all; each function's compiles and why it traced "
                        "again go to stderr (for CI)")
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


def _count(text: str, what: str, floor: str) -> int:
    """A count given on the command line (`1_000` and `1,000` read as 1000), 0 or more."""
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of {what}: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"a number of {what} is {floor}: {value}")
    return value


def _max_steps(text: str) -> int:
    return _count(text, "steps", "0 (keep all) or more")


def _max_compiles(text: str) -> int:
    return _count(text, "compiles", "0 or more")


# flag -> (attribute, value) for the options that may follow SCRIPT.py
_SCRIPT_FLAGS = {"--stages": ("stages", True), "--no-stages": ("stages", False),
                 "--inline-jnp": ("inline_jnp", True), "-q": ("quiet", True),
                 "--quiet": ("quiet", True), "--find-nans": ("find_nans", True),
                 "--keep-going": ("keep_going", True), "--values": ("values", True)}


_SCRIPT_VALUES: dict[str, tuple[str, Callable[[str], Any]]] = {
    "--processes": ("processes", int), "--timeout": ("timeout", float),
    "--devices-per-process": ("devices_per_process", int),
    "--max-compiles": ("max_compiles", _max_compiles)}


def take_trailing_options(args: argparse.Namespace) -> str:
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
            except (ValueError, argparse.ArgumentTypeError):
                return f"{head} needs a number"
        else:
            break
    args.args = rest
    if args.command == "dump" and not args.output:
        return "dump needs -o TRACE.json (where to write the dump)"
    return ""
