"""The Tasks extension's messages (SEP-2663, `io.modelcontextprotocol/tasks`), for both sides:
`toolshell serve` answers them (`frontends.serve.tasks`), upstream connections send them
(`connections.upstream_tasks`).

Field names follow the extension's current text: `taskId`, `status`, `statusMessage`,
`createdAt`, `lastUpdatedAt`, `ttlMs`, `pollIntervalMs`, and by status `inputRequests`, `result`
or `error`; `resultType` is `"task"` on a `CreateTaskResult` and `"complete"` on the rest.
"""

from __future__ import annotations

from typing import Any, Literal

import mcp_types as types
from pydantic import ConfigDict, Field

EXTENSION = "io.modelcontextprotocol/tasks"
OPEN = frozenset({"working", "input_required"})
"""The statuses of a task that is still alive; the rest (`completed`, `failed`, `cancelled`) are final."""


class TaskParams(types.RequestParams):
    """`tasks/get` and `tasks/cancel`."""

    task_id: str = Field(alias="taskId", min_length=1, max_length=200)


class UpdateParams(TaskParams):
    """`tasks/update`: answers to the task's outstanding `inputRequests`, by key."""

    input_responses: dict[str, Any] = Field(alias="inputResponses")


class GetTask(types.Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"  # over HTTP the task id rides in `Mcp-Name`, so a proxy can route it


class UpdateTask(types.Request[UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    name_param = "taskId"


class CancelTask(types.Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    name_param = "taskId"


class Task(types.Result):
    """The fields every task message carries (the extension's `Task`)."""

    model_config = ConfigDict(extra="allow")
    task_id: str = Field(min_length=1, max_length=200)
    status: str
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None
    status_message: str | None = None


class CreatedTask(Task):
    """`CreateTaskResult`: what a `tools/call` may return instead of its `CallToolResult`."""

    result_type: Literal["task"] = "task"


class TaskState(Task):
    """What `tasks/get` returns: the task with its status's payload (a `DetailedTask`)."""

    input_requests: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class Ack(types.Result):
    """The empty acknowledgement of `tasks/update` and `tasks/cancel`."""

    result_type: str | None = None


__all__ = [
    "EXTENSION",
    "OPEN",
    "Ack",
    "CancelTask",
    "CreatedTask",
    "GetTask",
    "TaskParams",
    "Task",
    "TaskState",
    "UpdateParams",
    "UpdateTask",
]
