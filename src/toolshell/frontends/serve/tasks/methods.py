"""`tasks/get`, `tasks/update` and `tasks/cancel`, answered by any worker from the store.

Every request is checked the same way before anything is read: the client declared the
extension (else -32021), over HTTP its `Mcp-Name` header is the task id (else -32020), and the
task is the caller's: a task id is a bearer capability bound to the identity that created it, so
another caller's id, an unknown one and an expired one all get the same -32602. There is no
`tasks/list`. An open task whose owner has been silent for three heartbeats is taken over by the
worker that reads it (run again by replay, `TaskKeeper.resume`); one that cannot be resumed is
judged `failed` on the spot (its worker stopped), so no client polls a dead task forever.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError

from toolshell.config.serve import ServeTasksConfig
from toolshell.errors import ToolshellError
from toolshell.frontends.serve.tasks.wire import (
    TaskParams,
    UpdateParams,
    detailed,
    not_found,
    require_declared,
    require_name_header,
)
from toolshell.store.tasks import PARKED, TaskRow, TaskRows, id_hash

_T = TypeVar("_T")
Caller = Callable[[ServerRequestContext[Any]], str | None]
TakeOver = Callable[[ServerRequestContext[Any], TaskRow], Awaitable[bool | str | None]]
"""Claims a task whose owner went silent and runs it here (`Tasks.take_over`); None: not resumable
(a string: not resumed, saying why)."""
STOPPED = "the worker running this task stopped (no heartbeat); what the script did before stays done"
NOT_REPLAYED = "the worker running this task stopped (no heartbeat), and it is not run again by replay: {why}"
CANCELLED_PARKED = (
    "cancelled by tasks/cancel while it waited, parked, for a person: the script stopped at the question; "
    "what it had done stays done"
)
MAX_RESPONSES = 64
"""Answers one `tasks/update` may carry (a task asks one question at a time, usually)."""


class TaskMethods:
    """The request handlers of the extension's methods.

    Args:
        rows: the task tables of the shared store.
        config: `[serve.tasks]`.
        heartbeat_seconds: `[serve] heartbeat_seconds`: three missed beats mean the owner stopped.
        caller: the identity a request authenticated as (None over stdio and `--no-auth`).
        take_over: runs a task whose owner went silent again here (None: such a task fails).
    """

    def __init__(
        self,
        rows: TaskRows,
        config: ServeTasksConfig,
        heartbeat_seconds: float,
        caller: Caller,
        take_over: TakeOver | None = None,
    ) -> None:
        self.rows, self.config, self.caller, self.take_over = rows, config, caller, take_over
        self.stale_seconds = 3 * heartbeat_seconds

    async def get(self, ctx: ServerRequestContext[Any], params: TaskParams) -> dict[str, Any]:
        return detailed(params.task_id, await self._find(ctx, params.task_id), self.config.poll_milliseconds)

    async def update(self, ctx: ServerRequestContext[Any], params: UpdateParams) -> dict[str, Any]:
        """Record the answers; the owner hands them to the script (any key not asked now is ignored)."""
        if len(params.input_responses) > MAX_RESPONSES:
            raise MCPError(types.INVALID_PARAMS, f"inputResponses holds at most {MAX_RESPONSES} answers")
        responses = {key: _elicit_result(key, value) for key, value in params.input_responses.items()}
        row = await self._find(ctx, params.task_id)
        await _off_loop(lambda: self.rows.answer(row.id_hash, responses))
        take_over = self.take_over
        if row.parked and take_over is not None:  # nobody runs it: this worker resumes it with the answer
            await _taking(take_over(ctx, row))
        return {"resultType": "complete"}

    async def cancel(self, ctx: ServerRequestContext[Any], params: TaskParams) -> dict[str, Any]:
        """Ask the owner to stop the script; acknowledged at once, `cancelled` once it stopped."""
        row = await self._find(ctx, params.task_id)
        if row.parked:  # nobody runs it: it ends here
            ended = await _off_loop(
                lambda: self.rows.set_state(row.id_hash, PARKED, status="cancelled", status_message=CANCELLED_PARKED)
            )
            if not ended:  # an answer resumed it on another worker meanwhile: that run is asked to stop
                await _off_loop(lambda: self.rows.ask_cancel(row.id_hash))
        elif not row.finished:
            await _off_loop(lambda: self.rows.ask_cancel(row.id_hash))
            again = await _off_loop(lambda: self.rows.get(row.id_hash))
            if again is not None and again.parked:  # its owner parked it meanwhile: nobody would see the ask
                await _off_loop(
                    lambda: self.rows.set_state(
                        row.id_hash, PARKED, status="cancelled", status_message=CANCELLED_PARKED
                    )
                )
        return {"resultType": "complete"}

    async def _find(self, ctx: ServerRequestContext[Any], task_id: str) -> TaskRow:
        """The caller's task, taken over first when its owner went silent (its run starts here).
        The store is read from worker threads only."""
        require_declared(ctx)
        require_name_header(ctx, task_id)
        row = await _off_loop(lambda: self.rows.get(id_hash(task_id)))
        if row is None or row.caller != self.caller(ctx):
            raise not_found()
        now = time.time()
        if row.expired(now):
            await _off_loop(lambda: self.rows.delete(row.id_hash))
            raise not_found("Task has expired")
        take_over = self.take_over
        if row.parked and take_over is not None and isinstance(await _taking(take_over(ctx, row)), bool):
            return await _off_loop(lambda: self.rows.get(row.id_hash)) or row  # answered before, not resumed yet
        if row.finished or row.parked or now - row.beat <= self.stale_seconds:
            return row
        taken = None if take_over is None else await _taking(take_over(ctx, row))
        if isinstance(taken, bool):
            return await _off_loop(lambda: self.rows.get(row.id_hash)) or row  # run again, here or on the winner
        message = STOPPED if taken is None else NOT_REPLAYED.format(why=taken)
        error = {"code": types.INTERNAL_ERROR, "message": message}
        await _off_loop(lambda: self.rows.set_state(row.id_hash, status="failed", status_message=message, error=error))
        return await _off_loop(lambda: self.rows.get(row.id_hash)) or row


def _elicit_result(key: str, value: Any) -> dict[str, Any]:
    """An answer as the elicitation result it must be, or -32602 saying what it should look like."""
    try:
        return types.ElicitResult.model_validate(value).model_dump(by_alias=True, mode="json", exclude_none=True)
    except ValueError:
        raise MCPError(
            types.INVALID_PARAMS,
            f'inputResponses[{key!r}] is not an elicitation result; send {{"action": "accept", "content": {{…}}}},'
            ' or "decline" / "cancel"',
        ) from None


async def _off_loop(step: Callable[[], _T]) -> _T:
    """`_store(step)` in a worker thread: a store that hangs holds that thread, not the event loop."""
    return await anyio.to_thread.run_sync(_store, step)


async def _taking(take_over: Awaitable[_T]) -> _T:
    """A takeover (its store steps in a worker thread); a store that fails is one internal error."""
    try:
        return await take_over
    except ToolshellError as err:
        raise _failed(err) from None


def _store(read: Callable[[], _T]) -> _T:
    """A store step; a store that fails is one internal error naming it."""
    try:
        return read()
    except ToolshellError as err:
        raise _failed(err) from None


def _failed(err: ToolshellError) -> MCPError:
    return MCPError(types.INTERNAL_ERROR, f"the task store failed: {err}")


__all__ = ["TaskMethods"]
