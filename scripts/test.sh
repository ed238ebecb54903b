#!/usr/bin/env bash
# Set up a fresh checkout and run the test suite (the README's test command).
#   bash scripts/test.sh [pytest args...]
# With CI set (.ci/run sets it) a check that cannot run fails instead of skipping, and so does a
# missing npm or browser here. After pytest the checkout must be as it was before: a test that
# writes into it (rather than its tmp_path) fails the run, naming the files.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/retry.sh

python3 -m venv .venv
. .venv/bin/activate
# (this machine's pip config names local mirrors that may be absent; their warnings are noise)
retry python -m pip install --quiet -e '.[dev]' 2> >(grep -v "^WARNING: Location '" >&2)
# Third-party MCP servers the tests run as real subprocesses (npm); node_modules stays local.
if command -v npm >/dev/null 2>&1; then
  retry npm install --prefix tests/node --no-audit --no-fund --loglevel=error >/dev/null
  # Agent hosts whose own CLIs read what `toolshell setup` writes (Claude Code, Codex, Gemini CLI; ~0.9 GB).
  retry npm install --prefix tests/hosts --no-audit --no-fund --loglevel=error >/dev/null
elif [ -n "${CI:-}" ]; then
  echo "npm not found: CI needs it for the npm MCP servers and the agent hosts' CLIs" >&2
  exit 1
else
  echo "npm not found: tests against the npm MCP servers will be skipped" >&2
fi
# The headless browser for tests/test_web_browser.py (Debian's chromium, Playwright for Python).
if [ ! -x /usr/bin/chromium ] || ! python -c "import playwright" 2>/dev/null; then
  echo "installing the browser for the web page test (scripts/install_browser.sh)…" >&2
  if ! bash scripts/install_browser.sh; then
    echo "the browser could not be installed: the web page test will be skipped (run scripts/install_browser.sh to retry)" >&2
    [ -z "${CI:-}" ] || exit 1
  fi
fi
# Gates: lint, format and strict types, before any test runs.
ruff check src tests benchmarks
ruff format --check src tests benchmarks
mypy --strict src
# A real PostgreSQL for the store test-suite (both engines), on a Unix socket, stopped on exit.
if pg=$(bash scripts/postgres.sh start); then
  eval "$pg"
  trap 'bash scripts/postgres.sh stop "$TOOLSHELL_TEST_POSTGRES_DIR"' EXIT
elif [ -n "${CI:-}" ]; then
  echo "PostgreSQL could not start: CI needs it for the store tests" >&2
  exit 1
else
  echo "PostgreSQL could not start: the store tests on it will be skipped" >&2
fi
# What git sees before the tests, to compare with after (empty on a fresh checkout).
checkout_state() { git status --porcelain=v1 --untracked-files=all 2>/dev/null && git diff --binary 2>/dev/null | sha256sum; }
before=$(checkout_state || true)
set +e
python -m pytest "$@"
code=$?
set -e
if [ "$code" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
after=$(checkout_state || true)
if [ "$after" != "$before" ]; then
  echo "the test suite changed the checkout (a test must write to its tmp_path, not here); git status now:" >&2
  git status --porcelain=v1 --untracked-files=all >&2
  exit 1
fi
exit "$code"
