#!/usr/bin/env bash
# Set up .venv (scripts/setup.sh --only-311: the demo does not use the 3.12 venv),
# then run the gallery of seed examples:
#   bash scripts/demo.sh                 # in the terminal UI
#   bash scripts/demo.sh --export out/   # no terminal needed: write the exports to out/
#   bash scripts/demo.sh --list          # the examples; --only NAME records just one
# Arguments are passed to `workbench demo`; relative paths are taken from the
# directory you run this from.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

bash "$ROOT/scripts/setup.sh" --only-311

exec "$ROOT/.venv/bin/workbench" demo "$@"
