"""The seed's example built-in server `text_metrics`, driven through an in-process MCP client."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest
from mcp.client import Client

from toolshell.builtin.hints import hints_from_result
from toolshell.builtin.text_metrics import HINT, create


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_text_length_is_listed_with_its_schema_and_read_only_annotation() -> None:
    async with Client(create()) as client:
        listed = await client.list_tools()
    assert [t.name for t in listed.tools] == ["text_length"]
    tool = listed.tools[0]
    assert tool.description == "Count Unicode scalar values in a non-empty string."
    assert tool.input_schema == {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "The text to count", "minLength": 1}},
        "required": ["text"],
        "additionalProperties": False,
    }
    assert tool.annotations is not None and tool.annotations.read_only_hint is True


@pytest.mark.anyio
async def test_counts_unicode_scalars() -> None:
    async with Client(create()) as client:
        result = await client.call_tool("text_length", {"text": "aé"})
    assert not result.is_error
    assert result.content == [types.TextContent(type="text", text="2")]
    assert result.structured_content == {"unit": "unicode_scalar", "count": 2}


@pytest.mark.anyio
async def test_counts_code_points_not_bytes_or_graphemes() -> None:
    async with Client(create()) as client:
        result = await client.call_tool("text_length", {"text": "e\u0301🙂"})
    assert result.structured_content == {"unit": "unicode_scalar", "count": 3}


@pytest.mark.anyio
@pytest.mark.parametrize("parameters", [{}, {"text": ""}, {"text": 42}])
async def test_invalid_text_is_a_tool_error(parameters: dict[str, Any]) -> None:
    async with Client(create()) as client:
        result = await client.call_tool("text_length", parameters)
    assert result.is_error
    assert result.content == [types.TextContent(type="text", text="text must be a non-empty string")]
    assert result.structured_content is None


@pytest.mark.anyio
async def test_a_count_pushes_the_usage_hint_once_beside_the_result() -> None:
    async with Client(create()) as client:
        result = await client.call_tool("text_length", {"text": "hello"})
    assert result.content == [types.TextContent(type="text", text="5")]
    assert hints_from_result(result) == [HINT]
