"""Workers of one fleet for the `test_fleet_*` tests: `serve --http` processes on one PostgreSQL
store, and the few raw HTTP requests the tests make besides the SDK client's."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from _serve_auth_support import GITHUB_CONFIG, Served, serving
from toolshell.store.keys import new_key

TOKEN = "serve-token-for-the-fleet-tests-0123456789abcdef"
FLEET_CONFIG = GITHUB_CONFIG + "[serve]\nheartbeat_seconds = 1\n"


def fleet_env(store_url: str) -> dict[str, str]:
    """What every worker of one fleet gets: the store, one key ring, one token."""
    return {"TOOLSHELL_STATE_URL": store_url, "TOOLSHELL_STATE_KEYS": new_key(), "TOOLSHELL_SERVE_TOKEN": TOKEN}


@contextmanager
def fleet(
    tmp_path: Path, env: dict[str, str], count: int, *args: str, config: str = FLEET_CONFIG
) -> Iterator[list[Served]]:
    """`count` workers on the store of `env`, each with a state dir of its own."""
    with ExitStack() as stack:
        workers = []
        for n in range(count):
            state = tmp_path / f"w{n}" / "state"
            state.parent.mkdir(parents=True, exist_ok=True)
            workers.append(stack.enter_context(serving(state, *args, config=config, env=env)))
        yield workers


def port_of(worker: Served) -> int:
    return int(worker.url.rsplit(":", 1)[1].split("/")[0])


MCP_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "fleet-test", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


async def raw_call(url: str, script: str, headers: dict[str, str] | None = None) -> httpx2.Response:
    """One 2026-07-28 `tools/call` of `bash`, as bytes on the wire (so a test can set any header)."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "bash", "arguments": {"script": script}, "_meta": META},
    }
    sent = {**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}", "Mcp-Method": "tools/call", "Mcp-Name": "bash"}
    async with httpx2.AsyncClient(timeout=60) as http:
        return await http.post(url, content=json.dumps(body), headers={**sent, **(headers or {})})


def stdout_of(response: httpx2.Response) -> str:
    """The `stdout` of a `bash` result in a JSON or SSE answer."""
    text = response.text
    if "data:" in text:
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:") and '"result"' in line)
    result = json.loads(text)["result"]
    return str(result["structuredContent"]["stdout"])


@asynccontextmanager
async def fleet_client(url: str, headers: dict[str, str] | None = None, **kwargs: Any) -> AsyncIterator[Client]:
    """An SDK client (its default mode: 2026-07-28) sending the fleet's token and `headers`."""
    sent = {"Authorization": f"Bearer {TOKEN}", **(headers or {})}
    async with httpx2.AsyncClient(headers=sent, timeout=httpx2.Timeout(30, read=60)) as http:
        with anyio.fail_after(60):
            async with Client(streamable_http_client(url, http_client=http), **kwargs) as c:
                yield c


def bash_stdout(result: Any) -> str:
    return str(result.structured_content["stdout"])


def exited(proc: subprocess.Popen[str], seconds: float = 60) -> int:
    """The exit status of a worker that was told to stop (bounded)."""
    return proc.wait(seconds)
