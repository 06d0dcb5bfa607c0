#!/usr/bin/env bash
# The notebook views' screenshots (screenshots/notebook-*.png): two gallery examples written
# by `workbench html`, drawn by headless Chromium (apt-get install -y chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
shot() {  # example, output name, window height
    .venv/bin/python -c "from workbench.gallery import find, run_example
run_example(find('$1')).session.save('$work/$1.json')"
    .venv/bin/workbench html "$work/$1.json" -o "$work/$1.html"
    chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size="1200,$3" \
        --screenshot="screenshots/$2.png" "file://$work/$1.html" 2>/dev/null
}
shot per_example_grads notebook-stages 1500
shot absolute_vmap notebook-failure 1300
