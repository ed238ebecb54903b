"""`max_message_bytes` on Streamable HTTP servers: an oversized answer fails its call, the next works."""

from __future__ import annotations

import re

import anyio
import pytest
from mcp.server.mcpserver import MCPServer

from _connections_support import serve_http
from toolshell.config import ServerConfig
from toolshell.connections.base import CallOptions
from toolshell.connections.factory import make_connection
from toolshell.errors import ToolshellError

ANY = CallOptions()
BOUND = 64 * 1024
TOO_BIG = (
    f"over max_message_bytes = {BOUND:,}; ask for less (a smaller page, a filter) "
    "or raise max_message_bytes for this server"
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def big_server() -> MCPServer:
    server = MCPServer("web", log_level="WARNING")

    @server.tool()
    async def blob(size: int) -> str:
        return "x" * size

    return server


def config(url: str) -> ServerConfig:
    return ServerConfig(name="web", type="http", url=url, max_message_bytes=BOUND)


@pytest.mark.anyio
@pytest.mark.parametrize("json_response", [False, True], ids=["sse", "json"])
async def test_an_answer_over_max_message_bytes_fails_that_call_and_the_next_call_works(json_response: bool) -> None:
    async with serve_http(big_server().streamable_http_app(json_response=json_response)) as url:
        conn = make_connection(config(url))
        try:
            with anyio.fail_after(30), pytest.raises(ToolshellError) as caught:
                await conn.call_tool("blob", {"size": 1_000_000}, ANY)
            with anyio.fail_after(30):
                small = await conn.call_tool("blob", {"size": 10}, ANY)
        finally:
            await conn.close()
    error = caught.value.to_json()["error"]
    assert error["code"] == "tool_error"
    assert error["message"].startswith("server 'web' failed while ")
    assert TOO_BIG in error["message"]
    assert small.content[0].text == "x" * 10


@pytest.mark.anyio
async def test_a_json_answer_whose_content_length_is_over_the_bound_is_refused_with_its_size() -> None:
    async with serve_http(big_server().streamable_http_app(json_response=True)) as url:
        conn = make_connection(config(url))
        try:
            with anyio.fail_after(30), pytest.raises(ToolshellError) as caught:
                await conn.call_tool("blob", {"size": 1_000_000}, ANY)
        finally:
            await conn.close()
    said = re.search(r"its answer was ([\d,]+) bytes, over", caught.value.to_json()["error"]["message"])
    assert said is not None and int(said.group(1).replace(",", "")) > 1_000_000
