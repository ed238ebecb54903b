"""DESIGN §6, end to end: saved scripts follow the caller's guardrails and
identity, running needs no `manage_scripts`, trigger runs are never asked, and every timeline outcome."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

from _github_server import make_github
from test_llm_and_elicitation import Person, _asking
from toolshell.config import Config
from toolshell.host import Host
from toolshell.timeline.sinks import query

pytestmark = pytest.mark.anyio

MANAGE: dict[str, Any] = {"tools_in_shell": {"manage_scripts": True}}


def _whoami() -> MCPServer:
    server = MCPServer("ctx", log_level="WARNING")

    async def whoami(ctx: Context) -> str:
        session = (ctx.request_context.meta or {}).get("io.toolshell/session") or {}
        return str(session.get("session_id"))

    server.add_tool(whoami, name="whoami", annotations=ToolAnnotations(readOnlyHint=True))
    return server


async def test_a_saved_script_calls_tools_under_the_callers_guardrails_and_session() -> None:
    calls: list[Any] = []
    config = Config.model_validate(
        {**MANAGE, "approval": {"mode": "off"}, "guard": [{"tool": "github:*", "input": "main", "message": "not main"}]}
    )
    async with Host.open(config, servers={"github": make_github(calls), "ctx": _whoami()}) as host:
        session = host.session(session_id="caller-1")
        await session.run("echo 'tools ctx whoami; tools github delete-branch branch=main' | tools scripts save rm")
        result = await session.run("tools scripts rm")
    assert result.stdout == "caller-1\n"
    assert json.loads(result.stderr.strip().splitlines()[-1])["error"] == {
        "code": "denied",
        "message": "tools github delete-branch: not main (guard rule for 'github:*')",
        "retryable": False,
    }
    assert calls == []


async def test_every_agent_can_run_a_saved_script_without_manage_scripts(tmp_path: Path) -> None:
    async with Host.open(Config.model_validate(MANAGE), state_dir=tmp_path) as host:
        saved = await host.run(
            "echo 'tools text-metrics text-length text=\"$(jq -r .text)\"' | tools scripts save count"
        )
    async with Host.open(Config(), state_dir=tmp_path) as host:
        ran = await host.run("tools scripts count text=héllo")
        refused = await host.run("echo 'echo x' | tools scripts save other")
    assert saved.stdout == "saved script count\n", saved.stderr
    assert (ran.exit_code, ran.stdout) == (0, "5\n")
    assert json.loads(refused.stderr)["error"]["code"] == "denied"


async def test_a_trigger_run_of_a_saved_script_is_never_asked() -> None:
    person = Person(None)  # would wait forever, were it asked
    async with Host.open(Config.model_validate(MANAGE), servers={"greeter": _asking()}) as host:
        await host.session(answerer=person).run("echo 'tools greeter greet' | tools scripts save hi")
        outcome = await host.run_saved_script("hi", {})
        rows = query(host.store)
    assert person.asked == []
    assert outcome.exit_code == 1
    err = json.loads(outcome.stderr)["error"]
    assert (err["code"], err["retryable"]) == ("tool_error", False)
    assert "no one answers for this session" in err["message"]
    assert rows[0]["source"] == "trigger"


async def test_the_timeline_records_completed_refused_and_stopped_calls_under_their_shell_call() -> None:
    config = Config.model_validate({"approval": {"deny": ["github:create-*"]}})
    script = (
        "tools github list-pulls repo=a/b >/dev/null\n"
        "tools github create-issue title=x || true\n"
        "b=x; tools github delete-branch branch=$b\n"
    )
    async with Host.open(config, servers={"github": make_github()}) as host:
        session = host.session()
        result = await session.run(script)
        [row] = query(host.store, session_id=session.id)
    assert result.tools is not None and result.tools["stopped"]["reason"] == "needs_approval"
    assert (row["exit_code"], row["source"]) == (1, "agent")
    assert [(c["command"], c["outcome"], c["error_code"], c["input_preview"]) for c in row["calls"]] == [
        ("tools github list-pulls", "completed", None, '{"repo":"a/b"}'),
        ("tools github create-issue", "refused", "denied", '{"title":"x"}'),
        ("tools github delete-branch", "stopped_for_approval", "needs_approval", '{"branch":"x"}'),
    ]
    assert all(c["shell_call_id"] == row["id"] for c in row["calls"])
    assert all(isinstance(c["duration_ms"], float) and c["duration_ms"] >= 0 for c in row["calls"])
    assert set(result.to_json()) == {"exit_code", "success", "stdout", "stderr", "tools"}, "no events for the model"
