"""The Tasks extension on the wire (SEP-2663, `io.modelcontextprotocol/tasks`), as `serve` answers
it: the task objects `tools/call`, `tasks/get` and `notifications/tasks` carry, and the errors.
The request params both sides share are in `toolshell.tasks_wire`.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value

from toolshell.store.tasks import TaskRow
from toolshell.tasks_wire import EXTENSION, TaskParams, UpdateParams

SLOW_AFTER_SECONDS = 60.0
"""A task older than this (or waiting for a person) is polled five times less often."""
MAX_POLL_MILLISECONDS = 30_000


def declared(ctx: ServerRequestContext[Any]) -> bool:
    """True when the client declared the extension: on this request (2026-07-28), at the handshake
    (older; under `experimental`, the one place the 2025-11-25 capabilities keep it)."""
    caps = ctx.session.client_capabilities
    return caps is not None and (EXTENSION in (caps.extensions or {}) or EXTENSION in (caps.experimental or {}))


def require_declared(ctx: ServerRequestContext[Any]) -> None:
    """`tasks/*` from a client that did not declare the extension: -32021, naming it."""
    if not declared(ctx):
        data = types.MissingRequiredClientCapabilityErrorData(
            required_capabilities=types.ClientCapabilities(extensions={EXTENSION: {}})
        )
        raise MCPError(
            types.MISSING_REQUIRED_CLIENT_CAPABILITY,
            f"Missing required client capability: declare the {EXTENSION} extension in this request's capabilities",
            data.model_dump(by_alias=True, mode="json", exclude_none=True),
        )


def require_name_header(ctx: ServerRequestContext[Any], task_id: str) -> None:
    """Over HTTP a `tasks/*` request names its task in `Mcp-Name` (so a proxy can route it)."""
    headers = getattr(ctx.request, "headers", None)
    if headers is None:
        return  # stdio, in-process: no headers to route by
    if decode_header_value(headers.get(MCP_NAME_HEADER)) != task_id:
        raise MCPError(
            types.HEADER_MISMATCH,
            "the Mcp-Name header must carry the task id (params.taskId) on tasks/get, tasks/update and tasks/cancel",
        )


def not_found(why: str = "Task not found") -> MCPError:
    """An unknown, expired or another caller's task: the same answer, so none is revealed."""
    return MCPError(types.INVALID_PARAMS, f"Failed to retrieve task: {why}")


def task_object(task_id: str, row: TaskRow, base_poll_ms: int, now: float | None = None) -> dict[str, Any]:
    """The `Task` fields with its status's payload (a `DetailedTask`), without `resultType`."""
    now = time.time() if now is None else now
    task: dict[str, Any] = {
        "taskId": task_id,
        "status": row.status,
        "createdAt": _iso(row.created_at),
        "lastUpdatedAt": _iso(row.updated_at),
        "ttlMs": round(((row.finished_at or now) - row.created_at + row.keep_seconds) * 1000),
    }
    if not row.finished:
        task["pollIntervalMs"] = poll_interval(row, base_poll_ms, now)
    if row.status_message:
        task["statusMessage"] = row.status_message
    if row.status == "input_required":
        task["inputRequests"] = row.input_requests or {}
    elif row.status == "completed":
        task["result"] = row.result or {"content": []}
    elif row.status == "failed":
        task["error"] = row.error or {"code": types.INTERNAL_ERROR, "message": "the task failed"}
    return task


def poll_interval(row: TaskRow, base_ms: int, now: float) -> int:
    """How often to poll: `base_ms`, five times that for an old task or one waiting for a person."""
    slow = row.status == "input_required" or now - row.created_at > SLOW_AFTER_SECONDS
    return min(base_ms * 5, MAX_POLL_MILLISECONDS) if slow else base_ms


def created(task_id: str, row: TaskRow, base_poll_ms: int) -> dict[str, Any]:
    """The `CreateTaskResult` a `tools/call` returns instead of its `CallToolResult`."""
    return {"resultType": "task", **task_object(task_id, row, base_poll_ms)}


def detailed(task_id: str, row: TaskRow, base_poll_ms: int) -> dict[str, Any]:
    """What `tasks/get` returns."""
    return {"resultType": "complete", **task_object(task_id, row, base_poll_ms)}


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


__all__ = [
    "EXTENSION",
    "TaskParams",
    "UpdateParams",
    "created",
    "declared",
    "detailed",
    "not_found",
    "poll_interval",
    "require_declared",
    "require_name_header",
    "task_object",
]
