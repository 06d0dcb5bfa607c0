#!/usr/bin/env bash
# Set up this checkout on a fresh machine; safe to run again (fast when done).
#
#   - graphviz (dot) and librsvg2-bin (rsvg-convert) from Debian, when missing
#   - .venv    : Python 3.11 (python3)             + pip install -e '.[test]'
#   - .venv312 : Python 3.12 (pyenv 3.12.1, else python3.12 on PATH), the same
#   - .venv312-jax011 : Python 3.12 with jax 0.11.2, the release between the two
#                (not with --only-311: the demo needs .venv only)
#
# A venv is left alone when the package is installed in it and pyproject.toml,
# setup.py, the C step core's sources (and the checkout's path) have not changed since its
# last install, and the C step core it built is there: the hash
# is kept in <venv>/.setup-stamp. Messages go to stderr, so the stdout of the
# scripts that call this one stays theirs.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PACKAGE=jax-transform-workbench
STAMP_NAME=.setup-stamp

say()  { echo "setup: $*" >&2; }
warn() { echo "setup: WARNING: $*" >&2; }
die()  { echo "setup: ERROR: $*" >&2; exit 1; }

# One setup at a time per checkout (test.sh and demo.sh may run together).
if command -v flock >/dev/null 2>&1; then
    exec 9>"${TMPDIR:-/tmp}/jax-transform-workbench-setup-$(echo "$ROOT" | sha256sum | cut -c1-12).lock"
    flock 9
fi

# --- system packages -----------------------------------------------------------
install_system_packages() {
    if command -v dot >/dev/null 2>&1 && command -v rsvg-convert >/dev/null 2>&1; then
        return 0
    fi
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo=(sudo -n)
        else
            die "graphviz/librsvg2-bin are missing and this is not root: run as root, or" \
                "install them yourself (apt-get install graphviz librsvg2-bin)"
        fi
    fi
    command -v apt-get >/dev/null 2>&1 ||
        die "'dot' or 'rsvg-convert' is missing and there is no apt-get: install graphviz and librsvg (rsvg-convert)"
    say "installing graphviz and librsvg2-bin (apt-get)"
    local log
    log="$(mktemp)"
    if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q >"$log" 2>&1 ||
       ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
            graphviz librsvg2-bin >>"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        die "apt-get failed (output above)"
    fi
    rm -f "$log"
    command -v dot >/dev/null 2>&1 || die "apt-get ran but 'dot' is still missing"
    command -v rsvg-convert >/dev/null 2>&1 || die "apt-get ran but 'rsvg-convert' is still missing"
}

# --- Pythons -------------------------------------------------------------------
# python_minor PY -> "3.11" (empty when PY does not run: e.g. a pyenv shim for
# a version that is not installed)
python_minor() {
    "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true
}

find_python311() {
    command -v python3 >/dev/null 2>&1 || die "python3 is not on PATH"
    local minor
    minor="$(python_minor python3)"
    [ -n "$minor" ] || die "python3 does not run"
    if [ "$minor" != "3.11" ]; then
        warn "python3 is Python $minor, not 3.11; .venv will use it anyway"
    fi
    echo python3
}

find_python312() {
    local candidates=()
    if command -v pyenv >/dev/null 2>&1; then
        candidates+=("$(pyenv root)/versions/3.12.1/bin/python3")
    fi
    if command -v python3.12 >/dev/null 2>&1; then
        candidates+=("$(command -v python3.12)")
    fi
    local py
    for py in "${candidates[@]}"; do
        if [ -x "$py" ] && [ "$(python_minor "$py")" = "3.12" ]; then
            echo "$py"
            return 0
        fi
    done
    return 1
}

# --- venvs ---------------------------------------------------------------------
# The C step core's sources and header, as transforms/_capture/_core_sources.py lists them.
core_sources() {
    grep -o '"transforms/_capture/[A-Za-z_]*\.[ch]"' transforms/_capture/_core_sources.py | tr -d '"'
}

stamp_of() {
    # pyproject.toml's, setup.py's and the C step core's content (the install builds the
    # sources _core_sources.py lists), and where this checkout lives (an editable install
    # points at a path)
    local sources
    mapfile -t sources < <(core_sources)
    [ "${#sources[@]}" -gt 1 ] || die "no C sources found in transforms/_capture/_core_sources.py"
    { sha256sum pyproject.toml setup.py transforms/_capture/_core_sources.py "${sources[@]}" |
          cut -d' ' -f1; echo "$ROOT"; } |
        sha256sum | cut -d' ' -f1
}

# core_built VENV: the C step core for VENV's Python is in transforms/_capture/ (a fresh clone has none)
core_built() {
    local suffix
    suffix="$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
    [ -f "transforms/_capture/_core$suffix" ]
}

# setup_venv VENV PYTHON [PIN...]: PINs (jax==0.11.2, ...) are installed with the package
setup_venv() {
    local venv="$1" python="$2"
    shift 2
    local pins=("$@")
    local want_minor
    want_minor="$(python_minor "$python")"

    if [ -d "$venv" ]; then
        local have_minor
        have_minor="$(python_minor "$venv/bin/python")"
        if [ "$have_minor" != "$want_minor" ]; then
            say "$venv is broken or has Python '${have_minor:-none}' instead of $want_minor: recreating it"
            rm -rf "$venv"
        fi
    fi
    if [ ! -d "$venv" ]; then
        say "creating $venv with $python (Python $want_minor)"
        "$python" -m venv "$venv" || die "could not create $venv with $python"
    fi

    local stamp
    stamp="$(stamp_of) ${pins[*]}"
    if [ -f "$venv/$STAMP_NAME" ] && [ "$(cat "$venv/$STAMP_NAME")" = "$stamp" ] &&
       "$venv/bin/python" -m pip show -q "$PACKAGE" >/dev/null 2>&1 &&
       core_built "$venv"; then
        say "$venv is up to date (Python $want_minor)"
        return 0
    fi

    say "installing $PACKAGE[test] into $venv (pip install -e '.[test]'; the first time a few" \
        "minutes: JAX, flax, equinox, optax, numpyro, diffrax, textual are fetched)"
    rm -f "$venv/$STAMP_NAME"
    # pip's whole output to a log (shown if it fails), the packages it fetches as it goes.
    local log status=0
    log="$(mktemp)"
    PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 \
        "$venv/bin/python" -m pip install --progress-bar off -e '.[test]' "${pins[@]}" \
        >"$log" 2>&1 &
    local pip_pid=$!
    { tail -n +1 -f --pid="$pip_pid" "$log" |
        grep --line-buffered -E '^(Collecting|Building wheel|Installing collected)' |
        sed -u -e 's/ (from .*//' -e 's/^/setup:   /' -e 's/^\(.\{100\}\).*/\1.../' >&2; } || true
    wait "$pip_pid" || status=$?
    if [ "$status" -ne 0 ]; then
        cat "$log" >&2
        rm -f "$log"
        die "pip install -e '.[test]' ${pins[*]} failed in $venv (errors above)"
    fi
    rm -f "$log"
    core_built "$venv" || warn "the C step core (transforms/_capture/_core_*.c) did not build for $venv:" \
        "recording uses the Python step core, slower (is gcc there, and Python's headers?)"
    echo "$stamp" >"$venv/$STAMP_NAME"
    say "$venv ready: $("$venv/bin/python" -c 'import sys, jax; print("Python", sys.version.split()[0], "+ jax", jax.__version__)')"
}

# --only-311: just .venv (scripts/demo.sh runs the demo on Python 3.11; test.sh needs both)
only_311=0
for arg in "$@"; do
    case "$arg" in
        --only-311) only_311=1 ;;
        *) die "unknown option '$arg' (setup.sh takes --only-311 or nothing)" ;;
    esac
done

install_system_packages

setup_venv .venv "$(find_python311)"

if [ "$only_311" = 1 ]; then
    :
elif py312="$(find_python312)"; then
    setup_venv .venv312 "$py312"
    setup_venv .venv312-jax011 "$py312" 'jax==0.11.2' 'jaxlib==0.11.2'
else
    warn "no Python 3.12 found (looked for \$(pyenv root)/versions/3.12.1/bin/python3 and python3.12 on PATH):"
    warn "setting up .venv (Python 3.11) only; the tests will run on 3.11 only"
fi
