"""`toolshell serve --http` in its own process, an SDK client that sends a bearer token, and a
client with nothing but the standard library, for a second local account (`runuser -u nobody`)
that cannot run the project's interpreter."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer

from _ci_support import skip_or_fail
from _github_server import make_github
from _net_support import free_port

TESTS = Path(__file__).parent
SRC = TESTS.parent / "src"
GITHUB_CONFIG = '[[mcp.servers]]\nname = "github"\ntype = "builtin"\nmodule = "_serve_auth_support:github"\n'
"""A server whose `delete-branch` is destructive: every call needs a person's approval."""


def github() -> MCPServer:
    """`make_github` for a config's `module =` (a factory taking nothing; it would pass the host)."""
    return make_github()


@dataclass
class Served:
    url: str
    state: Path
    start_line: str
    proc: subprocess.Popen[str]
    stderr: list[str]
    """What the server wrote to stderr after its start line (read by a thread until it exits)."""


def toolshell_exe() -> str:
    return shutil.which("toolshell") or str(Path(sys.executable).parent / "toolshell")


@contextmanager
def serving(
    state: Path, *args: str, config: str = GITHUB_CONFIG, env: dict[str, str] | None = None
) -> Iterator[Served]:
    """`toolshell serve --http` on a free loopback port; yields once its start line is out."""
    config_file = state.parent / "toolshell.toml"
    config_file.write_text(config)
    port = free_port()
    argv = [toolshell_exe(), "serve", "--http", "--port", str(port), "--config", str(config_file)]
    argv += ["--state-dir", str(state), *args]
    environ = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{TESTS}", **(env or {})}
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=environ)
    try:
        assert proc.stderr is not None
        line = ""
        for line in proc.stderr:  # blocks until the server has printed where it serves (or died)
            if "serving MCP on" in line:
                break
        else:
            raise AssertionError(f"serve exited with {proc.wait(10)}: {line}")
        rest: list[str] = []
        drain = threading.Thread(target=lambda: rest.extend(proc.stderr or ()), daemon=True)
        drain.start()
        wait_for_port(port)
        yield Served(f"http://127.0.0.1:{port}/mcp", state, line, proc, rest)
    finally:
        proc.terminate()  # a drain: runs still parked for an answer keep it up to [serve] drain_seconds
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.terminate()  # a second SIGTERM stops at once
            proc.wait(10)


def wait_for_port(port: int, seconds: float = 20) -> None:
    """The start line comes just before the socket is bound: connect until it is (bounded)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)  # a poll while the server binds, bounded above


@asynccontextmanager
async def client(url: str, token: str | None, **kwargs: Any) -> AsyncIterator[Client]:
    """An SDK client whose every request carries `Authorization: Bearer <token>`."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http:
        with anyio.fail_after(60):
            async with Client(streamable_http_client(url, http_client=http), **kwargs) as c:
                yield c


STDLIB_CLIENT = r"""
import json, sys, urllib.error, urllib.request

url, token_file, script = sys.argv[1], sys.argv[2], sys.argv[3]
meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "intruder", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}
out = {}
try:
    out["token_file"] = open(token_file).read()
except OSError as e:
    out["token_file"] = e.strerror

def call(extra, token):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "bash", "arguments": {"script": script}, "_meta": meta, **extra}}
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "bash"}
    if token:
        headers["Authorization"] = "Bearer " + token
    request = urllib.request.Request(url, json.dumps(body).encode(), headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return [r.status, json.loads(r.read())]
    except urllib.error.HTTPError as e:
        return [e.code, json.loads(e.read() or b"null"), e.headers.get("WWW-Authenticate")]

for name, token in [("no_token", None), ("guessed_token", "guess")]:
    status, body, *rest = out[name] = call({}, token)
    result = (body or {}).get("result") or {}
    if status == 200 and result.get("resultType") == "input_required":
        [key] = result["inputRequests"]
        always = {"inputResponses": {key: {"action": "accept", "content": {"answer": "always"}}},
                  "requestState": result["requestState"]}
        out[name + "_always"] = call(always, token)
print(json.dumps(out))
"""


@dataclass
class Outsider:
    """A second local account (`nobody`) with curl and the system's python3 (standard library)."""

    directory: Path
    """World-readable: the outsider's script lives here, and state dirs meant to be reachable."""

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["runuser", "-u", "nobody", "--", *argv], capture_output=True, text=True, timeout=60, check=False
        )

    def mcp_call(self, url: str, token_file: Path, script: str) -> subprocess.CompletedProcess[str]:
        """Call `bash` without the token and with a guessed one; answer any approval with `always`."""
        program = self.directory / "intruder.py"
        program.write_text(STDLIB_CLIENT)
        program.chmod(0o644)
        return self.run("/usr/bin/python3", str(program), url, str(token_file), script)


@pytest.fixture
def outsider() -> Iterator[Outsider]:
    if os.geteuid() != 0 or shutil.which("runuser") is None or not Path("/usr/bin/python3").exists():
        skip_or_fail("needs root, runuser and /usr/bin/python3 to act as a second local account")
    directory = Path(tempfile.mkdtemp(prefix="toolshell-outsider-"))
    directory.chmod(0o755)  # nobody may traverse it: what stops them must be the files' own modes
    try:
        yield Outsider(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
