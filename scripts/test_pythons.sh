#!/usr/bin/env bash
# The other Pythons toolshell supports (requires-python >= 3.11; the main run, scripts/test.sh, is
# on python3): for each of 3.12 and 3.13, a venv of its own (.venv-3.12, .venv-3.13), then
#   1. every tracked .py file compiled with SyntaxWarning as an error (an invalid escape such as
#      '\@' warns on 3.12 and will be an error; 3.13.0 could not compile a docstring holding a lone
#      surrogate escape), and every toolshell module imported;
#   2. the fast part of the suite, `-W error::SyntaxWarning` (and the pytest config's warnings as
#      errors), with a throwaway PostgreSQL so the store tests run on both engines.
# Left out, for time: the real-proxy, fleet, daemon, image and browser tests and the slowest unit
# files (masking encodings, cut outputs, telemetry over HTTP); they run on the main Python.
#   bash scripts/test_pythons.sh [VERSION...]     # default: 3.12 3.13
# An interpreter is looked for as pythonX.Y on PATH, then under pyenv. Under CI a missing one fails.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/retry.sh

FAST=(
  tests/test_auth_params.py tests/test_bash_tool_stable.py
  tests/test_builtin_functions.py tests/test_builtin_resolve.py tests/test_builtin_runtime.py
  tests/test_builtin_text_metrics.py tests/test_builtin_web_fetch.py tests/test_calls_replay.py
  tests/test_cheap_shell_calls.py tests/test_claims_lost.py tests/test_command_argv.py tests/test_command_help.py
  tests/test_command_inputs.py tests/test_command_render.py tests/test_connections_calls.py
  tests/test_connections_elicitation.py tests/test_connections_http.py tests/test_connections_manager.py
  tests/test_connections_timer.py tests/test_connections_tools.py tests/test_cron_library.py
  tests/test_direct_calls_by_shell_rules.py tests/test_escaping.py tests/test_fanout.py tests/test_host_api.py
  tests/test_hostile_oauth.py tests/test_hostile_server.py tests/test_http_message_bound.py
  tests/test_input_files.py tests/test_interactive.py tests/test_live_shells.py tests/test_llm_and_elicitation.py
  tests/test_output_shell.py tests/test_per_call_reuse.py
  tests/test_policy_approvals.py tests/test_policy_guardrails.py tests/test_policy_plan.py
  tests/test_policy_rating.py tests/test_policy_report.py tests/test_policy_risk.py tests/test_registry_catalog.py
  tests/test_registry_filters.py tests/test_registry_naming.py tests/test_registry_search.py
  tests/test_registry_validate.py tests/test_scripts_cron.py tests/test_scripts_store.py
  tests/test_scripts_triggers.py tests/test_scripts_verbs.py tests/test_scripts_webhook.py
  tests/test_search_unsearched.py tests/test_secret_names.py tests/test_serve_list_changed.py
  tests/test_session_context.py tests/test_shell_web_fetch.py tests/test_shells.py tests/test_state_keys.py
  tests/test_store.py tests/test_store_engines.py tests/test_tasks_yield.py tests/test_timeline_events.py
  tests/test_timeline_sinks.py tests/test_triggers_host.py tests/test_trust_overlay.py tests/test_trust_results.py
)
# ^ the files that take seconds, chosen by timing each file on 3.13: 1,100 tests, about 2 min a
# version with the venv on 2 shared cores. The source-walking checks (layers, no backtracking
# regex) read the code, not the interpreter, and run on the main Python only.

find_python() {
  local v=$1 root candidate
  root=$( (command -v pyenv >/dev/null && pyenv root) || echo "$HOME/.pyenv")
  # a pyenv shim is on PATH even where that version is not selected: each candidate must run
  for candidate in "$(command -v "python$v" 2>/dev/null)" \
    "$(ls -d "$root"/versions/"$v".*/bin/python 2>/dev/null | sort -V | tail -1)"; do
    if [ -n "$candidate" ] && "$candidate" -c "import sys; assert sys.version_info[:2] == (${v/./, })" 2>/dev/null; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}

# The dev requirements the fast part needs, with pyproject's pins (no browser, build or lint tools).
test_requirements() {
  "$1" - <<'EOF'
import re, tomllib
dev = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["dev"]
wanted = {"pytest", "hypothesis", "opentelemetry-proto"}
print("\n".join(r for r in dev if re.split(r"[<>=!~\[ ;]", r, maxsplit=1)[0].lower() in wanted))
EOF
}

versions=("$@")
[ "${#versions[@]}" -gt 0 ] || versions=(3.12 3.13)

if pg=$(bash scripts/postgres.sh start); then
  eval "$pg"
  trap 'bash scripts/postgres.sh stop "$TOOLSHELL_TEST_POSTGRES_DIR"' EXIT
elif [ -n "${CI:-}" ]; then
  echo "PostgreSQL could not start: CI needs it for the store tests" >&2
  exit 1
fi

for v in "${versions[@]}"; do
  started=$SECONDS
  if ! python=$(find_python "$v"); then
    echo "python$v not found (install it, e.g. pyenv install $v)" >&2
    [ -z "${CI:-}" ] || exit 1
    continue
  fi
  venv=".venv-$v"
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  mapfile -t reqs < <(test_requirements "$venv/bin/python")
  # (this machine's pip config names local mirrors that may be absent; their warnings are noise)
  retry "$venv/bin/python" -m pip install --quiet -e '.[otel,postgres]' "${reqs[@]}" \
    2> >(grep -v "^WARNING: Location '" >&2)
  echo "== Python $("$venv/bin/python" -c 'import sys; print(sys.version.split()[0])'): compile and import" >&2
  git ls-files -z '*.py' | PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" -W error::SyntaxWarning -c '
import sys
for path in sys.stdin.read().split("\0"):
    if path:
        with open(path, "rb") as f:
            compile(f.read(), path, "exec")
'
  "$venv/bin/python" -W error::SyntaxWarning -c '
import importlib, pkgutil, toolshell
for m in pkgutil.walk_packages(toolshell.__path__, "toolshell."):
    importlib.import_module(m.name)
'
  echo "== Python $v: the fast tests" >&2
  PYTHONWARNINGS=error::SyntaxWarning "$venv/bin/python" -W error::SyntaxWarning -m pytest -q -p no:cacheprovider \
    "${FAST[@]}"
  echo "== Python $v: passed in $((SECONDS - started)) s" >&2
done
