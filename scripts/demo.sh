#!/usr/bin/env bash
# Set up a fresh checkout and run the example script on the embedded default (no config file).
#   bash scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
. .venv/bin/activate
python -m pip install --quiet -e . 2> >(grep -v "^WARNING: Location '" >&2)
export TOOLSHELL_STATE_DIR="${TOOLSHELL_STATE_DIR:-$(mktemp -d)}"
toolshell run examples/quickstart.sh
