"""For `test_fleet_rolling.py`: a server that logs every call it runs, workers that restart on
their own port (a proxy's configuration names fixed addresses), and a client that calls `bash`
again after an error a rolling restart may give, and only after those."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from _serve_auth_support import SRC, TESTS, toolshell_exe, wait_for_port

LOG_ENV = "TOOLSHELL_TEST_LEDGER_LOG"
LEDGER_CONFIG = '[[mcp.servers]]\nname = "ledger"\ntype = "builtin"\nmodule = "_rolling_support:ledger"\n'


def ledger() -> MCPServer:
    """`record` changes something and runs without asking; `remove` is destructive, so asks. Each
    call appends `<tool> <id>` to the file `$TOOLSHELL_TEST_LEDGER_LOG` names (one `write` of an
    `O_APPEND` file: lines of every worker's calls never interleave)."""
    server = MCPServer("ledger")
    path = os.environ[LOG_ENV]

    def logged(tool: str, id: str) -> str:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, f"{tool} {id}\n".encode())
        finally:
            os.close(fd)
        return f"{tool} {id}"

    def record(id: str) -> str:
        return logged("record", id)

    def remove(id: str) -> str:
        return logged("remove", id)

    changes = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)
    server.add_tool(record, name="record", description="Record an id.", annotations=changes)
    server.add_tool(
        remove, name="remove", description="Remove an id.", annotations=ToolAnnotations(destructiveHint=True)
    )
    return server


def logged_calls(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@dataclass
class Worker:
    """`toolshell serve --http` on a fixed port, started again on it after a SIGTERM."""

    port: int
    state: Path
    config: Path
    env: dict[str, str]
    proc: subprocess.Popen[str] | None = None
    stderr: list[str] = field(default_factory=list)

    def start(self) -> None:
        argv = [toolshell_exe(), "serve", "--http", "--port", str(self.port), "--config", str(self.config)]
        environ = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{TESTS}", **self.env}
        argv += ["--state-dir", str(self.state)]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=environ)
        assert proc.stderr is not None
        for line in proc.stderr:  # blocks until the start line (or the end of a worker that died)
            self.stderr.append(line)
            if "serving MCP on" in line:
                break
        else:
            raise AssertionError(f"serve exited with {proc.wait(10)}: {''.join(self.stderr[-5:])}")
        threading.Thread(target=lambda: self.stderr.extend(proc.stderr or ()), daemon=True).start()
        self.proc = proc
        wait_for_port(self.port)

    def terminated(self, seconds: float = 60) -> int:
        """SIGTERM (a drain), and the exit status once it is over."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(seconds)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGTERM)  # a second SIGTERM stops at once
                self.proc.wait(20)


class Retryable(Exception):
    """An answer a rolling restart may give that says nothing ran: call again."""


RETRY_STATUSES = frozenset({502, 503, 504})
"""From the proxy: no worker took the request (HAProxy's own 503, a draining worker's 503 it did
not resend, a 502 for a connection the worker closed before answering)."""


@dataclass
class Caller:
    """Calls `bash` through `url` with a bearer token, a client per call, and tells a retryable
    failure from any other.

    Each client lists the tools before it calls: the SDK validates a result against the tool's
    output schema and lists the tools to find it when it has not, so without this a `tools/list`
    answered 503 after the call ran would look like a failed call."""

    url: str
    headers: dict[str, str]
    status: list[int] = field(default_factory=list)
    bodies: list[str] = field(default_factory=list)
    """The content type of each answer of 500 or more (a worker's JSON, or the proxy's own page)."""

    async def bash(self, script: str, shell: str | None = None) -> Any:
        """The `bash` result, or `Retryable` for: a connection refused or reset, a 502/503/504 from
        the proxy, or a result whose error line says `"retryable": true` (`stopped` and
        `unavailable` after a worker stopped)."""
        self.status.clear()

        async def seen(response: httpx2.Response) -> None:
            self.status.append(response.status_code)
            if response.status_code >= 500:
                self.bodies.append(response.headers.get("content-type", ""))

        timeout = httpx2.Timeout(30, read=90)
        http = httpx2.AsyncClient(headers=self.headers, verify=False, timeout=timeout, event_hooks={"response": [seen]})
        called = False
        try:
            async with http, Client(streamable_http_client(self.url, http_client=http)) as c:
                await c.list_tools()  # the output schema, before the call
                self.status.clear()
                called = True
                result = await c.call_tool("bash", {"script": script} | ({"shell": shell} if shell else {}))
        except Exception as exc:  # the SDK raises a group from its task group: look inside
            said = f"{'the call' if called else 'before the call'}: {self.status} "
            said += "; ".join(repr(leaf) for leaf in _leaves(exc))
            if not called or _transport_failure(exc) or (_mcp_error(exc) and RETRY_STATUSES & set(self.status)):
                raise Retryable(said) from exc
            raise
        if result.is_error and _retryable_result(result):
            raise Retryable(result.content[0].text)
        return result


async def with_retries(call: Callable[[], Any], retried: list[str], attempts: int = 30) -> Any:
    """`call()` until it returns, again after each `Retryable` (at most `attempts` times)."""
    for _ in range(attempts):
        try:
            return await call()
        except Retryable as why:
            retried.append(str(why)[:200])
            await anyio.sleep(1)  # what the draining worker's Retry-After asks
    raise AssertionError(f"still failing after {attempts} attempts: {retried[-3:]}")


async def whole(caller: Caller, script: str, retried: list[str]) -> dict[str, Any]:
    """The `bash` result of `script` as an object, its output collected whole: a call a draining
    worker answered at once (`running: true`) is collected by calling again on its shell."""
    result = await with_retries(lambda: caller.bash(script), retried)
    assert not result.is_error, result
    body: dict[str, Any] = dict(result.structured_content or {})
    stdout, shell = body["stdout"], body["shell"]
    while body.get("running") or body.get("earlier", {}).get("running"):
        again = await with_retries(lambda: caller.bash("true", shell), retried)
        body = dict(again.structured_content or {})
        stdout += body.get("earlier", {}).get("stdout", "")
    if "earlier" in body:  # its end came with a later call
        return {**body["earlier"], "stdout": stdout}
    return body


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc, *([exc.__cause__] if exc.__cause__ else [])]


def _transport_failure(exc: BaseException) -> bool:
    return any(isinstance(leaf, httpx2.TransportError | ConnectionError) for leaf in _leaves(exc))


def _mcp_error(exc: BaseException) -> bool:
    return any(isinstance(leaf, MCPError) for leaf in _leaves(exc))


def _retryable_result(result: Any) -> bool:
    try:
        error = json.loads(result.content[0].text).get("error") or {}
    except (ValueError, AttributeError, IndexError):
        return False
    return error.get("retryable") is True
