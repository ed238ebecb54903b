"""A `bash` call longer than its client's tool timeout, completed through yield-and-wait.

Usage: `python benchmarks/long_call.py [--seconds 180] [--client-timeout 60] [--yield-seconds 25]`.
It starts one `toolshell serve --http --no-auth` on loopback, then a client whose every request
gives up after `--client-timeout` seconds calls `bash` with a script that prints a numbered
100-byte line every second for `--seconds` seconds (and a burst of 64 kB at the middle). The first
call returns the output so far (`running: true`); the client calls again with the `shell` until
`earlier` says the call ended. It prints the calls made, the time taken and whether the output
collected is every byte the script wrote, in order, once.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

BURST = 640
"""Lines of 100 bytes written at once at the middle of the run (64 kB)."""


def _script(seconds: int) -> str:
    return (
        f"for i in $(seq 1 {seconds}); do printf 'line %04d %094d\\n' $i 0; "
        f"if [ $i = {seconds // 2} ]; then for j in $(seq 1 {BURST}); do printf '%099d\\n' $j; done; fi; sleep 1; done"
    )


def _expected(seconds: int) -> str:
    lines = []
    for i in range(1, seconds + 1):
        lines.append(f"line {i:04d} {0:094d}\n")
        if i == seconds // 2:
            lines += [f"{j:099d}\n" for j in range(1, BURST + 1)]
    return "".join(lines)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _collect(url: str, script: str, client_timeout: float) -> tuple[str, int, dict[str, Any]]:
    """Call `bash` once, then again with its `shell` until the earlier call ended."""
    pieces, calls, body = [], 0, {}
    arguments: dict[str, Any] = {"script": script}
    while True:
        calls += 1
        async with (
            httpx2.AsyncClient(timeout=httpx2.Timeout(client_timeout, read=client_timeout)) as http,
            # A hard limit on each request, as the SDK's own timeout (SSE keep-alives reset httpx's).
            Client(streamable_http_client(url, http_client=http), read_timeout_seconds=client_timeout) as client,
        ):
            result = await client.call_tool("bash", arguments)
        body = dict(result.structured_content or {})
        if calls == 1:
            pieces.append(body["stdout"])
            arguments = {"script": "true", "shell": body["shell"]}
        elif "earlier" in body:
            pieces.append(body["earlier"]["stdout"])
        if calls > 1 and "earlier" in body and not body["earlier"].get("running"):
            return "".join(pieces), calls, body["earlier"]


def _wait_for(port: int) -> None:
    """The start line comes just before the socket is bound: connect until it is."""
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=180)
    parser.add_argument("--client-timeout", type=float, default=60)
    parser.add_argument("--yield-seconds", type=float, default=25)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="toolshell-long-call-"))
    config = root / "toolshell.toml"
    config.write_text(f"[serve]\nyield_seconds = {args.yield_seconds}\n[shell]\ntimeout_seconds = {args.seconds * 2}\n")
    port = _free_port()
    exe = shutil.which("toolshell") or str(Path(sys.executable).parent / "toolshell")
    argv = [exe, "serve", "--http", "--no-auth", "--port", str(port), "--config", str(config)]
    server = subprocess.Popen([*argv, "--state-dir", str(root / "state")], stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        for line in server.stderr:
            if "serving MCP on" in line:
                break
        _wait_for(port)
        started = time.monotonic()
        try:
            output, calls, end = anyio.run(
                _collect, f"http://127.0.0.1:{port}/mcp", _script(args.seconds), args.client_timeout
            )
        except* MCPError as group:  # the client gave up on a call before it yielded: its output is lost
            leaf: BaseException = group
            while isinstance(leaf, BaseExceptionGroup):
                leaf = leaf.exceptions[0]
            output, calls, end = "", 0, {"error": str(leaf)}
        took = time.monotonic() - started
    finally:
        server.terminate()
        server.wait(30)
        shutil.rmtree(root, ignore_errors=True)
    expected = _expected(args.seconds)
    figures = {
        "script_seconds": args.seconds,
        "client_timeout_seconds": args.client_timeout,
        "yield_seconds": args.yield_seconds,
        "calls": calls,
        "seconds_taken": round(took, 1),
        "bytes_expected": len(expected),
        "bytes_collected": len(output),
        "every_byte_once_in_order": output == expected,
        "exit_code": end.get("exit_code"),
        **({"client_error": end["error"]} if "error" in end else {}),
    }
    print(json.dumps(figures, indent=2))
    if os.environ.get("CI") and output != expected:
        sys.exit(1)


if __name__ == "__main__":
    main()
