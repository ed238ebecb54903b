#!/usr/bin/env bash
# The headless browser for tests/test_web_browser.py: Debian's chromium, driven by Playwright for
# Python pointed at /usr/bin/chromium (never `playwright install`, which downloads its own build).
set -euo pipefail

if [ ! -x /usr/bin/chromium ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    for attempt in 1 2 3; do
        if $SUDO apt-get update -q && $SUDO apt-get install -y -q --no-install-recommends chromium; then
            break
        fi
        echo "apt-get install chromium failed (attempt $attempt); retrying" >&2
        sleep $((attempt * 5))
    done
fi
[ -x /usr/bin/chromium ] || { echo "chromium is not installed; the browser test will be skipped" >&2; exit 1; }

python -c "import playwright" 2>/dev/null || python -m pip install -q playwright
