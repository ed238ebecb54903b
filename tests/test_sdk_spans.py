"""The SDK's per-request OpenTelemetry span costs nothing while no OpenTelemetry SDK records
spans, and works as before once one does (issue 31): `connections.sdk_spans`."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.client import Client
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.mcpserver import MCPServer
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from toolshell.config import Config
from toolshell.connections import sdk_spans
from toolshell.connections.sdk_spans import SpansWhenRecorded, lean_spans
from toolshell.host import Host

pytestmark = pytest.mark.anyio


class _Counting(OpenTelemetryMiddleware):
    """The SDK's middleware, counting the requests it wraps in a span."""

    def __init__(self) -> None:
        self.spans = 0

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        self.spans += 1
        return await super().__call__(ctx, call_next)


def _server() -> tuple[MCPServer, _Counting]:
    server = MCPServer("echo")

    @server.tool()
    def echo(text: str) -> str:
        return text

    counting = _Counting()
    chain = server._lowlevel_server.middleware
    chain[:] = [counting if isinstance(m, OpenTelemetryMiddleware) else m for m in chain]
    return server, counting


async def test_no_span_is_opened_while_nothing_records_spans() -> None:
    server, counting = _server()
    async with Client(lean_spans(server)) as client:
        assert (await client.call_tool("echo", {"text": "hi"})).content[0].text == "hi"  # type: ignore[union-attr]
    assert not sdk_spans.recording()
    assert counting.spans == 0


async def test_each_request_gets_its_span_once_an_sdk_provider_records(monkeypatch: pytest.MonkeyPatch) -> None:
    server, counting = _server()
    monkeypatch.setattr(sdk_spans.trace, "_TRACER_PROVIDER", TracerProvider())  # what `set_tracer_provider` sets
    async with Client(lean_spans(server)) as client:
        await client.call_tool("echo", {"text": "hi"})
    assert counting.spans >= 1


async def test_the_built_in_servers_toolshell_connects_in_process_get_the_lean_middleware() -> None:
    server, counting = _server()
    config = Config.model_validate({"approval": {"mode": "off"}})
    async with Host.open(config, servers={"echo": server}) as host:
        result = await host.run("tools echo echo text=hi")
    assert (result.exit_code, result.stdout) == (0, "hi\n")
    assert counting.spans == 0
    assert any(isinstance(m, SpansWhenRecorded) for m in server._lowlevel_server.middleware)
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
