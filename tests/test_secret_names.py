"""A secret a server sends as a name, an enum value, a title, its `serverInfo` or `instructions`,
or one a script writes as a command, leaves through no channel (issue 30 §5): not the `bash`
description a real SDK client lists, not a `keep_visible` tool, not a span's name, attribute or
status, not an OTLP metric point, not a Prometheus label. A call that names no tool is counted
under one fixed label, whatever the script wrote."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Annotated, Any, Literal

import httpx2
import pytest
from mcp.client import Client
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from prometheus_client.parser import text_string_to_metric_families
from pydantic import Field

from _net_support import free_port
from _otlp_support import otlp_receiver
from toolshell.config import load_text
from toolshell.frontends.llm import tool_definitions
from toolshell.frontends.serve.server import build_server
from toolshell.host import Host
from toolshell.telemetry.metrics import UNRESOLVED

pytestmark = pytest.mark.anyio
SECRET = "sk_live_9f8e7d6c5b4a3928"
"""Configured as a secret; its `_` become `-` where a name is shown as scripts write it."""
HYPHENED = SECRET.replace("_", "-")


def _leaky() -> MCPServer:
    """A server that puts the secret everywhere it can name something."""
    server = MCPServer(
        f"leaky {SECRET}", title=f"Leaky {SECRET}", instructions=f"Always pass {SECRET}.", version=SECRET
    )

    async def named(mode: Annotated[Literal["plain", SECRET], Field(description=f"plain or {SECRET}")]) -> str:
        return f"mode {mode}"

    async def lookup(kind: Literal["a", SECRET] = "a") -> str:
        return f"kind {kind}"

    server.add_tool(
        named,
        name=f"get_{SECRET}",
        title=f"Get {SECRET}",
        description=f"Reads {SECRET}.",
        annotations=ToolAnnotations(destructiveHint=True),
    )
    server.add_tool(lookup, name="lookup", title=f"Lookup {SECRET}", description=f"Looks {SECRET} up.")
    return server


def _config(endpoint: str, port: int) -> Any:
    text = textwrap.dedent(
        f"""
        secret_env = ["LEAKY_KEY"]

        [telemetry]
        enabled = true
        endpoint = "{endpoint}"
        prometheus_port = {port}

        [tools_in_shell]
        keep_visible = ["mcp_leaky__lookup"]

        [[mcp.servers]]
        name = "leaky"
        type = "builtin"
        """
    )
    return load_text(text, env={"LEAKY_KEY": SECRET})


def _leaks(text: str) -> list[str]:
    """The forms of the secret found in `text`: whole, as a script writes a name, or its first half."""
    return [form for form in (SECRET, HYPHENED, SECRET[:12], HYPHENED[:12]) if form in text]


async def test_a_secret_a_server_sends_as_names_enums_titles_and_info_leaves_through_no_channel(
    tmp_path: Path,
) -> None:
    port = free_port()
    with otlp_receiver() as receiver:
        async with Host.open(_config(receiver.url, port), servers={"leaky": _leaky()}, state_dir=tmp_path) as host:
            assert host.metrics is not None
            scrape_url = host.metrics.serve_prometheus("127.0.0.1", port)

            async def yes(entry: Any, arguments: Any, risk: Any) -> str:
                return "once"

            async with Client(build_server(host, host_visible := await host.visible_tools())) as client:
                listed = await client.list_tools()
                called = await client.call_tool("bash", {"script": "tools leaky --help; tools leaky lookup kind=a"})
            session = host.session()
            ran = await session.run(f"tools leaky get-{HYPHENED} mode={SECRET}", approver=yes)
            session.close()
            definitions = await tool_definitions(host)
            async with httpx2.AsyncClient(timeout=30) as http:
                scraped = (await http.get(scrape_url)).text
        spans = [[s.name, s.attributes, s.status_message, s.events] for s in receiver.spans]
        points = [[p.metric, p.attributes] for p in receiver.points]
    assert [e.name for e in host_visible] == ["lookup"]
    assert not called.is_error and ran.exit_code == 0 and ran.stdout == "mode ***\n"
    [bash, lookup] = listed.tools
    assert "get-***" in (bash.description or "") and "leaky (2 tools)" in (bash.description or "")
    assert lookup.name == "mcp_leaky__lookup" and lookup.title == "Lookup ***"
    assert lookup.input_schema["properties"]["kind"]["enum"] == ["a", "***"]
    assert "tools/call get_***" in [s[0] for s in spans], "the span names the tool, masked"
    assert any(p[1].get("gen_ai.tool.name") == "get_***" for p in points), "so does the metric label"
    assert 'gen_ai_tool_name="get_***"' in scraped
    channels = {
        "tools/list": listed.model_dump_json(),
        "llm tool definitions": json.dumps(definitions),
        "spans": json.dumps(spans, default=str),
        "otlp metrics": json.dumps(points),
        "prometheus": scraped,
    }
    assert {name: _leaks(text) for name, text in channels.items()} == {name: [] for name in channels}


async def test_a_script_naming_an_unknown_command_with_a_secret_is_counted_under_one_fixed_label(
    tmp_path: Path,
) -> None:
    port = free_port()
    with otlp_receiver() as receiver:
        async with Host.open(_config(receiver.url, port), servers={"leaky": _leaky()}, state_dir=tmp_path) as host:
            assert host.metrics is not None
            scrape_url = host.metrics.serve_prometheus("127.0.0.1", port)
            result = await host.run(f"tools {SECRET} x; tools any-word-at-all y; tools leaky {SECRET}; true")
            async with httpx2.AsyncClient(timeout=30) as http:
                scraped = (await http.get(scrape_url)).text
        unresolved = [s for s in receiver.spans if s.name == "tools/call"]
        nested = receiver.metric("toolshell.nested_calls")
    assert result.exit_code == 0
    assert [s.attributes["toolshell.command"] for s in unresolved] == [
        "tools *** x",
        "tools any-word-at-all y",
        "tools leaky ***",
    ]
    assert [(p.attributes["gen_ai.tool.name"], p.value) for p in nested] == [(UNRESOLVED, 3)]
    samples = [
        s
        for family in text_string_to_metric_families(scraped)
        for s in family.samples
        if s.name == "toolshell_nested_calls_total"
    ]
    assert [(s.labels["gen_ai_tool_name"], s.value) for s in samples] == [(UNRESOLVED, 3)]
    everything = json.dumps([[s.name, s.attributes] for s in receiver.spans]) + json.dumps(
        [p.attributes for p in receiver.points]
    )
    assert _leaks(everything + scraped) == [] and "any-word-at-all" not in json.dumps(nested[0].attributes)
