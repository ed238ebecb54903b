"""`toolshell serve` details: the input_required round of a 2026-07-28 client, `[approval]
wait_seconds` / `inline = false`, and what clients see of `bash` and the `keep_visible` tools."""

from __future__ import annotations

import json
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from _github_server import make_github
from toolshell.builtin import text_metrics
from toolshell.config import Config
from toolshell.frontends.serve.bash_tool import (
    BASH_OUTPUT_SCHEMA,
    BASH_SCHEMA,
    BASH_TITLE,
    MAX_LISTED_SERVERS,
    bash_description,
)
from toolshell.frontends.serve.server import build_server
from toolshell.host import Host
from toolshell.registry.entry import ServerInfo, ToolEntry
from toolshell.version import __version__

pytestmark = pytest.mark.anyio
SCRIPT = "echo start; for b in x; do tools github delete-branch branch=$b; done; echo after"


async def _never(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
    raise AssertionError("the client was asked")


async def test_a_2026_client_gets_an_input_required_round_and_its_retry_resumes_the_parked_script() -> None:
    async with Host.open(servers={"github": make_github()}) as host:
        async with Client(build_server(host, []), elicitation_callback=_never) as client:
            first = await client.session.call_tool("bash", {"script": SCRIPT}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult) and first.request_state
            [(key, request)] = (first.input_requests or {}).items()
            assert isinstance(request, types.ElicitRequest) and "delete-branch" in request.params.message
            answer = {key: types.ElicitResult(action="accept", content={"answer": "once"})}
            done = await client.session.call_tool(
                "bash", {"script": SCRIPT}, input_responses=answer, request_state=first.request_state
            )
            again = await client.session.call_tool(
                "bash", {"script": SCRIPT}, input_responses=answer, request_state=first.request_state
            )
    assert isinstance(done, types.CallToolResult)
    assert done.structured_content["stdout"] == "start\ndeleted x\nafter\n"
    assert isinstance(again, types.CallToolResult) and again.is_error, "a finished run takes no more answers"
    assert "no longer waiting" in again.content[0].text


async def test_an_unanswered_approval_stops_after_wait_seconds_and_the_request_stays_pending() -> None:
    config = Config.model_validate({"approval": {"wait_seconds": 1}})
    asked = anyio.Event()

    async def silent(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.set()
        await anyio.sleep_forever()
        raise AssertionError

    async with Host.open(config, servers={"github": make_github()}) as host:
        async with Client(build_server(host, []), mode="legacy", elicitation_callback=silent) as client:
            with anyio.fail_after(20):
                result = await client.call_tool("bash", {"script": SCRIPT})
        pending = host.policy.approvals.list_pending()
    body = result.structured_content
    assert asked.is_set() and body["stdout"] == "start\n"
    assert body["tools"]["stopped"]["approval"] == "requested"
    assert [p.id for p in pending] == [body["tools"]["stopped"]["request_id"]]


async def test_a_retry_that_does_not_answer_gets_the_same_question_again() -> None:
    async with Host.open(servers={"github": make_github()}) as host:
        async with Client(build_server(host, []), elicitation_callback=_never) as client:
            first = await client.session.call_tool("bash", {"script": SCRIPT}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            again = await client.session.call_tool(
                "bash", {"script": SCRIPT}, request_state=first.request_state, allow_input_required=True
            )
            assert isinstance(again, types.InputRequiredResult)
            [key] = first.input_requests or {}
            deny = {key: types.ElicitResult(action="accept", content={"answer": "deny"})}
            done = await client.session.call_tool(
                "bash", {"script": SCRIPT}, input_responses=deny, request_state=again.request_state
            )
    assert list(again.input_requests or {}) == [key]
    assert done.structured_content["tools"]["stopped"]["approval"] == "denied"


async def test_inline_false_keeps_serve_from_asking_the_client() -> None:
    config = Config.model_validate({"approval": {"inline": False}})
    async with Host.open(config, servers={"github": make_github()}) as host:
        async with Client(build_server(host, []), mode="legacy", elicitation_callback=_never) as client:
            result = await client.call_tool("bash", {"script": SCRIPT})
    assert result.structured_content["tools"]["stopped"]["approval"] == "requested"


def _titled() -> MCPServer:
    server = MCPServer("notes", log_level="WARNING")

    def count() -> dict[str, int]:
        return {"n": 3}

    server.add_tool(
        count,
        name="count",
        title="Count the notes",
        description="Count notes.",
        annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False),
        structured_output=True,
    )
    return server


async def test_keep_visible_proxies_keep_title_annotations_and_output_schema() -> None:
    config = Config.model_validate({"tools_in_shell": {"keep_visible": ["mcp_notes__count"]}})
    async with Host.open(config, servers={"notes": _titled()}) as host:
        async with Client(build_server(host, await host.visible_tools())) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
    async with Client(_titled()) as client:
        [original] = (await client.list_tools()).tools
    proxy = tools["mcp_notes__count"]
    assert proxy.title == "Count the notes"
    assert proxy.annotations is not None
    assert (proxy.annotations.read_only_hint, proxy.annotations.open_world_hint) == (True, False)
    assert proxy.output_schema is not None and proxy.output_schema == original.output_schema


async def test_bash_has_a_title_an_output_schema_and_returns_structured_content() -> None:
    async with Host.open() as host, Client(build_server(host, [])) as client:
        [bash] = (await client.list_tools()).tools
        result = await client.call_tool("bash", {"script": "echo hi"})
        version = client.session.initialize_result
    assert (bash.title, bash.output_schema) == (BASH_TITLE, BASH_OUTPUT_SCHEMA)
    shell = (result.structured_content or {}).get("shell")
    assert result.structured_content == {
        "exit_code": 0,
        "success": True,
        "stdout": "hi\n",
        "stderr": "",
        "shell": shell,
    }
    assert isinstance(shell, str) and shell.startswith("sh_")
    assert version is None or version.server_info.version == __version__


async def test_serve_and_the_builtin_servers_report_the_package_version() -> None:
    async with Host.open() as host, Client(build_server(host, []), mode="legacy") as client:
        info = client.session.initialize_result
    async with Client(text_metrics.create(), mode="legacy") as client:
        builtin = client.session.initialize_result
    assert info is not None and info.server_info.version == __version__
    assert builtin is not None and builtin.server_info.version == __version__


async def test_the_bash_description_names_the_servers_with_their_tool_counts() -> None:
    async with Host.open(servers={"github": make_github()}) as host, Client(build_server(host, [])) as client:
        [bash] = (await client.list_tools()).tools
    assert "github (6 tools)" in (bash.description or "")
    assert "text-metrics (1 tool)" in (bash.description or "")


def test_a_remembered_count_shows_while_the_server_connects_and_a_state_only_without_one() -> None:
    servers = [
        ServerInfo("fs", loaded=True, tool_count=14, state="connecting", remembered=True),
        ServerInfo("git", loaded=True, tool_count=0, state="connecting"),
        ServerInfo("docs", loaded=True, tool_count=3, state="failed", remembered=True),
    ]
    text = bash_description(servers)
    assert "\nServers: fs (14 tools), git (connecting), docs (3 tools, failed)." in text


def test_the_bash_definition_a_model_reads_stays_under_257_tokens_with_sixty_servers() -> None:
    """`benchmarks/tokens.py`'s target at 50 servers: 250 times fewer definition tokens than direct (64,311)."""
    from bpe_openai import get_encoding  # the dev extra's tokenizer

    servers = [
        ServerInfo(f"server-{i:02}", loaded=i % 3 != 0, tool_count=40, description="A server that does things " * 9)
        for i in range(60)
    ]
    text = bash_description(servers)
    # As an agent host sends it to the model (the output schema is for the client, not the model).
    definition = json.dumps([{"name": "bash", "description": text, "input_schema": BASH_SCHEMA}], ensure_ascii=False)
    assert len(get_encoding("o200k_base").encode(definition)) <= 257
    assert "server-00, server-01 (40 tools), server-02 (40 tools)," in text, "a server not loaded: its name alone"
    assert f"and {60 - MAX_LISTED_SERVERS} more" in text


def _slow_stdio_config(tmp_path: Any) -> Config:
    """A stdio server that never answers its handshake (it stays starting)."""
    import sys
    from pathlib import Path

    script = str(Path(__file__).parent / "servers" / "stdio_server.py")
    return Config.model_validate(
        {
            "startup_wait_seconds": 0.0,
            "mcp": {"servers": [{"name": "slow", "command": sys.executable, "args": [script, "hang-startup"]}]},
        }
    )


async def test_serve_answers_initialize_and_tools_list_while_a_server_is_still_starting(tmp_path: Any) -> None:
    async with Host.open(_slow_stdio_config(tmp_path), state_dir=tmp_path) as host:
        with anyio.fail_after(10):
            async with Client(build_server(host, [])) as client:
                [bash] = (await client.list_tools()).tools
    assert "slow (" in (bash.description or "")


async def test_a_question_nobody_can_see_is_declined_and_the_reason_logged(caplog: pytest.LogCaptureFixture) -> None:
    from _loop_servers import new_greeter

    caplog.set_level("INFO")
    async with Host.open(servers={"new": new_greeter()}) as host:
        async with Client(build_server(host, []), mode="legacy") as client:  # no elicitation declared
            result = await client.call_tool("bash", {"script": "tools new greet"})
    assert result.structured_content["stdout"] == "no answer (decline)\n"
    assert "declined a form question from server 'new': the upstream client cannot show it" in caplog.text


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_literal_call_is_asked_before_the_script_starts_and_always_covers_the_next_script(mode: str) -> None:
    asked: list[str] = []

    async def always(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"answer": "always"})

    script = "echo start; tools github delete-branch branch=y"
    async with Host.open(servers={"github": make_github()}) as host:
        async with Client(build_server(host, []), mode=mode, elicitation_callback=always) as client:
            first = await client.call_tool("bash", {"script": script})
            second = await client.call_tool("bash", {"script": script.replace("=y", "=z")})
    assert first.structured_content["stdout"] == "start\ndeleted y\n"
    assert second.structured_content["stdout"] == "start\ndeleted z\n"
    assert len(asked) == 1, "an always grant covers the tool: the second script is not asked about"


async def test_a_small_config_lists_each_tool_with_its_arguments_and_a_large_one_does_not() -> None:
    async with Host.open(servers={"github": make_github()}) as host, Client(build_server(host, [])) as client:
        [bash] = (await client.list_tools()).tools
    text = bash.description or ""
    assert "Servers and their tools:\ngithub (6 tools):\n " in text
    assert "\n text-length text=\n" in text, "a string argument is `name=`, the usual type unsaid"

    many = [ServerInfo(f"s{i}", loaded=True, tool_count=1) for i in range(3)]
    wide = {"type": "object", "properties": {f"field_{n}": {"type": "string"} for n in range(8)}}
    entries = {
        s.name: [ToolEntry(server=s.name, name=f"tool_{k}", description="", input_schema=wide) for k in range(9)]
        for s in many
    }
    text = bash_description(many, lambda name: entries[name])
    assert "Servers: s0 (1 tool), s1 (1 tool)" in text and "tool-0" not in text, "past SIGNATURE_CHARS: no tool lines"
    few = {name: rows[:1] for name, rows in entries.items()}
    assert "s0 (1 tool):\n tool-0 [field_0=]" in bash_description(many, lambda name: few[name])
