"""One `tools/list` page is cut to `max_tools` before the SDK builds models of it (stdio and
Streamable HTTP), the count the server offered is kept for `toolshell servers`, and a server
cannot forge that count. Peak memory is measured by `benchmarks/big_list.py`, not here."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.server import Server

from _connections_support import serve_http
from toolshell.config import Config, ServerConfig
from toolshell.connections.base import SessionContext
from toolshell.connections.bounded_http import Dropped, bound_client, cut_event, cut_json
from toolshell.connections.bounded_stdio import Noise, bounded_stdio_client
from toolshell.connections.factory import make_connection
from toolshell.connections.list_cut import CUT_KEY, SMALL, cut_listing, offered
from toolshell.frontends.diagnostics import render_servers
from toolshell.host import Host

HOSTILE = str(Path(__file__).parent / "servers" / "hostile_server.py")
OFFERED = 100_005
"""`hostile_server.py many=100000`: its 5 fixed tools, then `t5` … `t99999`, in one page."""
CUT_NOTE = (
    "it lists more tools than max_tools = 2,000: the first 2,000 are kept, 98,005 more were dropped; "
    "raise max_tools for this server in the config to keep more"
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _hostile(**server: Any) -> Config:
    entry = {"name": "evil", "command": sys.executable, "args": [HOSTILE, "many=100000"], "timeout_seconds": 120}
    return Config.model_validate(
        {"mcp": {"servers": [{**entry, **server}]}, "approval": {"mode": "off"}, "include_builtins": False}
    )


@pytest.mark.anyio
async def test_a_page_of_100000_tools_reaches_the_sdk_cut_to_max_tools_with_the_count_offered() -> None:
    params = StdioServerParameters(command=sys.executable, args=[HOSTILE, "many=100000"])
    with open(os.devnull, "w") as errlog:  # noqa: ASYNC230 - opening /dev/null does not block
        transport = bounded_stdio_client(
            params, errlog, max_message_bytes=32 * 1024 * 1024, noise=Noise(), max_tools=2000
        )
        async with Client(transport) as client:
            with anyio.fail_after(120):
                page = await client.list_tools()
    assert [t.name for t in page.tools[4:7]] == ["clear", "t5", "t6"]
    assert (len(page.tools), page.tools[-1].name, offered(page.meta)) == (2000, "t1999", OFFERED)


@pytest.mark.anyio
async def test_a_server_offering_100000_tools_in_one_page_keeps_max_tools_and_servers_says_how_many_were_offered() -> (
    None
):
    async with Host.open(_hostile(max_tools=2000)) as host:
        session = host.session()
        kept = await session.run("tools evil t1999")
        dropped = await session.run("tools evil t2000")
        status = next(s.to_json() for s in host.statuses() if s.name == "evil")
    assert (kept.exit_code, kept.stdout) == (0, "called t1999\n")
    assert json.loads(dropped.stderr)["error"]["code"] == "unknown_command"
    assert (status["tool_count"], status["notes"]) == (2000, [CUT_NOTE])
    assert f"    note: {CUT_NOTE}" in render_servers([status])


def _page(tools: int, meta: dict[str, Any] | None = None) -> str:
    listed = [{"name": f"t{i}", "inputSchema": {"type": "object"}, "description": "x" * 40} for i in range(tools)]
    result: dict[str, Any] = {"tools": listed, **({"_meta": meta} if meta else {})}
    return json.dumps({"jsonrpc": "2.0", "result": result, "id": 7})


def test_a_count_the_server_writes_itself_is_not_believed() -> None:
    forged = {CUT_KEY: {"offered": 999_999, "seal": "guessed"}}
    within = _page(1000, forged)
    cut = cut_listing(_page(2000, forged), keep=10)
    assert len(within) > SMALL and cut_listing(within, keep=1000) is None, "nothing to cut: decoded as usual"
    assert offered(json.loads(within)["result"]["_meta"]) is None
    assert cut is not None and len(cut["result"]["tools"]) == 10 and cut["id"] == 7
    assert offered(cut["result"]["_meta"]) == 2000, "a cut page's count is ours, the forged one replaced"


def test_a_page_written_with_whitespace_between_its_tokens_is_cut_the_same() -> None:
    pretty = json.dumps(json.loads(_page(2000)), indent="\t\n ")
    cut = cut_listing(pretty, keep=10)
    assert cut is not None and [t["name"] for t in cut["result"]["tools"]] == [f"t{i}" for i in range(10)]
    assert (cut["id"], offered(cut["result"]["_meta"])) == (7, 2000)


def test_what_is_not_a_listing_answer_is_left_to_the_usual_decoding() -> None:
    big = "x" * SMALL
    others = [
        json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": big}]}}),
        json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": big}}),
        _page(2000)[:-1],  # cut short: not JSON
        _page(2000) + " []",
    ]
    assert [cut_listing(text, keep=10) for text in others] == [None, None, None, None]


def _many_tools_server(count: int) -> Server[Any]:
    tools = [types.Tool(name=f"t{i}", description="x" * 40, input_schema={"type": "object"}) for i in range(count)]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    return Server("web", on_list_tools=list_tools)


@pytest.mark.anyio
@pytest.mark.parametrize("json_response", [False, True], ids=["sse", "json"])
async def test_an_http_listing_reaches_the_sdk_cut_to_max_tools_and_the_connection_notes_the_rest(
    json_response: bool,
) -> None:
    app = _many_tools_server(3000).streamable_http_app(json_response=json_response)
    async with serve_http(app) as url:
        http = httpx2.AsyncClient()
        bound_client(http, 32 * 1024 * 1024, Dropped(), max_tools=100)
        legacy = "legacy" if not json_response else "auto"  # the older handshake answers on an event stream
        async with http, Client(streamable_http_client(url, http_client=http), mode=legacy) as client:
            with anyio.fail_after(60):
                page = await client.list_tools()
        version = {} if json_response else {"protocol": "2025-11-25"}
        conn = make_connection(ServerConfig(name="web", type="http", url=url, max_tools=100, **version))
        try:
            with anyio.fail_after(60):
                listed = await conn.list_tools(SessionContext())
            notes = conn.status().notes
        finally:
            await conn.close()
    assert (len(page.tools), page.tools[-1].name, offered(page.meta)) == (100, "t99", 3000)
    assert len(listed) == 100 and "the first 100 are kept, 2,900 more were dropped" in notes[0]


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    "text",
    [
        _page(2000)[:-1] + ', "result": 5}',  # a second `result` replaces the one counted
        _page(2000)[:-1] + ', "result": [1]}',
        _page(2000).replace("]}", f", {DEEP}]}}", 1),  # past the decoder's depth, in a dropped entry
        json.dumps({"jsonrpc": "2.0", "id": 7, "result": {"x": None, "tools": []}}).replace("null", DEEP),
        json.dumps({"jsonrpc": "2.0", "method": "x", "params": None}).replace("null", DEEP),
    ],
)
def test_a_hostile_listing_is_left_to_the_usual_decoding_without_raising(text: str) -> None:
    assert len(text) >= SMALL
    assert cut_listing(text, keep=10) is None
    assert cut_json(text.encode(), 7, 10) == text.encode()
    event = b"event: message\ndata: " + text.encode() + b"\n\n"
    assert cut_event(event, 7, 10) == event


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["nestedlist", "resulttwice"])
async def test_a_listing_answer_the_cut_cannot_read_is_skipped_as_noise_and_the_connection_says_so(mode: str) -> None:
    config = _hostile(max_tools=2000, timeout_seconds=5, args=[HOSTILE, "many=3000", mode])
    async with Host.open(config) as host:
        listed = await host.session().run("tools evil t1")
        status = next(s.to_json() for s in host.statuses() if s.name == "evil")
    assert json.loads(listed.stderr)["error"]["code"] == "unavailable"
    assert status["notes"] == ["skipped stdout lines: 1 not JSON-RPC"], "the reader read on past the answer"


def test_a_seal_that_is_not_ascii_text_is_refused_without_raising() -> None:
    cut = cut_listing(_page(2000), keep=10)
    assert cut is not None
    seal = cut["result"]["_meta"][CUT_KEY]["seal"]
    assert offered({CUT_KEY: {"offered": 5, "seal": seal}}) == 5
    assert offered({CUT_KEY: {"offered": 5, "seal": "é" * len(seal)}}) is None
    assert offered({CUT_KEY: {"offered": 5, "seal": 12}}) is None
