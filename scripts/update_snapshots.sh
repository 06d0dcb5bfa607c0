#!/usr/bin/env bash
# Regenerate the TUI snapshots for both JAX versions.
# pytest-textual-snapshot's --snapshot-update deletes every snapshot it did not
# write in that run, which includes the other JAX version's folder
# (tests/workbench/tui/__snapshots__/jax<version>/): so each venv updates its own folder and
# the other one is put back from a copy. Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
keep="$(mktemp -d)"
trap 'rm -rf "$keep"' EXIT
for python in .venv/bin/python .venv312/bin/python; do
    version="$("$python" -c 'import jax; print(jax.__version__)')"
    rm -rf "$keep"/*
    cp -r tests/workbench/tui/__snapshots__/. "$keep"/
    "$python" -m pytest -q tests/workbench/tui/test_tui_snapshots.py --snapshot-update "$@"
    for folder in "$keep"/jax*; do
        name="$(basename "$folder")"
        if [ "$name" != "jax$version" ]; then
            rm -rf "tests/workbench/tui/__snapshots__/$name"
            cp -r "$folder" "tests/workbench/tui/__snapshots__/$name"
        fi
    done
done
git status --short tests/workbench/tui/__snapshots__
