"""The `runtime` server's `mcp` tool: list, enable and disable per session; adding is config-only."""

from __future__ import annotations

import json
from typing import Any, cast

import mcp_types as types
import pytest
from mcp.client import Client

from toolshell.builtin.functions import SESSION_META_KEY
from toolshell.builtin.runtime import create
from toolshell.connections.base import ConnState, ServerStatus
from toolshell.errors import ErrorCode, ToolshellError


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class FakeHost:
    """An in-memory HostHandle: two configured servers, enabled flags per session."""

    def __init__(self) -> None:
        self.servers = [
            ServerStatus("runtime", "builtin", ConnState.READY, "startup", tool_count=1),
            ServerStatus("git", "stdio", ConnState.NOT_LOADED, "on_demand", last_error="exited with 1"),
        ]
        self.disabled: set[tuple[str, str]] = set()

    @property
    def runtime(self) -> FakeHost:
        return self  # the fake keeps the per-session switches itself

    def statuses(self) -> list[ServerStatus]:
        return list(self.servers)

    def statuses_for(self, session_id: str) -> list[ServerStatus]:
        return list(self.servers)  # every server is active for every session here

    def set_enabled(self, session_id: str, server: str, enabled: bool) -> None:
        if server not in {s.name for s in self.servers}:
            raise ToolshellError(ErrorCode.INVALID_INPUT, f"no server is named {server!r}; configured: git, runtime")
        (self.disabled.discard if enabled else self.disabled.add)((session_id, server))

    def enabled_for(self, session_id: str) -> dict[str, bool]:
        return {s.name: (session_id, s.name) not in self.disabled for s in self.servers}


def session(sid: str) -> types.RequestParamsMeta:
    return cast(types.RequestParamsMeta, {SESSION_META_KEY: {"session_id": sid, "role": "developer"}})


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def listing(git_enabled: bool) -> dict[str, Any]:
    return {
        "servers": [
            {"name": "runtime", "type": "builtin", "state": "ready", "load": "startup", "enabled": True,
             "tool_count": 1, "last_error": None},
            {"name": "git", "type": "stdio", "state": "not_loaded", "load": "on_demand", "enabled": git_enabled,
             "tool_count": None, "last_error": "exited with 1"},
        ]
    }  # fmt: skip


@pytest.mark.anyio
async def test_the_mcp_tool_is_annotated_not_read_only_not_destructive_closed_world() -> None:
    async with Client(create(FakeHost())) as client:
        (tool,) = (await client.list_tools()).tools
    assert tool.name == "mcp"
    assert tool.input_schema["properties"]["action"]["enum"] == ["list", "enable", "disable"]
    assert tool.annotations is not None
    ann = tool.annotations
    assert (ann.read_only_hint, ann.destructive_hint, ann.open_world_hint) == (False, False, False)


@pytest.mark.anyio
async def test_list_shows_every_configured_server_with_its_state_as_json() -> None:
    async with Client(create(FakeHost())) as client:
        result = await client.call_tool("mcp", {"action": "list"}, meta=session("s1"))
    assert not result.is_error
    assert json.loads(text_of(result)) == listing(git_enabled=True)
    assert result.structured_content == listing(git_enabled=True)


@pytest.mark.anyio
async def test_disable_and_enable_apply_to_the_calling_session_only() -> None:
    host = FakeHost()
    async with Client(create(host)) as client:
        off = await client.call_tool("mcp", {"action": "disable", "server": "git"}, meta=session("s1"))
        s1 = await client.call_tool("mcp", {"action": "list"}, meta=session("s1"))
        s2 = await client.call_tool("mcp", {"action": "list"}, meta=session("s2"))
        on = await client.call_tool("mcp", {"action": "enable", "server": "git"}, meta=session("s1"))
        s1_again = await client.call_tool("mcp", {"action": "list"}, meta=session("s1"))
    assert (off.is_error, text_of(off)) == (False, "git is now disabled for this session")
    assert json.loads(text_of(s1)) == listing(git_enabled=False)
    assert json.loads(text_of(s2)) == listing(git_enabled=True)
    assert (on.is_error, text_of(on)) == (False, "git is now enabled for this session")
    assert json.loads(text_of(s1_again)) == listing(git_enabled=True)
    assert host.disabled == set()


@pytest.mark.anyio
async def test_enabling_an_unknown_server_is_a_soft_error_with_the_hosts_message() -> None:
    async with Client(create(FakeHost())) as client:
        result = await client.call_tool("mcp", {"action": "enable", "server": "gitt"}, meta=session("s1"))
    assert (result.is_error, text_of(result)) == (True, "no server is named 'gitt'; configured: git, runtime")


@pytest.mark.anyio
@pytest.mark.parametrize("action", ["add", "Install", "remove"])
async def test_adding_or_removing_a_server_is_refused_and_points_at_the_config_file(action: str) -> None:
    host = FakeHost()
    async with Client(create(host)) as client:
        result = await client.call_tool("mcp", {"action": action, "server": "evil"}, meta=session("s1"))
    assert result.is_error
    assert text_of(result) == (
        f"{action!r} is not possible from a tool: servers are added and removed only in the config file "
        "(a [[mcp.servers]] entry in toolshell.toml); this tool can list, enable and disable them"
    )
    assert [s.name for s in host.statuses()] == ["runtime", "git"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "meta", "message"),
    [
        ({}, session("s1"), "action must be one of list, enable, disable (you sent None)"),
        ({"action": 3}, session("s1"), "action must be one of list, enable, disable (you sent 3)"),
        ({"action": "enable"}, session("s1"),
         'server must name a configured server, e.g. {"action": "enable", "server": "git"}'),
        ({"action": "disable", "server": "git"}, None,
         "disable applies to the calling session, and this call carried no session context"),
        ({"action": "disable", "server": "runtime"}, session("s1"),
         "runtime cannot be disabled: it is how this session enables servers again"),
    ],
)  # fmt: skip
async def test_bad_calls_are_soft_errors_that_say_what_to_send(
    arguments: dict[str, Any], meta: types.RequestParamsMeta | None, message: str
) -> None:
    host = FakeHost()
    async with Client(create(host)) as client:
        result = await client.call_tool("mcp", arguments, meta=meta)
    assert (result.is_error, text_of(result)) == (True, message)
    assert host.disabled == set()


@pytest.mark.anyio
async def test_without_a_host_the_tool_explains_it_runs_only_inside_toolshell() -> None:
    async with Client(create()) as client:
        result = await client.call_tool("mcp", {"action": "list"}, meta=session("s1"))
    assert (result.is_error, text_of(result)) == (
        True,
        "runtime is not attached to a host; it can only run inside toolshell",
    )
