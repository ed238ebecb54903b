# Sourced by the set-up scripts: `retry CMD...` tries an install three times before giving up
# (a registry can fail a download now and then).
retry() {
  local n
  for n in 1 2 3; do
    if "$@"; then return 0; fi
    echo "attempt $n of: $* failed" >&2
    sleep $((n * 5))
  done
  return 1
}
