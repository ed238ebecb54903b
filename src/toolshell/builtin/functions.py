"""Write a built-in server as a list of functions plus one `execute` coroutine (seed 001, steps 2–4).

The seed's three registration arms (listing, routing, tool map) collapse into one call:

    server = function_server("text_metrics", [Function(...)], execute)

`function_server` builds a lowlevel `mcp.server.Server` whose `tools/list` returns the functions
and whose `tools/call` routes to `execute`. The host connects to it like to any other server
(`mcp.client.Client(server)`). The router keeps the soft-error contract: an unknown tool and an
exception from `execute` both become error *results*, never protocol errors.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext

from toolshell.builtin.hints import HINTS_META_KEY, HintAccumulator, HintSink, hints_from_result
from toolshell.version import __version__

__all__ = [
    "HINTS_META_KEY",
    "SESSION_META_KEY",
    "Execute",
    "Function",
    "FunctionCall",
    "HintAccumulator",
    "HintSink",
    "ToolResult",
    "function_server",
    "hints_from_result",
    "route_call",
    "session_from_meta",
]

logger = logging.getLogger(__name__)

SESSION_META_KEY = "io.toolshell/session"
"""Request `_meta` key under which the host sends the calling session's context (a dict)."""


@dataclass(frozen=True)
class Function:
    """The static definition of one tool: name, description, JSON-Schema parameters, annotations.

    `annotations` uses the wire keys (`{"readOnlyHint": True}`); unknown keys are kept.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    annotations: dict[str, Any] | None = None

    def to_tool(self) -> types.Tool:
        """The MCP `Tool` that `tools/list` shows for this function."""
        annotations = types.ToolAnnotations.model_validate(self.annotations) if self.annotations else None
        return types.Tool(
            name=self.name, description=self.description, input_schema=self.parameters, annotations=annotations
        )


@dataclass(frozen=True)
class ToolResult:
    """What `execute` returns: text for the model, optional structured metadata, and whether it failed."""

    text: str
    metadata: dict[str, Any] | None = None
    is_error: bool = False

    @classmethod
    def success(cls, text: str) -> ToolResult:
        """A successful result carrying `text`."""
        return cls(text)

    @classmethod
    def success_with_metadata(cls, text: str, metadata: dict[str, Any]) -> ToolResult:
        """A successful result; `metadata` becomes the result's `structured_content`, apart from the text."""
        return cls(text, metadata=metadata)

    @classmethod
    def error(cls, text: str) -> ToolResult:
        """A soft failure (bad input, rejected work): the model sees `text` and can retry."""
        return cls(text, is_error=True)

    def to_call_tool_result(self, hints: list[str] | None = None) -> types.CallToolResult:
        """The wire result; `hints` go to `_meta` so they never mix with the tool's output."""
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=self.text)],
            structured_content=self.metadata,
            is_error=self.is_error,
            _meta={HINTS_META_KEY: hints} if hints else None,
        )


@dataclass
class FunctionCall:
    """One invocation as `execute` sees it.

    Attributes:
        tool_name: The tool called.
        parameters: The arguments as sent (the host validates them; `execute` must still cope).
        tool_id: The request id of the call, for correlating logs.
        session: The calling session's context (`role`, `project`, `session_id`, `workdir`, `git`,
            `shell`, `context_epoch`), or None when the client sent none (another host).
        hints: Where to push hints for the model.
    """

    tool_name: str
    parameters: dict[str, Any]
    tool_id: str = ""
    session: dict[str, Any] | None = None
    hints: HintSink = field(default_factory=HintAccumulator)


Execute = Callable[[FunctionCall], Awaitable[ToolResult]]


def session_from_meta(meta: Any) -> dict[str, Any] | None:
    """The session context in a request's `_meta`, or None when absent or not an object."""
    session = meta.get(SESSION_META_KEY) if isinstance(meta, dict) else None
    return session if isinstance(session, dict) else None


async def route_call(server_name: str, names: frozenset[str], execute: Execute, call: FunctionCall) -> ToolResult:
    """Run `execute` for `call` with the seed's routing contract: every failure is an error result."""
    if call.tool_name not in names:
        return ToolResult.error(f"Unknown tool: {call.tool_name}")
    try:
        result = await execute(call)
    except Exception as exc:  # the boundary: a handler bug must reach the model as a result, not a crash
        logger.debug("built-in server %s: tool %s raised", server_name, call.tool_name, exc_info=True)
        return ToolResult.error(f"{server_name} tool failed: {str(exc) or type(exc).__name__}")
    if not isinstance(result, ToolResult):
        return ToolResult.error(
            f"{server_name} tool failed: execute returned {type(result).__name__}, not a ToolResult"
        )
    return result


def function_server(
    name: str, functions: list[Function], execute: Execute, *, instructions: str | None = None
) -> Server[Any]:
    """Build an in-process MCP server from a function list and one execute coroutine.

    Args:
        name: The server name (also the prefix of `<name> tool failed: …` errors).
        functions: The tools it lists, in order. Names must be unique.
        execute: Called with a `FunctionCall` for every call to a listed tool.
        instructions: Optional server instructions shown to clients.

    Returns:
        A lowlevel `mcp.server.Server`; connect with `mcp.client.Client(server)`.

    Raises:
        ValueError: Two functions share a name.
    """
    by_name = {f.name: f for f in functions}
    if len(by_name) != len(functions):
        raise ValueError(f"server {name!r} lists a tool name twice; give each Function its own name")
    tools = [f.to_tool() for f in functions]
    names = frozenset(by_name)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        hints = HintAccumulator()
        call = FunctionCall(
            tool_name=params.name,
            parameters=dict(params.arguments or {}),
            tool_id="" if ctx.request_id is None else str(ctx.request_id),
            session=session_from_meta(ctx.meta),
            hints=hints,
        )
        result = await route_call(name, names, execute, call)
        return result.to_call_tool_result(hints.drain())

    def input_schema(tool: str) -> dict[str, Any] | None:
        f = by_name.get(tool)
        return f.parameters if f else None

    return Server(
        name,
        version=__version__,
        instructions=instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=input_schema,
    )
