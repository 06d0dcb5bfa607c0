"""What the crash-safe journal costs a recorded run, measured side by side in one run.

`workbench dump -q -o t.json SCRIPT.py` (the default: the journal written as each call
finishes, a parent process watching the script) against the same with `--no-journal`
(the recording as it was before the journal), with stages on (the default) and off, for
bench_training.py's two 200-step training scripts: `eager` (200 recorded value_and_grad
calls) and `jit` (one recorded trace, cached calls after). Whole processes, child CPU time
(the watching parent and the script's process both counted), median of --reps rounds, the
order alternating each round.

    .venv/bin/python bench/bench_journal.py [--reps N]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import alternating_child_cpu, exit_with, header, median, verdict  # noqa: E402
from bench_training import SCRIPTS  # noqa: E402

TARGET = 1.05


def bench(variant: str, stages: bool, reps: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, f"train_{variant}.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent(SCRIPTS[variant]))
        base = [sys.executable, "-m", "workbench", "dump", "-q", "-o", os.path.join(tmp, "t.json")]
        base += [] if stages else ["--no-stages"]
        commands = {"journal": [*base, script], "no journal": [*base, "--no-journal", script]}
        times = alternating_child_cpu(commands, reps)
    on, off = median(times["journal"]), median(times["no journal"])
    mode = "stages on" if stages else "stages off"
    print(f"  {variant}, {mode}: journal {on:.3f} s, --no-journal {off:.3f} s "
          f"(child CPU, median of {reps})")
    return verdict(f"{variant}, {mode}: journal / no journal", on / off, TARGET, "x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    header("the crash-safe journal: workbench dump with and without it")
    failed = 0
    for variant in ("eager", "jit"):
        for stages in (True, False):
            failed |= bench(variant, stages, args.reps)
    exit_with(failed)


if __name__ == "__main__":
    main()
