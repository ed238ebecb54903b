"""Resumable streams of `toolshell serve --http`: SSE event ids, `Last-Event-ID`, one log per session."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http import EventMessage

from _net_support import free_port, wait_until_serving
from toolshell.frontends.serve.auth import NO_AUTH
from toolshell.frontends.serve.event_store import (
    EVENT_STORES,
    EventLog,
    MemoryEventStore,
    SessionEvents,
    open_event_log,
)
from toolshell.frontends.serve.server import _serve_http, build_server
from toolshell.host import Host
from toolshell.store import Store
from toolshell.store.event_log import StateEventStore, StoredEvent

pytestmark = pytest.mark.anyio

PROTOCOL = "2025-11-25"  # the first version whose clients get priming events and may resume
HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": PROTOCOL,
}
SCRIPT = "tools gate wait; for i in $(seq 1 300); do echo line $i; done"
WHOLE_STDOUT = "opened\n" + "".join(f"line {i}\n" for i in range(1, 301))


def _gate(opened: anyio.Event) -> MCPServer:
    """A server whose one tool answers only once the test opens the gate."""
    server = MCPServer("gate", log_level="WARNING")

    async def wait() -> str:
        await opened.wait()
        return "opened"

    server.add_tool(
        wait, name="wait", description="Wait for the gate.", annotations=types.ToolAnnotations(readOnlyHint=True)
    )
    return server


class Watched:
    """An event log that tells the test when a `bash` response has been stored."""

    def __init__(self, log: EventLog | None = None) -> None:
        self.log = log or MemoryEventStore()
        self.responded = anyio.Event()

    def append(self, stream: str, body: str | None) -> str:
        event_id = self.log.append(stream, body)
        if body and '"result"' in body and "exit_code" in body:
            self.responded.set()
        return event_id

    def stream_of(self, event_id: str) -> str | None:
        return self.log.stream_of(event_id)

    def after(self, event_id: str, stream: str) -> list[StoredEvent]:
        return self.log.after(event_id, stream)


async def _events(response: httpx2.Response) -> AsyncIterator[tuple[str, dict[str, Any] | None]]:
    async for sse in httpx2.EventSource(response):
        yield sse.id or "", json.loads(sse.data) if sse.data else None


async def _open_session(http: httpx2.AsyncClient, url: str) -> str:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    async with http.stream("POST", url, json=init, headers=HEADERS) as response:
        session = response.headers["mcp-session-id"]
        async for _, message in _events(response):
            if message is not None:
                break
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    await http.post(url, json=done, headers={**HEADERS, "mcp-session-id": session})
    return session


async def _call_and_drop(http: httpx2.AsyncClient, url: str, session: str) -> str:
    """Call `bash`, read the priming event's id and drop the connection before the result."""
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "bash", "arguments": {"script": SCRIPT}},
    }
    async with http.stream("POST", url, json=call, headers={**HEADERS, "mcp-session-id": session}) as response:
        async for event_id, message in _events(response):
            assert message is None, "the first event of a resumable stream is the priming event"
            return event_id
    raise AssertionError("the POST stream ended without a priming event")


async def _resume(http: httpx2.AsyncClient, url: str, session: str, last_event_id: str) -> dict[str, Any] | None:
    """GET with `Last-Event-ID`: the `bash` response replayed, or None when the stream ends without it."""
    headers = {**HEADERS, "mcp-session-id": session, "Last-Event-ID": last_event_id}
    async with http.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200
        async for _, message in _events(response):
            if message is not None and message.get("id") == 2:
                return message
    return None


@pytest.mark.parametrize("kind", EVENT_STORES)
async def test_a_dropped_bash_stream_resumed_with_last_event_id_delivers_the_whole_result(kind: str, tmp_path) -> None:
    opened, port = anyio.Event(), free_port()
    log = Watched(open_event_log(kind, Store(tmp_path / "state.db")))
    url = f"http://127.0.0.1:{port}/mcp"
    with anyio.fail_after(30):
        async with Host.open(servers={"gate": _gate(opened)}) as host, anyio.create_task_group() as tg:
            tg.start_soon(_serve_http, build_server(host, []), "127.0.0.1", port, NO_AUTH, log)
            async with httpx2.AsyncClient(timeout=20) as http:
                await wait_until_serving(url)
                session = await _open_session(http, url)
                priming = await _call_and_drop(http, url, session)
                opened.set()  # the script finishes while no client is connected
                await log.responded.wait()
                message = await _resume(http, url, session, priming)
            tg.cancel_scope.cancel()
    assert message is not None
    result = types.CallToolResult.model_validate(message["result"])
    body = result.structured_content  # type: ignore[union-attr]
    assert body == {"exit_code": 0, "success": True, "stdout": WHOLE_STDOUT, "stderr": "", "shell": body["shell"]}


async def test_another_sessions_last_event_id_replays_nothing() -> None:
    opened, log, port = anyio.Event(), Watched(), free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with anyio.fail_after(30):
        async with Host.open(servers={"gate": _gate(opened)}) as host, anyio.create_task_group() as tg:
            tg.start_soon(_serve_http, build_server(host, []), "127.0.0.1", port, NO_AUTH, log)
            async with httpx2.AsyncClient(timeout=20) as http:
                await wait_until_serving(url)
                owner, other = await _open_session(http, url), await _open_session(http, url)
                priming = await _call_and_drop(http, url, owner)
                opened.set()
                await log.responded.wait()
                stolen = await _resume(http, url, other, priming)
                own = await _resume(http, url, owner, priming)
            tg.cancel_scope.cancel()
    assert stolen is None
    assert own is not None and "line 300" in json.dumps(own)


def _message(request_id: int, text: str) -> types.JSONRPCResponse:
    return types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result={"text": text})


async def _replayed(view: SessionEvents, last_event_id: str) -> tuple[str | None, list[Any]]:
    got: list[EventMessage] = []

    async def collect(event: EventMessage) -> None:
        got.append(event)

    stream = await view.replay_events_after(last_event_id, collect)
    return stream, [e.message.result for e in got]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "make_log", [MemoryEventStore, lambda: StateEventStore(Store(":memory:"))], ids=["memory", "state"]
)
async def test_sessions_that_number_requests_alike_each_replay_only_their_own_events(make_log: Any) -> None:
    log: EventLog = make_log()
    alice, bob = SessionEvents(log, "alice"), SessionEvents(log, "bob")
    a0 = await alice.store_event("2", None)
    b0 = await bob.store_event("2", None)
    await alice.store_event("2", _message(2, "for alice"))
    await bob.store_event("2", _message(2, "for bob"))
    assert await _replayed(alice, a0) == ("2", [{"text": "for alice"}])
    assert await _replayed(bob, b0) == ("2", [{"text": "for bob"}])
    assert await _replayed(bob, a0) == (None, [])
    assert await _replayed(alice, "not-an-id") == (None, [])


@pytest.mark.parametrize(
    "make_log", [MemoryEventStore, lambda **kw: StateEventStore(Store(":memory:"), **kw)], ids=["memory", "state"]
)
async def test_the_log_keeps_the_newest_events_within_its_event_and_byte_bounds(make_log: Any) -> None:
    by_count = make_log(max_events=3, max_bytes=10_000)
    ids = [by_count.append("s", f'"{n}"') for n in range(5)]
    assert len(by_count) == 3
    assert by_count.stream_of(ids[1]) is None and by_count.stream_of(ids[2]) == "s"
    assert [e.body for e in by_count.after(ids[2], "s")] == ['"3"', '"4"']

    by_bytes = make_log(max_events=100, max_bytes=25)
    for n in range(6):
        by_bytes.append("s", "x" * 10 + str(n))  # 11 bytes each: two fit
    assert len(by_bytes) == 2 and by_bytes.bytes == 22
    huge = by_bytes.append("s", "y" * 100)  # the newest event stays even when it alone is too big
    assert len(by_bytes) == 1 and by_bytes.stream_of(huge) == "s"


def test_an_unknown_event_store_kind_names_the_ones_there_are() -> None:
    with pytest.raises(ValueError, match="'redis' is not one of memory, state"):
        open_event_log("redis", Store(":memory:"))
