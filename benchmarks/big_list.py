"""Peak memory of listing a server that offers 100,000 tools in one `tools/list` page.

Usage: `python benchmarks/big_list.py [--tools N] [--max-tools N]` (default 100,000 and the
config's default `max_tools`). Each mode runs in a fresh process, so its peak RSS is its own (the
host only; the server is its subprocess). The server is `tests/servers/hostile_server.py many=N`.

| mode | what runs |
|---|---|
| idle | toolshell with the server listing only its 5 fixed tools: the floor (imports, one server) |
| sdk | `mcp.client.Client` over stdio, one `list_tools()`: what the SDK alone makes of the page |
| toolshell | `Host.open`, one `tools evil t5` call: the page read, cut to `max_tools`, catalogued |
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

SERVER = Path(__file__).resolve().parent.parent / "tests" / "servers" / "hostile_server.py"


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


async def _toolshell(tools: int, max_tools: int | None) -> dict[str, object]:
    from toolshell.config import Config
    from toolshell.host import Host

    entry: dict[str, object] = {
        "name": "evil",
        "command": sys.executable,
        "args": [str(SERVER), f"many={tools}"],
        "timeout_seconds": 300,
    }
    if max_tools is not None:
        entry["max_tools"] = max_tools
    config = Config.model_validate(
        {"mcp": {"servers": [entry]}, "approval": {"mode": "off"}, "include_builtins": False}
    )
    async with Host.open(config) as host:
        result = await host.session().run("tools evil t5 || tools evil echo text=hi")
        status = next(s.to_json() for s in host.statuses() if s.name == "evil")
    return {"ok": result.exit_code == 0, "kept": status.get("tool_count"), "notes": status.get("notes", [])}


async def _sdk(tools: int) -> dict[str, object]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=[str(SERVER), f"many={tools}"])
    async with Client(params) as client:
        listed = await client.list_tools()
    return {"ok": True, "kept": len(listed.tools)}


def child(mode: str, tools: int, max_tools: int | None) -> None:
    start = time.perf_counter()
    if mode == "sdk":
        out = anyio.run(_sdk, tools)
    else:
        out = anyio.run(_toolshell, 0 if mode == "idle" else tools, max_tools)
    out |= {"mode": mode, "seconds": round(time.perf_counter() - start, 2), "peak_mb": round(_peak_mb(), 1)}
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=100_000)
    parser.add_argument("--max-tools", type=int, default=None)
    parser.add_argument("--child", choices=["idle", "sdk", "toolshell"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.tools, args.max_tools)
        return
    rows = []
    for mode in ("idle", "sdk", "toolshell"):
        argv = [sys.executable, __file__, "--child", mode, "--tools", str(args.tools)]
        argv += ["--max-tools", str(args.max_tools)] if args.max_tools is not None else []
        done = subprocess.run(argv, capture_output=True, text=True, check=True)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"one page of {args.tools:,} tools")
    print(f"{'mode':<10} {'peak RSS':>10} {'seconds':>8} {'tools kept':>11}")
    for row in rows:
        print(f"{row['mode']:<10} {row['peak_mb']:>8.0f} MB {row['seconds']:>8.2f} {row['kept']!s:>11}")
    for note in rows[-1].get("notes", []):
        print(f"servers: {note}")


if __name__ == "__main__":
    main()
