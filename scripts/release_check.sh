#!/usr/bin/env bash
# Build what a release ships and use it the way a new user would:
#   the sdist and the wheel (`python -m build`), their metadata (`twine check --strict`), then the
#   wheel alone in a fresh venv outside the checkout: `toolshell --version` and the quickstart.
#   bash scripts/release_check.sh        (run by .ci/run; needs the dev extra: build, twine)
#   bash scripts/release_check.sh --dist DIR   also keeps the sdist and the wheel in DIR (to install
#                                               with pipx or uv until a release is published)
set -euo pipefail
keep=""
if [ "${1:-}" = "--dist" ]; then
  [ -n "${2:-}" ] || { echo "release check: --dist needs a directory" >&2; exit 2; }
  mkdir -p "$2" && keep=$(cd "$2" && pwd)
fi
cd "$(dirname "$0")/.."
. scripts/retry.sh

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python=${PYTHON:-python}
version=$("$python" -c 'import runpy; print(runpy.run_path("src/toolshell/version.py")["__version__"])')

echo "release check: building toolshell $version (sdist and wheel)…" >&2
"$python" -m build --sdist --wheel --outdir "$work/dist" . >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 1; }
"$python" -m twine check --strict "$work"/dist/*
sdist="$work/dist/toolshell-$version.tar.gz"
wheel="$work/dist/toolshell-$version-py3-none-any.whl"
for file in "$sdist" "$wheel"; do
  [ -f "$file" ] || { echo "release check: $file was not built" >&2; ls "$work/dist" >&2; exit 1; }
done
# What the package needs at run time, and the licence, are in the wheel; the licence is in the sdist.
"$python" - "$wheel" "$sdist" <<'PY'
import sys, tarfile, zipfile
wheel, sdist = sys.argv[1:]
names = zipfile.ZipFile(wheel).namelist()
wanted = ["toolshell/py.typed", "toolshell/frontends/web/static/index.html", "LICENSE"]
missing = [w for w in wanted if not any(n == w or n.endswith("/" + w) for n in names)]
in_sdist = tarfile.open(sdist).getnames()
missing += [f"sdist:{w}" for w in ("LICENSE", "README.md", "CHANGELOG.md") if not any(n.endswith("/" + w) for n in in_sdist)]
if missing:
    sys.exit(f"release check: missing from the release: {', '.join(missing)}")
PY

echo "release check: installing the wheel into a fresh venv…" >&2
"$python" -m venv "$work/venv"
# (this machine's pip config names local mirrors that may be absent; their warnings are noise)
retry "$work/venv/bin/python" -m pip install --quiet "$wheel" 2> >(grep -v "^WARNING: Location '" >&2)
cd "$work"  # away from the checkout: only the installed wheel can answer
shown=$("$work/venv/bin/toolshell" --version)
[ "$shown" = "toolshell, version $version" ] || { echo "release check: --version said '$shown'" >&2; exit 1; }
cp "$OLDPWD/examples/quickstart.sh" "$work/quickstart.sh"
out=$(env -u TOOLSHELL_CONFIG TOOLSHELL_STATE_DIR="$work/state" XDG_CONFIG_HOME="$work/config" \
  "$work/venv/bin/toolshell" run --no-daemon "$work/quickstart.sh")
for expected in '{"word":"héllo","unicode_scalars":5}' 'text_metrics: ready'; do
  grep -qF "$expected" <<<"$out" || { echo "release check: the quickstart did not print $expected:" >&2; echo "$out" >&2; exit 1; }
done
echo "release check: ok (toolshell $version: sdist, wheel, twine check, --version, quickstart)" >&2
if [ -n "$keep" ]; then
  cp "$sdist" "$wheel" "$keep/"
  echo "release check: kept $keep/$(basename "$wheel") and $(basename "$sdist")" >&2
fi
