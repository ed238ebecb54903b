"""Time and peak memory of one huge tool result, and whether the next call to that server works.

Usage: `python benchmarks/big_results.py [MB ...] [--max-message-bytes N]` (default 20 100 300).
Each size runs in a fresh process, so its peak RSS (the host only; the server is a subprocess) is
its own. The server is `tests/servers/hostile_server.py`, whose `big` tool answers `size` bytes.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import anyio

from toolshell.config import Config
from toolshell.host import Host

SERVER = Path(__file__).resolve().parent.parent / "tests" / "servers" / "hostile_server.py"


async def one(size_mb: int, max_message_bytes: int) -> dict[str, object]:
    server = {"name": "big", "command": sys.executable, "args": [str(SERVER)], "timeout_seconds": 120}
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
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(anyio.run(one, args.sizes[0], args.max_message_bytes)))
        return
    for size in args.sizes:
        extra = ["--max-message-bytes", str(args.max_message_bytes)]
        out = subprocess.run([sys.executable, __file__, str(size), "--one", *extra], capture_output=True, text=True)
        print(out.stdout.strip() or out.stderr.strip()[-400:], flush=True)


if __name__ == "__main__":
    main()
