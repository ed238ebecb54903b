"""Each error code a script can see: one compact JSON line on stderr, exit code 1, nothing after a stop."""

from __future__ import annotations

import json
from typing import Any

import pytest

from _github_server import make_github
from toolshell.config import Config, ServerConfig
from toolshell.host import Host

pytestmark = pytest.mark.anyio


def _error(stderr: str) -> dict[str, Any]:
    lines = [line for line in stderr.splitlines() if line.startswith('{"error"')]
    assert len(lines) == 1, stderr
    assert " " not in lines[0].split('"message"')[0], "the error line is compact JSON"
    return json.loads(lines[0])["error"]


async def _run(script: str, config: Config | None = None) -> Any:
    calls: list[Any] = []
    async with Host.open(config or Config(), servers={"github": make_github(calls)}) as host:
        result = await host.run(script)
    return result, calls


async def test_an_unknown_tool_is_unknown_command_with_the_nearest_names() -> None:
    result, _ = await _run("tools github list-pull repo=a/b")
    err = _error(result.stderr)
    assert result.exit_code == 1
    assert err["code"] == "unknown_command" and err["retryable"] is False
    assert "list-pulls" in err["message"]


async def test_an_unknown_server_is_unknown_command() -> None:
    result, _ = await _run("tools gitlab list-pulls")
    assert _error(result.stderr)["code"] == "unknown_command"


async def test_input_that_breaks_the_schema_is_invalid_input_with_the_path_and_nothing_is_sent() -> None:
    result, calls = await _run("tools github get-pull repo=a/b number=seven")
    err = _error(result.stderr)
    assert err["code"] == "invalid_input"
    assert "/number" in err["message"]
    assert calls == []


async def test_a_json_argument_that_is_not_an_object_is_invalid_input() -> None:
    result, calls = await _run("tools github list-pulls '[1, 2]'")
    assert _error(result.stderr)["code"] == "invalid_input"
    assert calls == []


async def test_a_dash_with_empty_stdin_is_invalid_input() -> None:
    result, _ = await _run("tools github list-pulls - < /dev/null")
    assert _error(result.stderr)["code"] == "invalid_input"


async def test_a_failing_tool_is_tool_error_and_the_script_can_branch_on_it() -> None:
    script = "if ! tools github get-pull repo=a/b number=99 2>err; then echo failed; jq -r .error.code err; fi"
    result, _ = await _run(script)
    assert result.stdout == "failed\ntool_error\n"
    assert result.exit_code == 0


async def test_a_server_that_cannot_start_is_unavailable_and_retryable() -> None:
    broken = ServerConfig(name="broken", type="stdio", command="/nonexistent/mcp-server", startup_timeout_seconds=5)
    config = Config.model_validate({"mcp": {"servers": [broken.model_dump()]}})
    result, _ = await _run("tools broken anything", config)
    err = _error(result.stderr)
    assert err["code"] in ("unavailable", "unknown_command")
    result, _ = await _run("tools github list-pulls repo=a/b | jq length", config)
    assert result.stdout == "3\n", "a broken server does not break the others"


async def test_call_fifty_one_stops_the_script_with_call_limit_and_nothing_after_runs() -> None:
    script = "for i in $(seq 1 60); do tools github list-pulls repo=a/b >/dev/null; done; echo after"
    result, calls = await _run(script)
    err = _error(result.stderr)
    assert err["code"] == "call_limit"
    assert len(calls) == 50
    assert "after" not in result.stdout
    assert result.exit_code == 1
    assert result.tools["stopped"]["reason"] == "call_limit"
    assert result.tools["read_only_calls"] == 50


async def test_the_call_limit_is_configurable() -> None:
    config = Config.model_validate({"tools_in_shell": {"call_limit": 3}})
    result, calls = await _run("for i in 1 2 3 4 5; do tools github list-pulls repo=a/b >/dev/null; done", config)
    assert _error(result.stderr)["code"] == "call_limit"
    assert len(calls) == 3


async def test_the_call_limit_error_says_how_the_calls_were_spent_and_how_to_batch_them() -> None:
    config = Config.model_validate({"tools_in_shell": {"call_limit": 3}})
    result, _ = await _run("for i in 1 2 3 4; do tools github list-pulls repo=a/b >/dev/null; done", config)
    message = _error(result.stderr)["message"]
    assert message.startswith("more than 3 tool calls in one shell call (3 of them tools github list-pulls); ")
    assert "one call that takes many items (an array argument" in message
    assert "`tools github --help` shows each tool's arguments" in message
    assert "one listing or search filtered with jq" in message and "[tools_in_shell] call_limit" in message


async def test_a_changing_call_that_times_out_is_reported_as_done_and_not_ok() -> None:
    import anyio
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations

    server = MCPServer("slow")

    async def migrate() -> str:
        await anyio.sleep(30)
        return "migrated"

    server.add_tool(migrate, name="migrate", annotations=ToolAnnotations(destructiveHint=False, openWorldHint=False))
    config = Config.model_validate({"mcp": {"servers": [{"name": "slow", "type": "builtin", "timeout_seconds": 0.3}]}})
    async with Host.open(config, servers={"slow": server}) as host:
        result = await host.run("tools slow migrate")
    err = _error(result.stderr)
    assert (err["code"], err["retryable"]) == ("unavailable", True)
    [done] = result.tools["done"]
    assert (done["tool"], done["ok"]) == ("tools slow migrate", False)
    assert "timed out" in done["result"]["error"]


async def test_a_server_that_hangs_at_startup_does_not_hold_the_host_and_is_listed_as_starting(tmp_path) -> None:
    import sys

    hang = {"name": "slow", "command": sys.executable, "args": ["-c", "import time; time.sleep(60)"]}
    config = Config.model_validate({"mcp": {"servers": [hang]}, "startup_wait_seconds": 1.2})
    waited: list[list[str]] = []
    async with Host.open(config, on_wait=lambda servers, wait: waited.append(servers)) as host:
        result = await host.run("tools --help | grep slow; tools text-metrics text-length text=ok")
    assert result.stdout == "  slow          0 tools (connecting)\n2\n"
    assert waited == [["slow"]]
