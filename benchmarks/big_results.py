"""Time and peak memory of one huge tool result, and whether the next call to that server works.

Usage: `python benchmarks/big_results.py [MB ...] [--max-message-bytes N] [--no-scan]` (default
20 100 300). Each size runs in a fresh process, so its peak RSS (the host only; the server is a
subprocess) is its own. The server is `tests/servers/hostile_server.py`, whose `big` tool answers
`size` bytes. Each size runs with the credential scan of results on (the default) and off
(`scan_results = false`), and the run starts with the scan's own cost per KB of text (`[scan]`).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import string
import subprocess
import sys
import time
from pathlib import Path

import anyio

from toolshell.config import Config
from toolshell.host import Host
from toolshell.secrets_scan import find_credentials

SERVER = Path(__file__).resolve().parent.parent / "tests" / "servers" / "hostile_server.py"


async def one(size_mb: int, max_message_bytes: int, scan: bool) -> dict[str, object]:
    server: dict[str, object] = {
        "name": "big",
        "command": sys.executable,
        "args": [str(SERVER)],
        "timeout_seconds": 120,
    }
    server["scan_results"] = scan
    if max_message_bytes:
        server["max_message_bytes"] = max_message_bytes
    config = Config.model_validate(
        {"mcp": {"servers": [server]}, "approval": {"mode": "off"}, "include_builtins": False}
    )
    async with Host.open(config) as host:
        session = host.session()
        start = time.perf_counter()
        big = await session.run(f"tools big big size={size_mb * 1_000_000} | wc -c")
        took = time.perf_counter() - start
        start = time.perf_counter()
        after = await session.run("tools big echo text=next")
        next_took = time.perf_counter() - start
    error = json.loads(big.stderr)["error"]["code"] if big.stderr.startswith("{") else None
    return {
        "size_mb": size_mb,
        "scan_results": scan,
        "seconds": round(took, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "exit_code": big.exit_code,
        "error": error,
        "next_call": after.stdout.strip(),
        "next_call_seconds": round(next_took, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("sizes", nargs="*", type=int, default=[20, 100, 300])
    parser.add_argument("--max-message-bytes", type=int, default=0, help="0: the default bound")
    parser.add_argument("--no-scan", action="store_true", help="only with the credential scan off")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(anyio.run(one, args.sizes[0], args.max_message_bytes, not args.no_scan)))
        return
    print(json.dumps(scan_cost()), flush=True)
    for size in args.sizes:
        for scan in (False,) if args.no_scan else (True, False):
            extra = ["--max-message-bytes", str(args.max_message_bytes), *([] if scan else ["--no-scan"])]
            argv = [sys.executable, __file__, str(size), "--one", *extra]
            out = subprocess.run(argv, capture_output=True, text=True)
            print(out.stdout.strip() or out.stderr.strip()[-400:], flush=True)


def scan_cost() -> dict[str, object]:
    """µs per KB of `find_credentials` on 1 MB of clean text (after its first, compiling pass), and
    per call on a small result."""
    rng = random.Random(7)
    text = "".join(rng.choices(string.ascii_letters + string.digits + ' \n{}":,.-_/+=', k=1_000_000))
    small = json.dumps({"number": 7, "title": "Fix the build", "body": "The CI job fails on main since #41."})
    find_credentials(text)
    start = time.perf_counter()
    for _ in range(5):
        find_credentials(text)
    per_kb = (time.perf_counter() - start) / 5 / 1000 * 1e6
    start = time.perf_counter()
    for _ in range(1000):
        find_credentials(small)
    per_small = (time.perf_counter() - start) / 1000 * 1e6
    return {"scan_us_per_kb": round(per_kb, 1), "scan_us_small_result": round(per_small, 1)}


if __name__ == "__main__":
    main()
