#!/usr/bin/env bash
# Set up (scripts/setup.sh), then run the gallery of seed examples:
#   bash scripts/demo.sh                 # in the terminal UI
#   bash scripts/demo.sh --export out/   # no terminal needed: write the exports to out/
# Arguments are passed to `workbench demo`; relative paths are taken from the
# directory you run this from.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

bash "$ROOT/scripts/setup.sh"

if [ ! -f "$ROOT/workbench/cli.py" ] && [ ! -d "$ROOT/workbench/cli" ]; then
    echo "demo.sh: the workbench command line (workbench/cli.py) is not in this checkout yet" >&2
    exit 1
fi
exec "$ROOT/.venv/bin/workbench" demo "$@"
