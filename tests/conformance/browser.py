"""The conformance adapter's "browser": `$BROWSER` for a login no person watches.

    BROWSER="python tests/conformance/browser.py %s"

The suite's authorization servers approve at once and redirect to the client's loopback callback,
so opening the authorization URL is one GET that follows redirects. Exits 0 once the callback
answered, 1 otherwise (`webbrowser` then reports that nothing was opened).
"""

from __future__ import annotations

import sys

import httpx2


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: browser.py AUTHORIZATION_URL", file=sys.stderr)
        return 2
    try:
        response = httpx2.get(argv[1], follow_redirects=True, timeout=30)
    except httpx2.HTTPError as e:
        print(f"browser.py: {e}", file=sys.stderr)
        return 1
    return 0 if response.is_success else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
