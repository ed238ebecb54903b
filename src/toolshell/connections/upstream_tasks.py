"""Upstream servers' tasks (the Tasks extension, SEP-2663): a `tools` call answered with a task.

On a 2026-07-28 connection toolshell declares `io.modelcontextprotocol/tasks` on a call when the
server advertised it, or once it refused a plain call with -32021 naming it (that call is sent
again, declaring it, and so are later ones); other requests and other servers see a client
without it, and get plain calls. A `CreateTaskResult` is finished here, through the SDK's claim
hook (`ResultClaim`), in the calling task:

- `tasks/get` is polled at the task's own `pollIntervalMs` (at most half the call's idle timeout
  apart, so the idle timeout can still be told); each answer that shows the task alive is
  progress: the call's idle timer starts over, as a progress notification would make it;
- its `inputRequests` go, each key once (at most `MAX_QUESTIONS` a task), through the
  connection's callbacks (a question to the session's answerer, the timers paused meanwhile),
  and the answers back with `tasks/update`;
- a call that ends before the task did (the script cancelled or timed out, the call's own
  timeout, a question toolshell cannot answer) sends `tasks/cancel`, from a task of its own and
  bounded (`CANCEL_SECONDS`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.client import ClaimContext, Client, ClientExtension, ResultClaim
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict, TypeAdapter, ValidationError

from toolshell.connections.elicitation import CURRENT_CALL, InFlightCall
from toolshell.connections.runner import spawn
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.tasks_wire import (
    EXTENSION,
    OPEN,
    Ack,
    CancelTask,
    CreatedTask,
    GetTask,
    TaskParams,
    TaskState,
    UpdateParams,
    UpdateTask,
)

logger = logging.getLogger(__name__)

DEFAULT_POLL_SECONDS = 1.0
"""How often a task that names no `pollIntervalMs` is polled."""
MIN_POLL_SECONDS = 0.05
"""A server asking for faster polls than this is polled this often (no busy loop)."""
MAX_QUESTIONS = 64
"""Distinct `inputRequests` keys one task may ask (a server inventing keys would ask forever)."""
CANCEL_SECONDS = 5.0
"""How long `tasks/cancel` may take when a call ends early: it is sent, not waited for long."""
MAX_POLL_MS = 3_600_000
"""A `pollIntervalMs` past this (an hour) is taken as this before any arithmetic (a hostile
10**400 would overflow a float); the call's idle timeout bounds the wait further."""

_REQUEST: TypeAdapter[types.InputRequest] = TypeAdapter(types.InputRequest)


class UpstreamTasks(ClientExtension):
    """The extension's client half for one server, given to every `mcp.client.Client` opened to it
    (`Client(extensions=[...])`); it remembers that the server refused a plain call for want of it."""

    identifier = EXTENSION

    def __init__(self, server: str) -> None:
        self.server = server
        self.required = False
        """The server refused a plain call with -32021 naming the extension: later calls declare it."""

    def claims(self) -> Sequence[ResultClaim[Any]]:
        # Claimed loosely and checked in `_resolve`: a malformed task with a task id is cancelled.
        return [ResultClaim(result_type="task", model=_AnyTask, resolve=self._resolve)]

    def declares(self, client: Client) -> bool:
        """Whether a call to `client` declares the extension: on a 2026-07-28 connection (the only
        one where the SDK takes a task), to a server that advertised it or asked for it."""
        if not _modern(client.protocol_version):
            return False
        return self.required or EXTENSION in (client.server_capabilities.extensions or {})

    async def call(
        self, client: Client, call: InFlightCall, send: Callable[[], Awaitable[types.CallToolResult]]
    ) -> types.CallToolResult:
        """`send` the call; a server that refuses a plain call with -32021 naming the extension (it
        runs the tool only as a task) gets it again, declaring the extension."""
        call.tasks = self.declares(client)
        try:
            return await send()
        except MCPError as err:
            if call.tasks or not _modern(client.protocol_version) or not requires_tasks(err):
                raise
        self.required = call.tasks = True
        return await send()

    async def _resolve(self, claimed: _AnyTask, ctx: ClaimContext) -> types.CallToolResult:
        call = CURRENT_CALL.get()
        if call is None or not call.tasks:  # the extension forbids it: a client that did not declare gets none
            raise ToolshellError(
                ErrorCode.TOOL_ERROR,
                f"server {self.server!r} answered {ctx.tool_name!r} with a task, which this call did not offer"
                " (it does not advertise the Tasks extension); the task is not followed",
            )
        try:
            created = CreatedTask.model_validate(claimed.model_dump(by_alias=True))
        except ValidationError as err:
            task_id = claimed.model_extra.get("taskId") if claimed.model_extra else None
            usable = isinstance(task_id, str) and 0 < len(task_id) <= 200
            if usable:  # the server runs it: it is told the call will not follow it
                await _cancel_soon(ctx.session, str(task_id), call, self.server)
            field = ".".join(str(p) for p in err.errors()[0]["loc"]) if err.errors() else "?"
            raise ToolshellError(
                ErrorCode.TOOL_ERROR,
                f"server {self.server!r} answered {ctx.tool_name!r} with a malformed task ({field} is not valid);"
                + (" its task is cancelled" if usable else " the task is not followed"),
            ) from None
        return await follow(ctx.session, created, call, self.server)


class _AnyTask(types.Result):
    """A `CreateTaskResult` as it came, any fields (`UpstreamTasks._resolve` checks it as `CreatedTask`)."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"


def requires_tasks(err: MCPError) -> bool:
    """-32021 (missing required client capability) whose data names the Tasks extension."""
    if err.code != types.MISSING_REQUIRED_CLIENT_CAPABILITY:
        return False
    try:
        data = types.MissingRequiredClientCapabilityErrorData.model_validate(err.error.data)
    except ValidationError:
        return False
    return EXTENSION in (data.required_capabilities.extensions or {})


async def follow(session: ClientSession, created: CreatedTask, call: InFlightCall, server: str) -> types.CallToolResult:
    """Poll the task to its end; its `CallToolResult`, or an error saying how it ended."""
    task_id = created.task_id
    answered: set[str] = set()
    interval = created.poll_interval_ms
    finished = False
    try:
        while True:
            await anyio.sleep(_wait(interval, call))
            state = await session.send_request(GetTask(params=_task(task_id)), TaskState)
            if state.status not in OPEN:
                finished = True
                return _ended(state, server)
            call.timer.touch()  # the task is alive: that is progress
            interval = state.poll_interval_ms
            if state.status == "input_required":
                await _answer(session, task_id, state.input_requests or {}, answered, server)
    finally:
        if not finished:
            await _cancel_soon(session, task_id, call, server)


def _ended(state: TaskState, server: str) -> types.CallToolResult:
    """A finished task: its result, the JSON-RPC error it failed with, or `unavailable` if cancelled."""
    if state.status == "completed":
        return types.CallToolResult.model_validate(state.result or {"content": []})
    if state.status == "failed":
        error = state.error or {}
        code = error.get("code")
        message = error.get("message") or state.status_message or "the task failed"
        raise MCPError(code if isinstance(code, int) else types.INTERNAL_ERROR, str(message), error.get("data"))
    why = f": {state.status_message}" if state.status_message else ""
    if state.status == "cancelled":
        raise ToolshellError(ErrorCode.UNAVAILABLE, f"server {server!r} cancelled the task{why}", retryable=True)
    raise MCPError(types.INTERNAL_ERROR, f"server {server!r} sent a task with an unknown status {state.status!r}")


async def _answer(
    session: ClientSession, task_id: str, requests: dict[str, Any], answered: set[str], server: str
) -> None:
    """Answer the keys not answered yet (a task shows its open requests on every poll)."""
    responses: dict[str, Any] = {}
    for key, raw in requests.items():
        if key in answered:
            continue
        if len(answered) >= MAX_QUESTIONS:
            raise ToolshellError(
                ErrorCode.TOOL_ERROR,
                f"server {server!r} asked more than {MAX_QUESTIONS} questions in one task; its task is cancelled",
            )
        answered.add(key)
        try:
            request = _REQUEST.validate_python(raw)
        except ValidationError:
            raise ToolshellError(
                ErrorCode.TOOL_ERROR,
                f"server {server!r} sent a task question (inputRequests[{key[:60]!r}]) that is not an elicitation,"
                " sampling or roots request; its task is cancelled",
            ) from None
        context = ClientRequestContext(
            session=session, request_id=key, meta=request.params.meta if request.params else None
        )
        response = await session.dispatch_input_request(context, request)
        if isinstance(response, types.ErrorData):
            raise MCPError.from_error_data(response)
        responses[key] = response.model_dump(by_alias=True, mode="json", exclude_none=True)
    if responses:
        params = UpdateParams.model_validate({"taskId": task_id, "inputResponses": responses})
        await session.send_request(UpdateTask(params=params), Ack)


async def _cancel_soon(session: ClientSession, task_id: str, call: InFlightCall, server: str) -> None:
    """Tell the server the call ended without waiting for its task (cooperative: an ack is all).

    The request is sent from a task of its own, and waited for here only while nothing cancels
    this one again: bashkit may cancel a builtin's task more than once, and no anyio shield holds
    off a cancel that is not anyio's, while the request must go out whatever happens here."""
    sent = anyio.Event()

    async def send() -> None:
        CURRENT_CALL.set(call)  # its requests declare the extension as the call's did (`session_meta`)
        with anyio.move_on_after(CANCEL_SECONDS):
            try:
                await session.send_request(CancelTask(params=_task(task_id)), Ack)
            except Exception as exc:  # noqa: BLE001 - the call's own outcome is what the script sees
                logger.info("server %r: tasks/cancel of a task failed: %s", server, exc)
        sent.set()

    spawn(send)
    with anyio.CancelScope(shield=True):
        await sent.wait()


def _task(task_id: str) -> TaskParams:
    return TaskParams.model_validate({"taskId": task_id})


def _wait(interval_ms: int | None, call: InFlightCall) -> float:
    seconds = DEFAULT_POLL_SECONDS if interval_ms is None else min(max(interval_ms, 0), MAX_POLL_MS) / 1000
    return max(min(seconds, call.timer.idle / 2), MIN_POLL_SECONDS)


def _modern(protocol_version: str | None) -> bool:
    return protocol_version in MODERN_PROTOCOL_VERSIONS


__all__ = ["UpstreamTasks", "follow", "requires_tasks"]
