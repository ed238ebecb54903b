"""The function-server router: listing, soft errors, hints in `_meta`, session context in `_meta`."""

from __future__ import annotations

from typing import Any, cast

import mcp_types as types
import pytest
from mcp.client import Client

from toolshell.builtin.functions import SESSION_META_KEY, Function, FunctionCall, ToolResult, function_server
from toolshell.builtin.hints import HINTS_META_KEY, HintAccumulator, hints_from_result
from toolshell.connections.base import SessionContext

ECHO = Function("echo", "Echo text back.", {"type": "object", "properties": {"text": {"type": "string"}}})


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def text_of(result: types.CallToolResult) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


@pytest.mark.anyio
async def test_an_exception_from_execute_becomes_an_error_result_naming_the_server() -> None:
    async def execute(call: FunctionCall) -> ToolResult:
        raise ValueError("disk on fire")

    async with Client(function_server("demo", [ECHO], execute)) as client:
        result = await client.call_tool("echo", {"text": "x"})
    assert result.is_error
    assert text_of(result) == "demo tool failed: disk on fire"


@pytest.mark.anyio
async def test_an_exception_without_a_message_is_named_by_its_type() -> None:
    async def execute(call: FunctionCall) -> ToolResult:
        raise RuntimeError

    async with Client(function_server("demo", [ECHO], execute)) as client:
        result = await client.call_tool("echo", {})
    assert (result.is_error, text_of(result)) == (True, "demo tool failed: RuntimeError")


@pytest.mark.anyio
async def test_execute_returning_something_else_than_a_tool_result_is_an_error_result() -> None:
    async def execute(call: FunctionCall) -> Any:
        return "plain string"

    async with Client(function_server("demo", [ECHO], execute)) as client:
        result = await client.call_tool("echo", {})
    assert (result.is_error, text_of(result)) == (True, "demo tool failed: execute returned str, not a ToolResult")


@pytest.mark.anyio
async def test_an_unknown_tool_is_an_error_result_and_never_reaches_execute() -> None:
    calls: list[FunctionCall] = []

    async def execute(call: FunctionCall) -> ToolResult:
        calls.append(call)
        return ToolResult.success("reached")

    async with Client(function_server("demo", [ECHO], execute)) as client:
        result = await client.call_tool("nope", {})
    assert (result.is_error, text_of(result)) == (True, "Unknown tool: nope")
    assert calls == []


@pytest.mark.anyio
async def test_execute_sees_the_call_as_sent_without_schema_validation() -> None:
    seen: list[FunctionCall] = []

    async def execute(call: FunctionCall) -> ToolResult:
        seen.append(call)
        return ToolResult.success("ok")

    async with Client(function_server("demo", [ECHO], execute)) as client:
        await client.call_tool("echo", {"text": 42, "extra": [1]})
    assert (seen[0].tool_name, seen[0].parameters, seen[0].session) == ("echo", {"text": 42, "extra": [1]}, None)
    assert seen[0].tool_id != ""


@pytest.mark.anyio
async def test_metadata_is_structured_content_and_the_text_stays_the_text() -> None:
    async def execute(call: FunctionCall) -> ToolResult:
        return ToolResult.success_with_metadata("7", {"count": 7})

    async with Client(function_server("demo", [ECHO], execute)) as client:
        result = await client.call_tool("echo", {})
    assert (text_of(result), result.structured_content, result.is_error) == ("7", {"count": 7}, False)


@pytest.mark.anyio
async def test_list_tools_shows_each_function_with_schema_and_annotations() -> None:
    fn = Function(
        "probe", "Probe.", {"type": "object", "properties": {}}, {"readOnlyHint": True, "openWorldHint": True}
    )

    async def execute(call: FunctionCall) -> ToolResult:
        return ToolResult.success("")

    async with Client(function_server("demo", [ECHO, fn], execute, instructions="Use probe.")) as client:
        listed = await client.list_tools()
    assert [(t.name, t.description, t.input_schema) for t in listed.tools] == [
        ("echo", "Echo text back.", ECHO.parameters),
        ("probe", "Probe.", {"type": "object", "properties": {}}),
    ]
    assert listed.tools[0].annotations is None
    assert listed.tools[1].annotations == types.ToolAnnotations(read_only_hint=True, open_world_hint=True)


def test_two_functions_with_one_name_are_refused() -> None:
    async def execute(call: FunctionCall) -> ToolResult:
        return ToolResult.success("")

    with pytest.raises(ValueError, match="lists a tool name twice"):
        function_server("demo", [ECHO, ECHO], execute)


# --- hints ---------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_hints_travel_in_result_meta_deduplicated_and_in_push_order() -> None:
    async def execute(call: FunctionCall) -> ToolResult:
        for hint in ("prefer b", "prefer a", "prefer b", "  ", "prefer a"):
            call.hints.push(hint)
        return ToolResult.success("done")

    async with Client(function_server("demo", [ECHO], execute)) as client:
        result = await client.call_tool("echo", {})
    assert text_of(result) == "done"
    assert result.meta is not None and result.meta[HINTS_META_KEY] == ["prefer b", "prefer a"]
    assert hints_from_result(result) == ["prefer b", "prefer a"]


@pytest.mark.anyio
async def test_hints_pushed_before_a_failure_still_reach_the_host() -> None:
    async def execute(call: FunctionCall) -> ToolResult:
        call.hints.push("check the input first")
        raise KeyError("text")

    async with Client(function_server("demo", [ECHO], execute)) as client:
        result = await client.call_tool("echo", {})
    assert result.is_error and hints_from_result(result) == ["check the input first"]


@pytest.mark.anyio
async def test_a_result_without_hints_carries_no_hint_key() -> None:
    async def execute(call: FunctionCall) -> ToolResult:
        return ToolResult.success("quiet")

    async with Client(function_server("demo", [ECHO], execute)) as client:
        result = await client.call_tool("echo", {})
    assert HINTS_META_KEY not in (result.meta or {})
    assert hints_from_result(result) == []


def test_hints_from_result_ignores_malformed_hint_meta() -> None:
    result = types.CallToolResult(content=[], _meta={HINTS_META_KEY: ["ok", 3, "", None]})
    assert hints_from_result(result) == ["ok"]
    assert hints_from_result(types.CallToolResult(content=[], _meta={HINTS_META_KEY: "not a list"})) == []


def test_hint_accumulator_deduplicates_across_a_round_and_drains_once() -> None:
    acc = HintAccumulator()
    acc.push("use jq")
    acc.extend(["use grep", "use jq"])
    acc.push("use jq")
    assert len(acc) == 2
    assert acc.drain() == ["use jq", "use grep"]
    assert acc.drain() == []
    acc.push("use jq")  # a new round may give the same hint again
    assert acc.drain() == ["use jq"]


# --- session context -----------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_session_context_sent_in_meta_reaches_call_session(mode: str) -> None:
    seen: list[dict[str, Any] | None] = []

    async def execute(call: FunctionCall) -> ToolResult:
        seen.append(call.session)
        return ToolResult.success("ok")

    ctx = SessionContext(session_id="s-1", role="developer", project="abc123", workdir="/w", git=True, context_epoch=3)
    sent = cast(types.RequestParamsMeta, {SESSION_META_KEY: ctx.to_json()})
    malformed = cast(types.RequestParamsMeta, {SESSION_META_KEY: "not an object"})
    async with Client(function_server("demo", [ECHO], execute), mode=mode) as client:
        await client.call_tool("echo", {}, meta=sent)
        await client.call_tool("echo", {})
        await client.call_tool("echo", {}, meta=malformed)
    assert seen == [ctx.to_json(), None, None]
