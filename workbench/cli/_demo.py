"""`workbench demo`: the gallery of seed examples, in the terminal UI or exported (a dump per
example, graph images, index.json and index.md)."""
from __future__ import annotations

import argparse
import json
import os
from typing import TYPE_CHECKING, Any, Callable

from ._shared import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_SCRIPT_FAILED,
    error,
    no_terminal,
    note,
    usable_folder,
)

if TYPE_CHECKING:
    from transforms.model import Session

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


def demo_command(args: argparse.Namespace) -> int:
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
               f"({sum(o.session.step_count for o in outcomes)} steps)")
    return EXIT_SCRIPT_FAILED if broken else EXIT_OK


def _demo_tui(examples: list, export_dir: str | None) -> int:
    """The picker at once; each example is recorded in the background (the one opened first)."""
    from .. import gallery
    from ..tui import run_gallery
    broken = []

    def record(i: int) -> Session:
        o = gallery.run_example(examples[i])
        if not o.ok:
            broken.append(o)
        return o.session

    run_gallery([(ex.title, ex.explanation) for ex in examples], record,
                title="Gallery of the seed examples", export_dir=export_dir)
    for o in broken:
        error(f"gallery example {o.example.name} broke: {o.error}\n{o.traceback}")
    return EXIT_SCRIPT_FAILED if broken else EXIT_OK


def _record_gallery(examples: list, quiet: bool) -> list:
    from .. import gallery
    from ._progress import Progress
    outcomes = []
    with Progress("Recording the gallery", len(examples), quiet=quiet) as progress:
        for ex in examples:
            progress.start(ex.name)
            o = gallery.run_example(ex)
            outcomes.append(o)
            done = f"{len(o.session.calls)} calls, {o.session.step_count} steps, {o.seconds:.1f} s"
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
