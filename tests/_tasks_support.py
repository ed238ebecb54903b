"""A Tasks client written on the SDK's extension hooks (`ClientExtension`, `ResultClaim`) and the
wire models of `toolshell.tasks_wire`: it declares `io.modelcontextprotocol/tasks`, resolves a
`CreateTaskResult` by polling `tasks/get` at the task's `pollIntervalMs`, answers each
`inputRequests` key once through `tasks/update`, and gives tests the raw requests (`get_task`,
`update_task`, `cancel_task`) to send from any client."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import mcp_types as types
from mcp.client import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession

from toolshell.tasks_wire import (
    EXTENSION,
    Ack,
    CancelTask,
    CreatedTask,
    GetTask,
    TaskParams,
    TaskState,
    UpdateParams,
    UpdateTask,
)


async def get_task(session: ClientSession, task_id: str) -> TaskState:
    return await session.send_request(GetTask(params=TaskParams(task_id=task_id)), TaskState)


async def update_task(session: ClientSession, task_id: str, responses: dict[str, Any]) -> Ack:
    params = UpdateParams(task_id=task_id, input_responses=responses)
    return await session.send_request(UpdateTask(params=params), Ack)


async def cancel_task(session: ClientSession, task_id: str) -> Ack:
    return await session.send_request(CancelTask(params=TaskParams(task_id=task_id)), Ack)


Answer = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
"""Answers one input request (its key and the request) with an elicitation result."""


async def until_status(session: ClientSession, task_id: str, *statuses: str, seconds: float = 60) -> TaskState:
    """Poll `tasks/get` at the task's own `pollIntervalMs` until it shows one of `statuses`."""
    with anyio.fail_after(seconds):
        while (state := await get_task(session, task_id)).status not in statuses:  # noqa: ASYNC110  (polling is the protocol)
            await anyio.sleep((state.poll_interval_ms or 1000) / 1000)
    return state


class TasksClient(ClientExtension):
    """The extension's client half: a claimed task is polled to its end.

    Args:
        answer: answers input requests (None: the task's questions are never answered).
    """

    identifier = EXTENSION

    def __init__(self, answer: Answer | None = None) -> None:
        self.answer = answer
        self.created: list[CreatedTask] = []
        self.seen: list[TaskState] = []

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self._resolve)]

    async def _resolve(self, created: CreatedTask, ctx: ClaimContext) -> types.CallToolResult:
        self.created.append(created)
        answered: set[str] = set()
        while True:
            state = await get_task(ctx.session, created.task_id)
            self.seen.append(state)
            if state.status == "completed":
                return types.CallToolResult.model_validate(state.result)
            if state.status in ("failed", "cancelled"):
                raise RuntimeError(f"task {state.status}: {state.status_message} {state.error}")
            fresh = {k: v for k, v in (state.input_requests or {}).items() if k not in answered}
            if fresh and self.answer is not None:  # each key once, however often it is shown
                answered |= set(fresh)
                responses = {key: await self.answer(key, request) for key, request in fresh.items()}
                await update_task(ctx.session, created.task_id, responses)
            await anyio.sleep((state.poll_interval_ms or 1000) / 1000)  # the server's pace, as the SEP asks


__all__ = ["EXTENSION", "CreatedTask", "TasksClient", "cancel_task", "get_task", "until_status", "update_task"]
