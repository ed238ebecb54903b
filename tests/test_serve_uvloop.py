"""`serve` runs on libuv's event loop (uvloop) and parses HTTP with httptools (issue 31, round 4): every
request crosses the loop several times and is parsed once, and both cost a fraction of asyncio's pure
Python loop and h11 (benchmarks/README.md). Short commands stay on asyncio's own loop."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx2
import pytest

from _fleet_support import MCP_HEADERS, META, TOKEN
from _serve_auth_support import serving
from toolshell.frontends.cli.options import run_async
from toolshell.store.keys import new_key

CONFIG = "[serve]\ndrain_seconds = 5\n"


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_a_fast_loop_is_uvloop_and_a_short_command_keeps_asyncios() -> None:
    assert run_async(_loop_module, fast_loop=True).startswith("uvloop")
    assert run_async(_loop_module).startswith("asyncio")


def _mapped(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/PID/maps (Linux)")
def test_serve_answers_a_call_on_uvloop_with_httptools(tmp_path: Path) -> None:
    """A real `serve --http` answers a `bash` call, and the process has uvloop's loop and httptools'
    parser loaded: the loop it runs on and the parser uvicorn was told to use."""
    env = {"TOOLSHELL_SERVE_TOKEN": TOKEN, "TOOLSHELL_STATE_KEYS": new_key()}
    with serving(tmp_path / "state", config=CONFIG, env=env) as served:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
        body["params"] = {"name": "bash", "arguments": {"script": "echo ran"}, "_meta": META}  # type: ignore[assignment]
        headers = {**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}", "Mcp-Method": "tools/call", "Mcp-Name": "bash"}
        response = httpx2.post(served.url, content=json.dumps(body), headers=headers, timeout=60)
        assert json.loads(response.text)["result"]["structuredContent"]["stdout"] == "ran\n", response.text
        maps = _mapped(served.proc.pid)
    assert "/uvloop/loop." in maps, "serve does not run on uvloop"
    assert "/httptools/parser/parser." in maps, "serve does not parse HTTP with httptools"
