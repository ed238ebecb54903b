"""Guardrails: deny, rewrite, and replace results, in order."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest

from toolshell.config import GuardConfig
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.policy import GuardCall, Guardrails, RegexGuard
from toolshell.registry.entry import ToolEntry

PUSH = ToolEntry("git", "git_push")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


@pytest.mark.anyio
async def test_a_regex_guard_denies_matching_input_with_its_message() -> None:
    guards = Guardrails.from_config([GuardConfig(tool="git:git-push", input='"force":true', message="no force pushes")])
    with pytest.raises(ToolshellError) as err:
        await guards.before(GuardCall(PUSH, {"remote": "origin", "force": True}, "s"))
    assert err.value.code == ErrorCode.DENIED
    assert err.value.message == "tools git git-push: no force pushes (guard rule for 'git:git-push')"
    assert await guards.before(GuardCall(PUSH, {"remote": "origin", "force": False})) == {
        "remote": "origin",
        "force": False,
    }


@pytest.mark.anyio
async def test_a_regex_guard_only_looks_at_its_tools() -> None:
    guards = Guardrails([RegexGuard(GuardConfig(tool="git:*", input="secret"))])
    assert await guards.before(GuardCall(ToolEntry("slack", "post"), {"text": "secret"})) == {"text": "secret"}
    assert guards.denies(ToolEntry("git", "commit"), {"message": "a secret"}) == (
        "tools git commit: denied by a guard rule (guard rule for 'git:*')"
    )


def test_an_empty_input_regex_denies_every_call_to_the_tool() -> None:
    assert Guardrails.from_config([GuardConfig(tool="web_fetch")]).denies(ToolEntry(None, "web_fetch"), {}) is not None


class Redact:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def before(self, call: GuardCall) -> dict[str, Any] | None:
        self.log.append(f"redact saw {call.input}")
        return {**call.input, "token": "***"} if "token" in call.input else None

    async def after(self, call: GuardCall, result: types.CallToolResult) -> types.CallToolResult | None:
        self.log.append(f"redact after {_text(result)}")
        return types.CallToolResult(content=[types.TextContent(type="text", text=_text(result).upper())])


class Tag:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def before(self, call: GuardCall) -> dict[str, Any] | None:
        self.log.append(f"tag saw {call.input}")
        return {**call.input, "tagged": True}

    async def after(self, call: GuardCall, result: types.CallToolResult) -> types.CallToolResult | None:
        self.log.append(f"tag after {_text(result)}")
        return None


@pytest.mark.anyio
async def test_guards_run_in_order_each_seeing_the_input_rewritten_before_it() -> None:
    log: list[str] = []
    guards = Guardrails([Redact(log), Tag(log)])
    final = await guards.before(GuardCall(PUSH, {"token": "abc"}, "s"))
    assert final == {"token": "***", "tagged": True}
    assert log == ["redact saw {'token': 'abc'}", "tag saw {'token': '***'}"]


@pytest.mark.anyio
async def test_after_guards_may_replace_the_result_the_script_sees() -> None:
    log: list[str] = []
    guards = Guardrails([Redact(log), Tag(log)])
    result = types.CallToolResult(content=[types.TextContent(type="text", text="pushed")])
    seen = await guards.after(GuardCall(PUSH, {}), result)
    assert seen == types.CallToolResult(content=[types.TextContent(type="text", text="PUSHED")])
    assert log == ["redact after pushed", "tag after PUSHED"]


@pytest.mark.anyio
async def test_a_deny_stops_later_guards_from_running() -> None:
    log: list[str] = []
    guards = Guardrails([RegexGuard(GuardConfig(tool="git:*", input="main")), Tag(log)])
    with pytest.raises(ToolshellError):
        await guards.before(GuardCall(PUSH, {"branch": "main"}))
    assert log == []


@pytest.mark.anyio
async def test_a_guard_that_returns_something_other_than_a_dict_is_a_clear_error() -> None:
    class Broken:
        async def before(self, call: GuardCall) -> Any:
            return ["not", "a", "dict"]

        async def after(self, call: GuardCall, result: types.CallToolResult) -> None:
            return None

    with pytest.raises(TypeError, match="Broken.before returned list; it must return a dict"):
        await Guardrails([Broken()]).before(GuardCall(PUSH, {}))
