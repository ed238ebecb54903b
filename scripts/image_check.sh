#!/usr/bin/env bash
# Start the image scripts/build_image.sh wrote and probe it: runc (Debian's OCI runtime) runs the
# bundle umoci unpacks from the image, as the image's non-root user with its own entrypoint and
# command; `toolshell serve --http` must answer /healthz and /readyz, and refuse /mcp without
# its token.
#
#   sudo bash scripts/image_check.sh [OUT]     # default OUT: build/image; about 10-30 s
#
# The runtime spec is the one umoci makes from the image's config, changed for a check on this
# host: the container shares the host's network (so the probe reaches its port), it listens on a
# free port instead of 8765, it gets a serve token, and its state volume (a tmpfs) belongs to the
# image's user, as a new volume of a container runtime does. No resource limits and no
# /sys/fs/cgroup mount: the check limits nothing. TOOLSHELL_IMAGE_RUNTIME=crun picks Debian's other
# runtime (crun 1.8 refuses a host whose cgroup v2 tree, beside v1, holds a controller).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/build/image}
layout="$out/toolshell"

die() { echo "image_check: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run it as root (unpacking and running a bundle need it)"
[ -f "$layout/index.json" ] || die "no image at $layout; build it with: sudo bash scripts/build_image.sh $out"
missing=()
command -v umoci >/dev/null || missing+=(umoci)
command -v "${TOOLSHELL_IMAGE_RUNTIME:-runc}" >/dev/null || missing+=("${TOOLSHELL_IMAGE_RUNTIME:-runc}")
command -v curl >/dev/null || missing+=(curl)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

started=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/tmp}/toolshell-image-check.XXXXXX")
name="toolshell-image-check-$$"
runtime=("${TOOLSHELL_IMAGE_RUNTIME:-runc}" --root "$work/state")
cleanup() {
  "${runtime[@]}" kill "$name" KILL 2>/dev/null || true
  "${runtime[@]}" delete --force "$name" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

umoci unpack --image "$layout:latest" "$work/bundle" >/dev/null
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
token=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')
python3 - "$work/bundle/config.json" "$port" "$token" <<'EOF'
import json
import sys

path, port, token = sys.argv[1:]
with open(path) as f:
    spec = json.load(f)
process = spec["process"]
if process["user"]["uid"] == 0:
    sys.exit("image_check: the image runs as root; it must name its non-root user")
args = process["args"]
if args[:2] != ["toolshell", "serve"] or "--port" not in args:
    sys.exit(f"image_check: the image runs {args}, not `toolshell serve … --port`")
args[args.index("--port") + 1] = port
process["env"].append(f"TOOLSHELL_SERVE_TOKEN={token}")
process["terminal"] = False
linux = spec["linux"]
linux["namespaces"] = [n for n in linux["namespaces"] if n["type"] != "network"]
linux.pop("resources", None)
mounts = [m for m in spec["mounts"] if m["type"] != "cgroup"]
for m in mounts:  # the image's VOLUME, a fresh tmpfs: owned by the image's user, as a runtime's new volume is
    if m["destination"] == "/var/lib/toolshell":
        m["options"] = [*m.get("options", []), f"uid={process['user']['uid']}", f"gid={process['user']['gid']}", "mode=0700"]
spec["mounts"] = mounts
with open(path, "w") as f:
    json.dump(spec, f)
EOF

"${runtime[@]}" run --detach --bundle "$work/bundle" "$name" >"$work/serve.log" 2>&1 </dev/null \
  || { cat "$work/serve.log" >&2; die "${runtime[0]} could not start the container"; }

url="http://127.0.0.1:$port"
deadline=$(($(date +%s) + 90))
until body=$(curl -fsS --max-time 5 "$url/healthz" 2>/dev/null); do
  [ "$(date +%s)" -lt "$deadline" ] || { cat "$work/serve.log" >&2; die "no answer on $url/healthz in 90 s"; }
  "${runtime[@]}" state "$name" 2>/dev/null | grep -q '"running"' || { cat "$work/serve.log" >&2; die "the server exited"; }
  sleep 1
done
[ "$body" = ok ] || die "/healthz answered '$body', not 'ok'"
echo "image_check: GET /healthz: 200 $body"
ready=$(curl -fsS --max-time 5 "$url/readyz") || die "/readyz did not answer 200: $(curl -sS "$url/readyz")"
[ "$ready" = ready ] || die "/readyz answered '$ready', not 'ready'"
echo "image_check: GET /readyz: 200 $ready"
refused=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 5 -X POST "$url/mcp")
[ "$refused" = 401 ] || die "POST /mcp without the token got $refused, not 401"
echo "image_check: POST /mcp without the token: 401"
user=$("${runtime[@]}" exec "$name" id -u)
[ "$user" = 10001 ] || die "the server runs as uid $user, not 10001"
echo "image_check: the server runs as uid $user"
"${runtime[@]}" kill "$name" TERM
deadline=$(($(date +%s) + 60))
while "${runtime[@]}" state "$name" 2>/dev/null | grep -q '"running"'; do
  [ "$(date +%s)" -lt "$deadline" ] || die "SIGTERM did not stop the server in 60 s"
  sleep 1
done
echo "image_check: SIGTERM stopped it; passed in $(($(date +%s) - started)) s"
