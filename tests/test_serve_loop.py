"""A person in the loop under `toolshell serve`: the official SDK client, over stdio (the real
`toolshell serve` process) and Streamable HTTP, speaking 2026-07-28 (`mode="auto"`: input_required
rounds) and 2025-11-25 (`mode="legacy"`: `elicitation/create` on the call's stream)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from _net_support import free_port, wait_until_serving
from toolshell.frontends.serve.auth import NO_AUTH
from toolshell.frontends.serve.server import _serve_http, build_server
from toolshell.host import Host

pytestmark = pytest.mark.anyio

TESTS = Path(__file__).parent
CONFIG = """
[[mcp.servers]]
name = "github"
type = "builtin"
module = "_loop_servers:github"

[[mcp.servers]]
name = "old"
type = "builtin"
module = "_loop_servers:old_greeter"
protocol = "2025-11-25"

[[mcp.servers]]
name = "new"
type = "builtin"
module = "_loop_servers:new_greeter"
"""
DELETE_AT_RUN_TIME = "echo start; for b in x; do tools github delete-branch branch=$b; done; echo after"


class Person:
    """The upstream client's elicitation callback: answers approvals from a list, names with Grace."""

    def __init__(self, *approvals: types.ElicitResult) -> None:
        self.approvals = list(approvals)
        self.asked: list[types.ElicitRequestParams] = []

    async def __call__(self, context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params)
        if params.message.startswith("toolshell:"):
            return self.approvals.pop(0)
        if isinstance(params, types.ElicitRequestURLParams):
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="accept", content={"name": "Grace"})


@asynccontextmanager
async def served(tmp_path: Path, transport: str, mode: str, person: Person | None) -> AsyncIterator[Client]:
    config = tmp_path / "toolshell.toml"
    config.write_text(CONFIG)
    state = tmp_path / "state"
    callback = person if person is not None else None
    if transport == "stdio":
        exe = shutil.which("toolshell") or str(Path(sys.executable).parent / "toolshell")
        env = {**os.environ, "PYTHONPATH": str(TESTS)}
        args = ["serve", "--config", str(config), "--state-dir", str(state)]
        params = StdioServerParameters(command=exe, args=args, env=env)
        with anyio.fail_after(60):
            async with Client(params, mode=mode, elicitation_callback=callback) as client:  # type: ignore[arg-type]
                yield client
        return
    port = free_port()
    async with Host.open(config, state_dir=state) as host, anyio.create_task_group() as tg:
        tg.start_soon(_serve_http, build_server(host, []), "127.0.0.1", port, NO_AUTH)
        url = f"http://127.0.0.1:{port}/mcp"
        await wait_until_serving(url)
        with anyio.fail_after(60):
            async with Client(url, mode=mode, elicitation_callback=callback) as client:  # type: ignore[arg-type]
                yield client
        tg.cancel_scope.cancel()


def _body(result: Any) -> dict[str, Any]:
    return result.structured_content


BOTH = pytest.mark.parametrize(
    ("transport", "mode"), [("stdio", "auto"), ("stdio", "legacy"), ("http", "auto"), ("http", "legacy")]
)


@BOTH
async def test_a_destructive_call_asks_the_client_about_the_exact_call_and_once_lets_the_script_go_on(
    tmp_path: Path, transport: str, mode: str
) -> None:
    person = Person(types.ElicitResult(action="accept", content={"answer": "once"}))
    async with served(tmp_path, transport, mode, person) as client:
        result = await client.call_tool("bash", {"script": DELETE_AT_RUN_TIME})
    [asked] = person.asked
    assert isinstance(asked, types.ElicitRequestFormParams)
    assert "tools github delete-branch" in asked.message and '{"branch": "x"}' in asked.message
    assert "needs_approval (destructive)" in asked.message
    assert asked.requested_schema["properties"]["answer"]["enum"] == ["once", "always", "deny"]
    assert _body(result)["stdout"] == "start\ndeleted x\nafter\n"
    assert result.structured_content == _body(result)


@BOTH
async def test_a_declined_call_stops_the_script_with_the_report_and_its_request_id(
    tmp_path: Path, transport: str, mode: str
) -> None:
    person = Person(types.ElicitResult(action="decline"))
    async with served(tmp_path, transport, mode, person) as client:
        result = await client.call_tool("bash", {"script": DELETE_AT_RUN_TIME})
    body = _body(result)
    assert result.is_error is True and body["stdout"] == "start\n"
    stopped = body["tools"]["stopped"]
    assert (stopped["approval"], stopped["call"]) == (
        "denied",
        {"tool": "tools github delete-branch", "input": {"branch": "x"}},
    )
    assert stopped["request_id"].startswith("apr_")


@BOTH
async def test_a_client_without_elicitation_gets_the_stop_report_with_the_request_id_and_grant_hint(
    tmp_path: Path, transport: str, mode: str
) -> None:
    async with served(tmp_path, transport, mode, None) as client:
        result = await client.call_tool("bash", {"script": DELETE_AT_RUN_TIME})
    body = _body(result)
    stopped = body["tools"]["stopped"]
    assert stopped["approval"] == "requested" and stopped["request_id"].startswith("apr_")
    message = json.loads(body["stderr"].strip().splitlines()[-1])["error"]["message"]
    if transport == "stdio":  # the real process names the options it was started with
        assert f"toolshell approvals grant {stopped['request_id']} --config " in message
        assert "--state-dir " in message


@BOTH
async def test_servers_that_ask_with_ctx_elicit_and_with_the_resolver_reach_the_upstream_client(
    tmp_path: Path, transport: str, mode: str
) -> None:
    person = Person()
    async with served(tmp_path, transport, mode, person) as client:
        old = await client.call_tool("bash", {"script": "tools old greet; tools old sign-in"})
        new = await client.call_tool("bash", {"script": "tools new greet"})
    assert _body(old)["stdout"] == "hello Grace\nsign-in: accept\n"
    assert _body(new)["stdout"] == "hello Grace\n"
    assert [p.message for p in person.asked] == [
        "[old] What is your name?",
        "[old] Sign in to continue",
        "[new] What is your name?",
    ]
    assert isinstance(person.asked[1], types.ElicitRequestURLParams)
    assert person.asked[1].url == "https://example.test/login"
