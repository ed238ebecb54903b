"""The seed's approval flow end to end: before-start stops, one-off and always grants, run-time stops."""

from __future__ import annotations

import json
from typing import Any

import pytest

from _github_server import make_github
from toolshell.config import Config
from toolshell.host import Host

pytestmark = pytest.mark.anyio

NOT_REACHED = "the stopped call and everything after it; write a new script for the rest"


def _open(calls: list[Any], config: Config | None = None, **kwargs: Any) -> Any:
    return Host.open(config or Config(), servers={"github": make_github(calls)}, **kwargs)


async def test_a_literal_call_that_needs_approval_holds_the_script_then_a_one_off_grant_lets_it_run_once() -> None:
    calls: list[Any] = []
    script = "echo start; tools github delete-branch branch=fix-x"
    async with _open(calls) as host:
        first = await host.run(script)
        assert first.stdout == "" and calls == [], "the script did not start at all"
        assert first.tools == {
            "done": [],
            "read_only_calls": 0,
            "stopped": {
                "reason": "needs_approval",
                "approval": "requested",
                "call": {"tool": "tools github delete-branch", "input": {"branch": "fix-x"}},
                "request_id": host.policy.approvals.list_pending()[0].id,
                "before_start": True,
            },
            "not_reached": NOT_REACHED,
        }
        [pending] = host.policy.approvals.list_pending()
        assert pending.id in json.loads(first.stderr)["error"]["message"]
        host.policy.approvals.grant(pending.id, always=False)

        second = await host.run(script)
        # It succeeded: its output says what it did, and no report repeats it (seed 000).
        assert (second.exit_code, second.stdout, second.tools) == (0, "start\ndeleted fix-x\n", None)
        third = await host.run(script)
        assert third.tools["stopped"]["before_start"] is True, "a one-off grant is used up by one call"
    assert calls == [("delete-branch", {"branch": "fix-x"})]


async def test_a_one_off_grant_covers_only_the_exact_input() -> None:
    calls: list[Any] = []
    async with _open(calls) as host:
        await host.run("tools github delete-branch branch=fix-x")
        [pending] = host.policy.approvals.list_pending()
        host.policy.approvals.grant(pending.id)
        other = await host.run("tools github delete-branch branch=main")
    assert other.tools["stopped"]["call"]["input"] == {"branch": "main"}
    assert calls == []


async def test_an_always_grant_covers_the_tool_for_any_input() -> None:
    calls: list[Any] = []
    async with _open(calls) as host:
        await host.run("tools github delete-branch branch=a")
        [pending] = host.policy.approvals.list_pending()
        host.policy.approvals.grant(pending.id, always=True)
        result = await host.run("tools github delete-branch branch=b; tools github delete-branch branch=c")
    assert result.exit_code == 0
    assert calls == [("delete-branch", {"branch": "b"}), ("delete-branch", {"branch": "c"})]


async def test_a_run_time_stop_reports_what_changed_and_nothing_after_it_runs() -> None:
    calls: list[Any] = []
    script = """
tools github list-pulls repo=a/b > /dev/null
tools github create-issue title="Flaky test"
for b in fix-x; do tools github delete-branch "branch=$b"; done
echo after
tools github create-issue title=never
"""
    async with _open(calls) as host:
        result = await host.run(script)
        [pending] = host.policy.approvals.list_pending()
    assert result.exit_code == 1
    assert "after" not in result.stdout
    assert result.tools == {
        "done": [
            {
                "tool": "tools github create-issue",
                "input": {"title": "Flaky test"},
                "ok": True,
                "result": {"id": "EVE-1201"},
            }
        ],
        "read_only_calls": 1,
        "stopped": {
            "reason": "needs_approval",
            "approval": "requested",
            "call": {"tool": "tools github delete-branch", "input": {"branch": "fix-x"}},
            "request_id": pending.id,
        },
        "not_reached": NOT_REACHED,
    }
    assert [c[0] for c in calls] == ["list-pulls", "create-issue"]
    assert json.loads(result.stderr.strip().splitlines()[-1])["error"]["code"] == "needs_approval"


async def test_approval_mode_off_asks_nothing_and_strict_asks_before_any_change() -> None:
    calls: list[Any] = []
    off = Config.model_validate({"approval": {"mode": "off"}})
    async with _open(calls, off) as host:
        assert (await host.run("tools github delete-branch branch=x")).exit_code == 0
    strict = Config.model_validate({"approval": {"mode": "strict"}})
    async with _open(calls, strict) as host:
        result = await host.run("tools github create-issue title=t")
        assert result.tools["stopped"]["reason"] == "needs_approval"
        assert (await host.run("tools github list-pulls repo=a/b | jq length")).stdout == "3\n"


async def test_a_deny_rule_blocks_the_call_with_denied() -> None:
    calls: list[Any] = []
    config = Config.model_validate({"approval": {"deny": ["github:delete-*"], "mode": "off"}})
    async with _open(calls, config) as host:
        result = await host.run("tools github delete-branch branch=x 2>&1; echo exit=$?")
    assert json.loads(result.stdout.splitlines()[0])["error"]["code"] == "denied"
    assert result.stdout.splitlines()[1] == "exit=1"
    assert calls == []


async def test_a_config_guard_denies_by_input_and_plan_shows_it_blocked() -> None:
    calls: list[Any] = []
    config = Config.model_validate(
        {"approval": {"mode": "off"}, "guard": [{"tool": "github:*", "input": "main", "message": "never touch main"}]}
    )
    async with _open(calls, config) as host:
        result = await host.run("tools github delete-branch branch=main")
        plan = await host.plan("tools github delete-branch branch=main")
    assert json.loads(result.stderr)["error"]["code"] == "denied"
    assert "never touch main" in result.stderr
    assert plan["calls"][0]["risk"] == "blocked"
    assert calls == []


async def test_a_python_guardrail_rewrites_input_and_sees_the_result_first() -> None:
    import mcp_types as types

    calls: list[Any] = []
    seen: list[Any] = []

    class Upper:
        async def before(self, call: Any) -> dict[str, Any] | None:
            if call.entry.name == "create-issue":
                return {**call.input, "title": call.input["title"].upper()}
            return None

        async def after(self, call: Any, result: types.CallToolResult) -> types.CallToolResult | None:
            seen.append(result.structured_content)
            return types.CallToolResult(content=[types.TextContent(type="text", text="redacted")])

    config = Config.model_validate({"approval": {"mode": "off"}})
    async with _open(calls, config, guardrails=[Upper()]) as host:
        result = await host.run("tools github create-issue title=flaky")
    assert calls == [("create-issue", {"title": "FLAKY"})]
    assert seen == [{"id": "EVE-1201"}]
    assert result.stdout == "redacted\n"


async def test_plan_marks_run_time_input_eval_and_substitutions() -> None:
    async with _open([]) as host:
        plan = await host.plan(
            "n=$(tools github list-pulls repo=a/b | jq length)\ntools github get-pull repo=a/b number=$n\n"
        )
        hidden = await host.plan('eval "tools github delete-branch branch=x"')
    assert plan == {
        "calls": [
            {"tool": "tools github list-pulls", "input": {"repo": "a/b"}, "risk": "read_only", "where": "substitution"},
            {
                "tool": "tools github get-pull",
                "input": None,
                "risk": "checked_at_run_time",
                "tool_risk": "read_only",
                "where": "script",
            },
        ],
        "complete": True,
    }
    assert hidden["complete"] is False


async def test_inline_approval_lets_the_script_continue_when_a_person_says_yes() -> None:
    calls: list[Any] = []
    asked: list[str] = []
    config = Config.model_validate({"approval": {"inline": True}})

    async def approver(entry: Any, arguments: dict[str, Any], risk: Any) -> str:
        asked.append(entry.command)
        return "once"

    async with _open(calls, config) as host:
        session = host.session()
        session.approver = approver
        result = await session.run("for b in x; do tools github delete-branch branch=$b; done; echo after")
    assert result.stdout == "deleted x\nafter\n"
    assert asked == ["tools github delete-branch"]


def test_grants_can_be_listed_and_revoked_from_the_command_line(tmp_path) -> None:
    import anyio
    from click.testing import CliRunner

    from toolshell.frontends.cli import main

    async def ask_and_grant_always() -> None:
        async with _open([], state_dir=tmp_path) as host:
            await host.run("tools github delete-branch branch=x")
            [pending] = host.policy.approvals.list_pending()
            host.policy.approvals.grant(pending.id, always=True)

    anyio.run(ask_and_grant_always)
    runner = CliRunner()
    base = ["approvals", "--state-dir", str(tmp_path)]
    listed = runner.invoke(main, [*base, "grants"]).stdout  # the in-process server is not in the CLI's config
    assert listed == (
        "always  tools github delete-branch  (server github: built-in github; "
        "not in force: no server github is configured)\n"
    )
    revoked = runner.invoke(main, [*base, "revoke", "github", "delete_branch"])
    assert revoked.stdout == "revoked 1 grant of tools github delete-branch\n"
    assert runner.invoke(main, [*base, "grants"]).stdout == "no grants in force\n"
