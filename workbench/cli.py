"""The `workbench` command.

Exit codes: 0 ok, 1 the user's script failed, 2 bad usage or bad input.
"""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

import transforms
from transforms.record import Call, Session

EXIT_OK, EXIT_SCRIPT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="workbench",
        description="See what JAX's transformations do: read sessions recorded by `transforms`.",
        epilog="Exit codes: 0 ok, 1 the user's script failed, 2 bad usage or bad input.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    show = commands.add_parser(
        "show", help="print a summary of a recorded session (calls, levels, steps, errors)",
        description="Print a summary of a session file written by Session.save().")
    show.add_argument("trace", metavar="TRACE.json", help="a session file")
    show.add_argument("--call", type=int, metavar="N", help="only call N (its index)")
    show.add_argument("--steps", action="store_true", help="list every step of each call")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    if args.command == "show":
        return _show(args)
    parser.error(f"unknown command {args.command!r}")
    return EXIT_BAD_INPUT


def _load_or_report(path: str) -> Session | None:
    try:
        return transforms.load(path)
    except transforms.SessionLoadError as e:
        print(f"workbench: {e}", file=sys.stderr)
        return None


def _show(args: argparse.Namespace) -> int:
    session = _load_or_report(args.trace)
    if session is None:
        return EXIT_BAD_INPUT
    calls = session.calls
    if args.call is not None:
        if not 0 <= args.call < len(calls):
            print(f"workbench: {args.trace} has no call {args.call} "
                  f"(it has {len(calls)}: 0..{len(calls) - 1})", file=sys.stderr)
            return EXIT_BAD_INPUT
        calls = [calls[args.call]]
    print(f"{args.trace}: {len(session.calls)} calls, {session.step_count} steps "
          f"(jax {session.jax_version}, python {session.python_version})")
    for call in calls:
        print("\n".join(summarize_call(call, with_steps=args.steps)))
    return EXIT_OK


def summarize_call(call: Call, with_steps: bool = False) -> list[str]:
    """Plain-text lines describing one call: its levels, step counts and errors."""
    status = "ok" if call.ok else "FAILED"
    where = f" at {call.source}" if call.source else ""
    lines = [f"call {call.index}: {call.transform}({call.function}){where}  [{status}]"]
    for level in call.levels:
        count = sum(1 for s in call.steps if s.level == level.index)
        lines.append(f"  {'  ' * level.depth}{level.label}  {level.trace_type}  {count} steps")
        if with_steps:
            lines.extend(_step_lines(call, level.index, level.depth))
    for error in call.errors:
        at = f" at step {error.step}" if error.step is not None else ""
        lines.append(f"  error{at}: {error.type_name}: {error.message.splitlines()[0]}")
    return lines


def _step_lines(call: Call, level: int, depth: int) -> list[str]:
    pad = "  " * (depth + 2)
    lines = []
    for step in call.steps_at(level):
        ins = ", ".join(v.describe() for v in step.inputs)
        outs = ", ".join(v.describe() for v in step.outputs)
        lines.append(f"{pad}#{step.index} {step.title} [{step.phase}] ({ins}) -> ({outs})")
    return lines


if __name__ == "__main__":
    sys.exit(main())
