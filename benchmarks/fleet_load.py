"""The load generator of `fleet.py`: raw JSON-RPC over HTTP/1.1, in processes of its own.

No MCP SDK client here: it costs more CPU a call than the server it would measure. Each session
holds one keep-alive connection to each worker and sends its calls round-robin across them, one
at a time (a shell's calls are ordered). The wire is MCP Streamable HTTP:

- `2026-07-28` (the default): each request is self-contained, its `params._meta` carrying the
  protocol version and client capabilities, and the `MCP-Protocol-Version`, `Mcp-Method` and
  `Mcp-Name` headers the server checks against the body;
- an earlier version (`2025-11-25`): `initialize` and `notifications/initialized` on each worker,
  then each `tools/call` with that worker's `Mcp-Session-Id`.

A response is JSON (`Content-Length`) or an event stream (chunked); both are read. Each session's
shell is kept by handle (`shell`), and every answer is checked: the script appends a line to
`log` and prints `wc -l < log`, which must equal the session's calls so far, else the shell lost
state; the nested `tools text-metrics text-length text=x$i` must print `len("x$i")`.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

MODERN = "2026-07-28"
SCRIPT = "echo {i} >> log; tools text-metrics text-length text=x{i}; wc -l < log"
CALL_TIMEOUT = 120.0


class CallFailed(Exception):
    """A call that got no usable answer: the HTTP status, a JSON-RPC error, or a tool error."""


@dataclass
class Plan:
    """What one load process runs, sent to it by the parent."""

    urls: list[str]
    token: str
    sessions: list[int]  # the global numbers of this process's sessions
    total_sessions: int
    protocol: str
    rate: float | None  # calls a second over all sessions; None: closed loop
    start: float = 0.0  # time.monotonic() of the warm-up's start (CLOCK_MONOTONIC: one clock for all)
    warmup: float = 0.0
    seconds: float = 0.0


@dataclass
class Tally:
    """What one load process saw in the measured window (and the errors anywhere)."""

    latencies_ms: list[float] = field(default_factory=list)
    calls: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    error_examples: list[str] = field(default_factory=list)
    lost: list[dict[str, Any]] = field(default_factory=list)
    checked_calls: int = 0
    cpu_s: float = 0.0

    def error(self, kind: str, text: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1
        if len(self.error_examples) < 5:
            self.error_examples.append(f"{kind}: {text[:300]}")


class ClosedIdle(ConnectionError):
    """The connection closed before a byte of the answer: the request was not read."""


class Connection:
    """One keep-alive HTTP/1.1 connection to one worker's `/mcp`."""

    def __init__(self, url: str, token: str) -> None:
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path
        self.token = token
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.session_id: str | None = None

    async def post(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        reused = self.writer is not None and not self.writer.is_closing()
        try:
            return await self._post(body, headers)
        except ClosedIdle:
            if not reused:
                raise ConnectionError("the worker closed the connection") from None
            # The worker closed a keep-alive connection that sat idle past its timeout before it read
            # the request (no byte of an answer came back): send it again on a new connection, as
            # HTTP clients do. Were it run twice after all, the session's line count would say so.
            return await self._post(body, headers)

    async def _post(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        if self.writer is None or self.writer.is_closing():
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        data = json.dumps(body, separators=(",", ":")).encode()
        head = [
            f"POST {self.path} HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            f"Authorization: Bearer {self.token}",
            "Content-Type: application/json",
            "Accept: application/json, text/event-stream",
            f"Content-Length: {len(data)}",
            *(f"{k}: {v}" for k, v in headers.items()),
        ]
        if self.session_id:
            head.append(f"Mcp-Session-Id: {self.session_id}")
        self.writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)
        try:
            return await _read_response(self.reader)
        except BaseException:
            self.close()  # a half-read response: the connection cannot be reused
            raise

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    status_line = await reader.readline()
    if not status_line:
        raise ClosedIdle("the worker closed the connection before answering")
    status = int(status_line.split()[1])
    headers: dict[str, str] = {}
    while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        chunks = []
        while size := int((await reader.readline()).split(b";")[0], 16):
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
        await reader.readline()  # the empty trailer
        body = b"".join(chunks)
    else:
        body = b""
    return status, headers, body


def parse_answer(status: int, headers: dict[str, str], body: bytes, request_id: int) -> dict[str, Any]:
    """The JSON-RPC result of `request_id` in a JSON or event-stream body, else CallFailed."""
    if status != 200:
        raise CallFailed(f"HTTP {status}: {body[:200]!r}")
    messages: list[Any] = []
    if headers.get("content-type", "").startswith("text/event-stream"):
        lines = body.decode().splitlines()
        messages.extend(json.loads(line[5:]) for line in lines if line.startswith("data:") and line[5:].strip())
    else:
        messages.append(json.loads(body))
    for message in messages:
        if isinstance(message, dict) and message.get("id") == request_id:
            if "error" in message:
                raise CallFailed(f"JSON-RPC error {json.dumps(message['error'])[:300]}")
            return dict(message["result"])
    raise CallFailed(f"no answer to request {request_id} in {body[:200]!r}")


class Session:
    """One agent: a shell kept by handle, its calls spread over the workers in turn."""

    def __init__(self, number: int, plan: Plan) -> None:
        self.number, self.plan = number, plan
        self.conns = [Connection(u, plan.token) for u in plan.urls]
        self.handle: str | None = None
        self.done = 0  # lines the shell's log must hold
        self.known = True  # False after an error: the next answer resets the count
        self.next_id = 1

    def _meta(self) -> dict[str, Any]:
        if self.plan.protocol != MODERN:
            return {}
        return {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "fleet-load", "version": "1"},
            }
        }

    async def _rpc(self, conn: Connection, method: str, params: dict[str, Any], notify: bool = False) -> Any:
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": {**params, **self._meta()}}
        headers = {"MCP-Protocol-Version": self.plan.protocol}
        if self.plan.protocol == MODERN:
            headers["Mcp-Method"] = method
            if method == "tools/call":
                headers["Mcp-Name"] = params["name"]
        if notify:
            status, _, answer = await conn.post(body, headers)
            if status not in (200, 202):
                raise CallFailed(f"HTTP {status} to {method}: {answer[:200]!r}")
            return None
        body["id"] = request_id = self.next_id
        self.next_id += 1
        status, got, answer = await conn.post(body, headers)
        if method == "initialize" and "mcp-session-id" in got:
            conn.session_id = got["mcp-session-id"]
        return parse_answer(status, got, answer, request_id)

    async def open(self) -> None:
        """The handshake on every worker (earlier protocol versions), then the first call: the shell."""
        if self.plan.protocol != MODERN:
            for conn in self.conns:
                params = {
                    "protocolVersion": self.plan.protocol,
                    "capabilities": {},
                    "clientInfo": {"name": "fleet-load", "version": "1"},
                }
                await self._rpc(conn, "initialize", params)
                await self._rpc(conn, "notifications/initialized", {}, notify=True)
        await self.call()

    async def call(self) -> None:
        """One `bash` call on the next worker; checks the shell kept every line."""
        i = self.done + 1
        conn = self.conns[(self.number + i) % len(self.conns)]
        args: dict[str, Any] = {"script": SCRIPT.format(i=i)}
        if self.handle:
            args["shell"] = self.handle
        result = await asyncio.wait_for(
            self._rpc(conn, "tools/call", {"name": "bash", "arguments": args}), CALL_TIMEOUT
        )
        out = result.get("structuredContent") or json.loads(result["content"][0]["text"])
        if result.get("isError") or out.get("exit_code") != 0:
            raise CallFailed(f"tool error: {json.dumps(out)[:300]}")
        self.handle = out["shell"]
        lines = out["stdout"].split()
        if len(lines) != 2 or lines[0] != str(len(f"x{i}")):
            raise CallFailed(f"unexpected output {out['stdout']!r}")
        got = int(lines[1])
        if self.known and got != i:
            self.done = got
            raise LostState(self.number, i, got)
        self.done, self.known = got, True

    def close(self) -> None:
        for conn in self.conns:
            conn.close()


class LostState(Exception):
    def __init__(self, session: int, expected: int, got: int) -> None:
        super().__init__(f"session {session}: the log has {got} lines after call {expected}")
        self.record = {"session": session, "expected": expected, "got": got}


async def _drive(session: Session, plan: Plan, tally: Tally) -> None:
    """The session's calls from the warm-up's start to the window's end, timed from when each was due."""
    measure_from, stop = plan.start + plan.warmup, plan.start + plan.warmup + plan.seconds
    interval = plan.total_sessions / plan.rate if plan.rate else 0.0
    due = plan.start + (session.number / plan.total_sessions) * interval  # sessions' phases spread evenly
    await asyncio.sleep(max(0.0, plan.start - time.monotonic()))
    while (now := time.monotonic()) < stop:
        if interval:
            if due > now:
                await asyncio.sleep(due - now)
                if due >= stop:
                    break
        else:
            due = now
        try:
            await session.call()
            ok = True
        except LostState as lost:
            tally.lost.append(lost.record)
            ok = True
        except (CallFailed, OSError, TimeoutError, asyncio.IncompleteReadError, ValueError, KeyError) as err:
            tally.error(type(err).__name__, str(err))
            session.known, ok = False, False
        ended = time.monotonic()
        if measure_from <= ended < stop:
            tally.calls += 1
            tally.checked_calls += ok and session.known
            if ok:
                tally.latencies_ms.append((ended - due) * 1000)
        due += interval


async def _run(plan: Plan, ready: Any, go: Any) -> Tally:
    tally = Tally()
    sessions = [Session(n, plan) for n in plan.sessions]
    await asyncio.gather(*(s.open() for s in sessions))
    ready.send(True)
    start, warmup, seconds = await asyncio.get_running_loop().run_in_executor(None, go.recv)
    plan.start, plan.warmup, plan.seconds = start, warmup, seconds

    async def cpu_window() -> None:
        await asyncio.sleep(max(0.0, start + warmup - time.monotonic()))
        before = time.process_time()
        await asyncio.sleep(max(0.0, start + warmup + seconds - time.monotonic()))
        tally.cpu_s = time.process_time() - before

    await asyncio.gather(cpu_window(), *(_drive(s, plan, tally) for s in sessions))
    for s in sessions:
        s.close()
    return tally


def load_process(plan: Plan, conn: Any) -> None:
    """A load process's body (multiprocessing): open the sessions, say ready, run when told, report."""
    try:
        tally = asyncio.run(_run(plan, conn, conn))
        conn.send(tally)
    except BaseException as err:  # the parent reports it; a traceback here would interleave with others
        conn.send(RuntimeError(f"load process failed: {type(err).__name__}: {err}"))


def percentile(samples: list[float], q: float) -> float | None:
    """The `q` quantile (0–1) of `samples`, nearest rank; None when there are none."""
    if not samples:
        return None
    ordered = sorted(samples)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]
