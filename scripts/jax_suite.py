"""Run JAX's own test files with our transforms swapped in: recording must change nothing.

    python scripts/jax_suite.py --jax-src /work/jaxsrc/0.10.2 [--stages] [FILE ...] [-k EXPR]

JAX_SRC is a folder holding JAX's `tests/` taken from the tag of the installed
jax (for jax 0.10.2, `git archive jax-v0.10.2 tests` of a jax-ml/jax clone);
the tests are read there, never copied into this project. Each selected test
file is run three times, each in its own pytest process:

  baseline   plain JAX
  plain      jax.grad, value_and_grad, vmap, jit, jvp, vjp, linearize, jacfwd,
             jacrev, hessian replaced by transforms.* for calls from the test code
  record     the same, each test inside transforms.record(stages=False) (with
             --stages inside record(stages=True), the default a user gets)

and prints, per mode, `kept K/N baseline-passing tests (P%)` with the tests
lost grouped by their first error line. JAX's test dependencies (absl-py) are
installed by this script into a scratch folder (--deps, outside the project),
never into the project's environment. Runs are CPU-heavy: they run under
`nice -n 10`, one file at a time.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

SELECTION = ("api_test.py", "core_test.py", "batching_test.py", "custom_api_test.py",
             "tree_util_test.py", "lax_autodiff_test.py", "lax_vmap_test.py",
             "lax_control_flow_test.py")
MODES = ("baseline", "plain", "record")
TEST_DEPS = ("absl-py",)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 2)[2])
    p.add_argument("files", nargs="*", default=list(SELECTION),
                   help="test files under JAX_SRC/tests (default: the issue's selection)")
    p.add_argument("--jax-src", required=True,
                   help="a JAX source checkout (or an archive of its tests/) at the installed "
                        "jax's tag")
    p.add_argument("--stages", action="store_true",
                   help="record with record(stages=True) (default: stages=False)")
    p.add_argument("-k", dest="keyword", default=None, help="pytest -k expression")
    p.add_argument("--modes", default=",".join(MODES),
                   help="comma-separated subset of baseline,plain,record (default: all)")
    p.add_argument("--deps", default=None,
                   help="scratch folder for JAX's test dependencies "
                        "(default: ~/.cache/jax-suite-deps/pyX.Y)")
    p.add_argument("--out", default=None,
                   help="folder for the per-mode JSON results (default: a temp folder)")
    p.add_argument("--reuse-baseline", action="store_true",
                   help="take the baseline results already in --out instead of running them "
                        "again (plain JAX's results do not change with our code)")
    p.add_argument("--generated-cases", default="3", help="JAX_NUM_GENERATED_CASES (default 3)")
    p.add_argument("--nice", type=int, default=10, help="nice level of the pytest runs")
    p.add_argument("--max-groups", type=int, default=40,
                   help="failure groups printed per mode (default 40)")
    args = p.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in args.modes if m not in MODES]
    if bad:
        p.error(f"unknown mode(s) {bad}; choose from {', '.join(MODES)}")
    if "baseline" not in args.modes:
        p.error("the baseline mode is needed: it says which tests count")
    tests = os.path.join(args.jax_src, "tests")
    if not os.path.isdir(tests):
        p.error(f"{args.jax_src} has no tests/ folder")
    missing = [f for f in args.files if not os.path.isfile(os.path.join(tests, f))]
    if missing:
        p.error(f"not in {tests}: {', '.join(missing)}")
    return args


def ensure_deps(deps: str | None) -> str:
    """JAX's test dependencies in a scratch folder, installed on first use."""
    version = f"py{sys.version_info[0]}.{sys.version_info[1]}"
    deps = deps or os.path.join(os.path.expanduser("~"), ".cache", "jax-suite-deps", version)
    marker = os.path.join(deps, ".installed")
    if not os.path.exists(marker):
        print(f"jax_suite: installing {', '.join(TEST_DEPS)} into {deps}", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--target", deps,
                        *TEST_DEPS], check=True)
        with open(marker, "w") as f:
            f.write("\n".join(TEST_DEPS))
    return deps


def run_file(args: argparse.Namespace, deps: str, test_file: str, mode: str,
             out_dir: str) -> dict:
    tests = os.path.abspath(os.path.join(args.jax_src, "tests"))
    # NB: with --stages the record results are a file of their own, beside those without
    kind = f"{mode}-stages" if mode == "record" and args.stages else mode
    results = os.path.join(out_dir, f"{os.path.splitext(test_file)[0]}.{kind}.json")
    if mode == "baseline" and args.reuse_baseline and os.path.exists(results):
        return _load(test_file, mode, results, 0.0, reused=True)
    env = dict(os.environ)
    env.update({
        "JAX_SUITE_MODE": mode,
        "JAX_SUITE_STAGES": "1" if args.stages else "0",
        "JAX_SUITE_TESTS": tests,
        "JAX_SUITE_RESULTS": results,
        "JAX_NUM_GENERATED_CASES": args.generated_cases,
        "PYTHONPATH": os.pathsep.join([HERE, ROOT, deps, env.get("PYTHONPATH", "")]),
        "JAX_PLATFORMS": "cpu",
    })
    cmd = ["nice", "-n", str(args.nice), sys.executable, "-m", "pytest", "-q", "-p",
           "_jax_suite_plugin", "-p", "no:cacheprovider", "-p", "no:randomly",
           "--rootdir", tests, "-o", "addopts=", "--tb=line", "-W", "ignore",
           os.path.join(tests, test_file)]
    if args.keyword:
        cmd += ["-k", args.keyword]
    start = time.time()
    proc = subprocess.run(cmd, env=env, cwd=tests, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    if not os.path.exists(results):
        tail = "\n".join(proc.stdout.splitlines()[-20:])
        raise SystemExit(f"jax_suite: {test_file} [{mode}] wrote no results "
                         f"(exit {proc.returncode}):\n{tail}")
    return _load(test_file, mode, results, time.time() - start)


def _load(test_file: str, mode: str, results: str, seconds: float, reused: bool = False) -> dict:
    with open(results) as f:
        found = json.load(f)
    counts = collections.Counter(v[0] for v in found.values())
    when = "  (reused)" if reused else f"{seconds:6.0f} s"
    print(f"  {test_file:28s} {mode:8s} {counts['passed']:5d} passed {counts['failed']:4d} "
          f"failed {counts['skipped']:4d} skipped  {when}", flush=True)
    return {f"{test_file}::{k.split('::', 1)[-1]}": v for k, v in found.items()}


def summarize(mode: str, baseline: dict, results: dict, max_groups: int) -> tuple[int, int]:
    passing = [k for k, v in baseline.items() if v[0] == "passed"]
    kept = [k for k in passing if results.get(k, ["missing"])[0] == "passed"]
    lost = [k for k in passing if k not in set(kept)]
    n, k = len(passing), len(kept)
    pct = 100.0 * k / n if n else 100.0
    label = f"{mode} (ours, inside record())" if mode == "record" else \
        f"{mode} (ours, outside record())"
    print(f"\n{label}: kept {k}/{n} baseline-passing tests ({pct:.2f}%)")
    per_file: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for t in passing:
        per_file[t.split("::")[0]][0] += 1
    for t in kept:
        per_file[t.split("::")[0]][1] += 1
    for f, (total, good) in sorted(per_file.items()):
        print(f"    {f:28s} {good}/{total}")
    groups: dict[str, list[str]] = collections.defaultdict(list)
    for t in lost:
        outcome, line = results.get(t, ["missing", ""])
        groups[line if outcome == "failed" else f"<{outcome}>"].append(t)
    for line, tests in sorted(groups.items(), key=lambda kv: -len(kv[1]))[:max_groups]:
        print(f"  {len(tests):4d}  {line}")
        for t in tests[:6]:
            print(f"          {t}")
        if len(tests) > 6:
            print(f"          ... and {len(tests) - 6} more")
    return k, n


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    import jax  # the installed version, to say which tag the tests must come from
    deps = ensure_deps(args.deps)
    out_dir = args.out or tempfile.mkdtemp(prefix="jax-suite-")
    os.makedirs(out_dir, exist_ok=True)
    print(f"jax_suite: jax {jax.__version__}, Python {sys.version.split()[0]}, tests from "
          f"{os.path.abspath(args.jax_src)}, JAX_NUM_GENERATED_CASES={args.generated_cases}"
          f"{', record(stages=True)' if args.stages else ''}; results in {out_dir}", flush=True)
    merged: dict[str, dict] = {m: {} for m in args.modes}
    for test_file in args.files:
        for mode in args.modes:
            merged[mode].update(run_file(args, deps, test_file, mode, out_dir))
    status = 0
    for mode in args.modes:
        if mode == "baseline":
            continue
        k, n = summarize(mode, merged["baseline"], merged[mode], args.max_groups)
        status |= k != n
    return status


if __name__ == "__main__":
    sys.exit(main())
