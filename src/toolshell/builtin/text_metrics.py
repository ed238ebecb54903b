"""`text_metrics`: the seed's example built-in server, one tool that counts Unicode scalar values."""

from __future__ import annotations

from typing import Any

from mcp.server import Server

from toolshell.builtin.functions import Function, FunctionCall, ToolResult, function_server
from toolshell.builtin.host import HostHandle

SERVER = "text_metrics"

FUNCTIONS = [
    Function(
        name="text_length",
        description="Count Unicode scalar values in a non-empty string.",
        parameters={
            "type": "object",
            "properties": {"text": {"type": "string", "description": "The text to count", "minLength": 1}},
            "required": ["text"],
            "additionalProperties": False,
        },
        annotations={"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False},
    )
]

HINT = "Use text_length when you need a Unicode scalar count of supplied text."


async def execute(call: FunctionCall) -> ToolResult:
    """Route one call; bad input is a soft error the model can correct."""
    if call.tool_name != "text_length":
        return ToolResult.error(f"Unknown tool: {call.tool_name}")
    text = call.parameters.get("text")
    if not isinstance(text, str) or not text:
        return ToolResult.error("text must be a non-empty string")
    call.hints.push(HINT)
    # A Python str is a sequence of code points, the same unit as Rust's `chars()`.
    count = len(text)
    return ToolResult.success_with_metadata(str(count), {"unit": "unicode_scalar", "count": count})


def create(host: HostHandle | None = None) -> Server[Any]:
    """The `text_metrics` server (it needs nothing from the host)."""
    return function_server(SERVER, FUNCTIONS, execute)
