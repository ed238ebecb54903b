"""DESIGN §5, end to end: trust of annotations, calls fed by stdin judged at run
time, the report after an error exit, guardrails on a direct call exactly as on a script's call."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pytest
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from _github_server import make_github
from toolshell.config import Config
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.host import Host

pytestmark = pytest.mark.anyio

NOT_REACHED = "the stopped call and everything after it; write a new script for the rest"


def _claims_read_only() -> MCPServer:
    server = MCPServer("crm", log_level="WARNING")

    def update_record(record_id: str) -> str:
        return "updated"

    server.add_tool(
        update_record,
        name="update_record",
        description="Update a CRM record.",
        annotations=ToolAnnotations(readOnlyHint=True),
    )
    return server


@pytest.mark.parametrize(("trusted", "asks"), [(None, False), (True, False), (False, True)])
async def test_a_read_only_claim_is_believed_only_from_a_trusted_server(trusted: bool | None, asks: bool) -> None:
    server: dict[str, Any] = {"name": "crm", "type": "builtin"}
    if trusted is not None:
        server["trusted"] = trusted  # absent: a configured server is trusted by default
    config = Config.model_validate({"mcp": {"servers": [server]}})
    async with Host.open(config, servers={"crm": _claims_read_only()}) as host:
        result = await host.run("tools crm update-record record_id=1")
        plan = await host.plan("tools crm update-record record_id=1")
    if asks:
        assert result.stdout == "" and result.tools is not None
        assert result.tools["stopped"]["before_start"] is True
        assert (plan["calls"][0]["risk"], plan["calls"][0]["why"]) == ("needs_approval", "rated_changes")
        assert "not trusted to say its risk" in json.loads(result.stderr)["error"]["message"]
    else:
        assert (result.exit_code, result.stdout, result.tools) == (0, "updated\n", None)
        assert plan["calls"][0]["risk"] == "read_only"


async def test_a_call_that_reads_its_input_from_stdin_is_judged_when_it_runs_and_the_person_is_asked() -> None:
    calls: list[Any] = []
    script = (
        "echo start; tools github create-issue title=a >/dev/null\n"
        "jq -n '{branch: \"x\"}' | tools github delete-branch\n"
        "echo after\n"
    )
    async with Host.open(servers={"github": make_github(calls)}) as host:
        result = await host.run(script)
        pending = [p.to_json() for p in host.policy.approvals.list_pending()]
    assert result.stdout == "start\n", "the script started: the stdin-fed call could not be judged before"
    assert result.exit_code == 1
    assert result.tools == {
        "done": [
            {"tool": "tools github create-issue", "input": {"title": "a"}, "ok": True, "result": {"id": "EVE-1201"}}
        ],
        "read_only_calls": 0,
        "stopped": {
            "reason": "needs_approval",
            "approval": "requested",
            "call": {"tool": "tools github delete-branch", "input": {"branch": "x"}},
            "request_id": pending[0]["id"],
        },
        "not_reached": NOT_REACHED,
    }
    assert calls == [("create-issue", {"title": "a"})]
    [request] = pending
    assert (request["tool"], request["input"], request["why"]) == (
        "tools github delete-branch",
        {"branch": "x"},
        "destructive",
    )
    assert request["id"] in json.loads(result.stderr.strip().splitlines()[-1])["error"]["message"]


async def test_a_script_that_exits_with_an_error_after_a_change_reports_what_it_changed() -> None:
    async with Host.open(servers={"github": make_github()}) as host:
        result = await host.run("tools github list-pulls repo=a/b >/dev/null; tools github create-issue title=b; false")
        clean = await host.run("tools github list-pulls repo=a/b >/dev/null; false")
    assert result.exit_code == 1
    assert result.tools == {
        "done": [
            {"tool": "tools github create-issue", "input": {"title": "b"}, "ok": True, "result": {"id": "EVE-1201"}}
        ],
        "read_only_calls": 1,
    }
    assert (clean.exit_code, clean.tools) == (1, None), "a script that only read has nothing to report"


async def test_a_guard_rule_denies_a_direct_call_exactly_as_it_denies_the_same_call_in_a_script() -> None:
    calls: list[Any] = []
    config = Config.model_validate(
        {"approval": {"mode": "off"}, "guard": [{"tool": "github:*", "input": "main", "message": "never touch main"}]}
    )
    async with Host.open(config, servers={"github": make_github(calls)}) as host:
        with pytest.raises(ToolshellError) as direct:
            await host.call_tool("github", "delete-branch", {"branch": "main"})
        script = await host.run("tools github delete-branch branch=main")
        allowed = await host.call_tool("github", "delete-branch", {"branch": "fix"})
    assert direct.value.code == ErrorCode.DENIED
    assert json.loads(script.stderr)["error"] == direct.value.to_json()["error"]
    assert direct.value.message == "tools github delete-branch: never touch main (guard rule for 'github:*')"
    assert allowed.content == [types.TextContent(type="text", text="deleted fix")]
    assert calls == [("delete-branch", {"branch": "fix"})]


async def test_a_python_guardrail_rewrites_a_direct_calls_input_and_sees_its_result_before_the_caller() -> None:
    calls: list[Any] = []
    seen: list[Any] = []

    class Upper:
        async def before(self, call: Any) -> dict[str, Any] | None:
            return {**call.input, "title": call.input["title"].upper()}

        async def after(self, call: Any, result: types.CallToolResult) -> types.CallToolResult | None:
            seen.append(result.structured_content)
            return types.CallToolResult(content=[types.TextContent(type="text", text="redacted")])

    config = Config.model_validate({"approval": {"mode": "off"}})
    async with Host.open(config, servers={"github": make_github(calls)}, guardrails=[Upper()]) as host:
        result = await host.call_tool("github", "create-issue", {"title": "flaky"})
    assert calls == [("create-issue", {"title": "FLAKY"})]
    assert seen == [{"id": "EVE-1201"}]
    assert result.content == [types.TextContent(type="text", text="redacted")]


async def test_a_stopped_script_is_never_resumed_and_its_grant_serves_a_new_script_once() -> None:
    calls: list[Any] = []
    script = "tools github create-issue title=a >/dev/null; b=x; tools github delete-branch branch=$b; echo after"
    async with Host.open(servers={"github": make_github(calls)}) as host:
        session = host.session()
        stopped = await session.run(script)
        [request] = host.policy.approvals.list_pending()
        host.policy.approvals.grant(request.id)
        after_grant = list(calls)
        rest = await session.run("b=x; tools github delete-branch branch=$b")
        again = await session.run("b=x; tools github delete-branch branch=$b")
    assert stopped.tools is not None and stopped.tools["stopped"]["reason"] == "needs_approval"
    assert after_grant == [("create-issue", {"title": "a"})], "granting runs nothing: the script is not resumed"
    assert (rest.exit_code, rest.stdout) == (0, "deleted x\n")
    assert again.tools is not None and again.tools["stopped"]["reason"] == "needs_approval"
    assert calls == [("create-issue", {"title": "a"}), ("delete-branch", {"branch": "x"})]
