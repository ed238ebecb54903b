"""`toolshell serve --http` in a process of its own, for the tests of a server that tries to freeze
it: a loop frozen there cannot freeze the test, and another session's call shows whether it did."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from _net_support import free_port


@contextmanager
def serving_hostile(tmp_path: Path, server_args: list[str]) -> Iterator[str]:
    """serve --http (no auth: these tests are about the server) with one stdio server `evil` run as
    `python <server_args>`, approvals off; yields the MCP URL."""
    config = tmp_path / "toolshell.toml"
    config.write_text(
        f'[[mcp.servers]]\nname = "evil"\ncommand = {json.dumps(sys.executable)}\nargs = {json.dumps(server_args)}\n'
        '[approval]\nmode = "off"\n'
    )
    port = free_port()
    exe = str(Path(sys.executable).parent / "toolshell")
    args = ["serve", "--http", "--no-auth", "--port", str(port), "--config", str(config)]
    proc = subprocess.Popen(
        [exe, *args, "--state-dir", str(tmp_path / "state")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:  # a loop frozen in a check does not even see SIGTERM
            proc.kill()
            proc.wait(10)


async def bash_into(url: str, script: str, out: dict[str, Any], key: str, started: anyio.Event | None = None) -> None:
    """One `bash` call on `url`; its result's JSON goes to `out[key]`."""
    async with Client(url) as client:
        if started is not None:
            started.set()
        result = await client.call_tool("bash", {"script": script})
    out[key] = result.structured_content
