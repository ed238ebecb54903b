#!/usr/bin/env bash
# Build the toolshell container image from Debian's packages alone (no image registry needed):
# debootstrap a minimal Debian rootfs, install toolshell[postgres,otel] from a wheel of this
# checkout into a venv in it, add the non-root user, and write an OCI image layout with umoci.
# The same image as ./Containerfile describes, on Debian's python3 instead of the python:slim base.
#
#   sudo bash scripts/build_image.sh [OUT]     # default OUT: build/image; about 2-4 minutes
#
# Writes OUT/toolshell, an OCI image layout tagged `latest` and the package's version. Push it with
# `skopeo copy oci:OUT/toolshell:latest docker://registry.example/toolshell:latest`, run it with
# podman (`podman run oci:OUT/toolshell:latest`), or check it: `bash scripts/image_check.sh OUT`.
# TOOLSHELL_IMAGE_MIRROR and TOOLSHELL_IMAGE_SUITE override the Debian mirror (default: the one
# in this host's apt sources) and release (default: bookworm).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$root/build/image}" && cd "${1:-$root/build/image}" && pwd)
suite=${TOOLSHELL_IMAGE_SUITE:-bookworm}
python=${PYTHON:-$root/.venv/bin/python}
uid=10001 # deploy/kubernetes/deployment.yaml runs the pod as this user

die() { echo "build_image: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run it as root (debootstrap and chroot need it)"
[ -x "$python" ] || python=python3

mirror=${TOOLSHELL_IMAGE_MIRROR:-}
if [ -z "$mirror" ]; then
  # The first Debian (not -security) URI of this host's apt sources, one-line or deb822 format.
  mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
    grep -Eo 'https?://[^ ]+/debian/?( |$)' | head -n1 | tr -d ' ' || true)
  mirror=${mirror:-http://deb.debian.org/debian}
fi

missing=()
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v umoci >/dev/null || missing+=(umoci)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

started=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/tmp}/toolshell-image.XXXXXX")
cleanup() {
  for m in proc dev/pts dev; do umount -l "$work/bundle/rootfs/$m" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

echo "build_image: the wheel of $root" >&2
"$python" -m build --wheel --outdir "$work/dist" "$root" >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 1; }
wheel=$(basename "$(ls "$work"/dist/toolshell-*.whl)")
version=${wheel#toolshell-}
version=${version%%-*}

layout="$out/toolshell"
rm -rf "$layout"
umoci init --layout "$layout"
umoci new --image "$layout:latest"
umoci unpack --image "$layout:latest" "$work/bundle" >/dev/null
rootfs="$work/bundle/rootfs"

echo "build_image: debootstrap $suite from $mirror" >&2
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
  "$suite" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }

echo "build_image: toolshell $version[postgres,otel] into /opt/toolshell" >&2
# The wheels are fetched here, with this host's pip and its index settings; the rootfs's pip then
# installs offline from them (binary wheels only: the image has no compiler).
"$python" -m pip download --quiet --only-binary=:all: --dest "$work/wheels" "$work/dist/$wheel[postgres,otel]" \
  >"$work/pip.log" 2>&1 || { cat "$work/pip.log" >&2; exit 1; }
mkdir -p "$rootfs/tmp/wheels"
cp "$work"/wheels/*.whl "$rootfs/tmp/wheels/"
mount -t proc proc "$rootfs/proc"
in_root() { env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 chroot "$rootfs" "$@"; }
in_root python3 -m venv /opt/toolshell
in_root /opt/toolshell/bin/pip install --quiet --no-cache-dir --disable-pip-version-check --no-index \
  --find-links /tmp/wheels "/tmp/wheels/$wheel[postgres,otel]"
in_root /opt/toolshell/bin/toolshell --version >/dev/null
umount "$rootfs/proc"

# The non-root user the image runs as, owning the state dir (SQLite when no shared store is set).
in_root groupadd --gid "$uid" toolshell
in_root useradd --uid "$uid" --gid "$uid" --home-dir /var/lib/toolshell --no-create-home \
  --shell /usr/sbin/nologin toolshell
install -d -m 0700 -o "$uid" -g "$uid" "$rootfs/var/lib/toolshell"
install -d -m 0755 "$rootfs/etc/toolshell"

# What a running server never reads: the wheels, apt's lists and caches, docs, logs.
rm -rf "$rootfs/tmp/wheels"
: >"$rootfs/etc/resolv.conf" # debootstrap copied this host's; a runtime writes the container's
echo toolshell >"$rootfs/etc/hostname"
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/cache/debconf/*-old \
  "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/var/log/*

umoci repack --image "$layout:latest" "$work/bundle"
umoci config --image "$layout:latest" \
  --author "toolshell" \
  --config.user "$uid:$uid" \
  --config.workingdir /var/lib/toolshell \
  --config.env PATH=/opt/toolshell/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --config.env HOME=/var/lib/toolshell \
  --config.env TOOLSHELL_STATE_DIR=/var/lib/toolshell \
  --config.env PYTHONUNBUFFERED=1 \
  --config.exposedports 8765/tcp \
  --config.volume /var/lib/toolshell \
  --config.entrypoint toolshell \
  --config.cmd serve --config.cmd --http --config.cmd --host --config.cmd 0.0.0.0 \
  --config.cmd --port --config.cmd 8765 --config.cmd --allow-remote \
  --config.label "org.opencontainers.image.title=toolshell" \
  --config.label "org.opencontainers.image.version=$version" \
  --config.label "org.opencontainers.image.base.name=debian:$suite"
umoci tag --image "$layout:latest" "$version"
umoci gc --layout "$layout"

size=$(du -sm "$layout" | cut -f1)
echo "build_image: $layout:latest (and :$version), ${size} MB compressed, in $(($(date +%s) - started)) s" >&2
