#!/usr/bin/env bash
# Set up (scripts/setup.sh), then run the tests with each venv: Python 3.11
# (.venv, jax 0.10.2), Python 3.12 (.venv312, the newest jax), Python 3.12 with
# jax 0.11.2 (.venv312-jax011). Extra arguments go to pytest.
# Exits non-zero if either run fails, or collects no test (pytest exit 5).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

bash scripts/setup.sh || { echo "test.sh: setup failed" >&2; exit 1; }

reports="$(mktemp -d)"
trap 'rm -rf "$reports"' EXIT

overall=0
summary=()
ran=0

run_tests() {
    local venv="$1" name="$2"
    shift 2
    local python="$venv/bin/python"
    if [ ! -x "$python" ]; then
        if [ "$venv" != .venv ]; then
            echo "test.sh: WARNING: $venv is missing (no Python 3.12 on this machine): skipping the $name run" >&2
            summary+=("$name: SKIPPED (no $venv)")
            return 0
        fi
        echo "test.sh: $venv is missing after setup" >&2
        summary+=("$name: FAILED ($venv missing)")
        overall=1
        return 0
    fi
    local versions
    versions="$("$python" -c 'import sys, jax; print("Python %s, jax %s" % (sys.version.split()[0], jax.__version__))' 2>&1)" ||
        versions="(could not import jax: $versions)"
    echo
    echo "=== $name: $versions ($venv) ==="
    local rc=0
    # One worker per core (pytest-xdist), each test file kept on one worker so a module's
    # fixtures (the gallery's recordings) are made once.
    "$python" -m pytest -q -n auto --dist loadfile --junitxml="$reports/$name.xml" "$@" </dev/null || rc=$?
    ran=$((ran + 1))
    case "$rc" in
        0) summary+=("$name: passed ($versions)") ;;
        5) echo "test.sh: $name: pytest collected no tests (exit 5): counted as a failure" >&2
           summary+=("$name: FAILED: no tests collected ($versions)")
           overall=1 ;;
        *) summary+=("$name: FAILED, pytest exit $rc ($versions)")
           overall=1 ;;
    esac
}

if [ "$#" -eq 0 ] && [ ! -d tests ]; then
    echo "test.sh: FAILED: there is no tests/ directory in $ROOT, so there are no tests to run" >&2
    exit 1
fi

# Lint and types first (ruff and mypy, configured in pyproject.toml): cheap,
# and a failure is reported with the test runs rather than stopping them.
if [ "$#" -eq 0 ]; then
    echo "=== lint: ruff check ==="
    if .venv/bin/ruff check .; then
        summary+=("lint: ruff clean")
    else
        summary+=("lint: FAILED (ruff check)")
        overall=1
    fi
    echo "=== types: mypy ==="
    if .venv/bin/mypy; then
        summary+=("types: mypy clean")
    else
        summary+=("types: FAILED (mypy)")
        overall=1
    fi
fi

# The C step core must be built and current (setup.sh builds it): the tests test the core
# users get, and compare it with the Python reference (tests/transforms/_capture/test_step_core.py).
export WORKBENCH_REQUIRE_CORE=1
run_tests .venv py311 "$@"
run_tests .venv312 py312 "$@"
run_tests .venv312-jax011 py312-jax011 "$@"
# The Python step core (a machine without a compiler records with it): JAX's results and
# what recording keeps, with it alone.
if [ "$#" -eq 0 ]; then
    WORKBENCH_CORE=python run_tests .venv py311-python-core tests/transforms/test_fidelity.py \
        tests/transforms/test_fidelity_jit.py tests/transforms/test_fidelity_frames.py \
        tests/transforms/test_recording_cost.py tests/transforms/test_recorded_content.py \
        tests/transforms/test_saved_sessions.py
fi

echo
echo "=== summary ==="
for line in "${summary[@]}"; do
    echo "  $line"
done
if [ "$overall" -ne 0 ]; then
    echo "test.sh: FAILED" >&2
else
    echo "test.sh: all runs passed"
fi
# Totals over both runs, from pytest's JUnit XML reports (which count xfailed
# tests as skipped).
if [ "$ran" -gt 0 ]; then
    .venv/bin/python - "$reports" <<'PY' || true
import glob, sys, xml.etree.ElementTree as ET
tests = failed = skipped = 0
for path in glob.glob(sys.argv[1] + "/*.xml"):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        continue
    suites = [root] if root.tag == "testsuite" else root.iter("testsuite")
    for s in suites:
        tests += int(s.get("tests", 0))
        failed += int(s.get("failures", 0)) + int(s.get("errors", 0))
        skipped += int(s.get("skipped", 0))
print(f"total: {tests - failed - skipped} passed, {failed} failed, {skipped} skipped")
PY
fi
exit "$overall"
