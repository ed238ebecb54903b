#!/usr/bin/env bash
# Set up a fresh checkout and run the example script on the embedded default (no config file).
#   bash scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
echo "setting up .venv and installing toolshell into it (about half a minute the first time)…" >&2
python3 -m venv .venv
. .venv/bin/activate
# pip's own progress, one line per package it collects or installs (not --quiet: a silent half
# minute looks like a hang); the local-mirror warnings of this machine's pip config are noise.
# Both of pip's streams are filtered inside the pipeline (not a process substitution, which could
# still be writing after the message below): stderr drops the noise, stdout keeps the progress.
if ! { python -m pip install --progress-bar off -e . 2>&1 1>&3 3>&- \
  | { grep -v "^WARNING: Location '" >&2 || true; }; } 3>&1 \
  | { grep --line-buffered -E "^(Collecting|Installing|Successfully)" >&2 || true; }; then
  echo "pip could not install toolshell (its messages are above); fix that and run scripts/demo.sh again" >&2
  exit 1
fi
echo "installed; running examples/quickstart.sh" >&2
export TOOLSHELL_STATE_DIR="${TOOLSHELL_STATE_DIR:-$(mktemp -d)}"
toolshell run examples/quickstart.sh
