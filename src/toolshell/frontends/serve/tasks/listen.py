"""`subscriptions/listen` for 2026-07-28 clients: `tools/list_changed` and `notifications/tasks`.

A 2026-07-28 client keeps no session open, so what the server wants to say outside a request
goes on a stream the client opens with `subscriptions/listen` (the request's response is the
stream). The stream is acknowledged first (`notifications/subscriptions/acknowledged`, naming
what it honours), then carries, each frame tagged with the listen request's id:

- `notifications/tools/list_changed` when asked (`toolsListChanged`): the same moments
  handshake-era sessions hear it (`list_notifier`: a server settled, so the `bash` description
  changed);
- `notifications/tasks` for the `taskIds` asked for that are the caller's own (others' are
  left out of the acknowledgement, as unknown ones are), each a whole task as `tasks/get` would
  return it, whenever its row changes on any worker (store notifications). A client that asks
  for task notifications without declaring the extension gets -32021.

The stream ends when the client goes; there is no replay (a client that listens again re-reads).
"""

from __future__ import annotations

import logging
from typing import Any, Literal

import anyio
import anyio.abc
import mcp_types as types
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY

from toolshell.frontends.serve.list_notifier import ListNotifier
from toolshell.frontends.serve.tasks.methods import Caller
from toolshell.frontends.serve.tasks.wire import require_declared, task_object
from toolshell.store.tasks import CHANNEL, TaskRows, id_hash

logger = logging.getLogger(__name__)

MAX_TASK_IDS = 100
"""Tasks one stream may follow."""
BACKLOG = 256
"""Frames waiting for a slow client; past it, the stream ends (the client listens again)."""


class TaskStatusParams(types.NotificationParams):
    """`notifications/tasks`: a whole task (its fields kept as `task_object` spells them)."""

    model_config = types.NotificationParams.model_config | {"extra": "allow"}


class TaskStatusNotification(types.Notification[TaskStatusParams, Literal["notifications/tasks"]]):
    method: Literal["notifications/tasks"] = "notifications/tasks"


class _Stream:
    """What the list notifier tells a listen stream (it takes the place of a session)."""

    def __init__(self, send: MemoryObjectSendStream[str]) -> None:
        self.send = send

    async def send_tool_list_changed(self) -> None:
        self.send.send_nowait("tools")  # a closed or full stream raises: the notifier forgets it


class Listener:
    """The `subscriptions/listen` handler.

    Args:
        notifier: the sessions told of list changes (None: no list changes to tell).
        rows: the task tables of the shared store.
        poll_milliseconds: `[serve.tasks] poll_milliseconds` (the tasks' `pollIntervalMs`).
        caller: the identity a request authenticated as.
    """

    def __init__(self, notifier: ListNotifier | None, rows: TaskRows, poll_milliseconds: int, caller: Caller) -> None:
        self.notifier, self.rows, self.poll_ms, self.caller = notifier, rows, poll_milliseconds, caller

    async def __call__(
        self, ctx: ServerRequestContext[Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        sid = ctx.request_id
        if sid is None:
            raise MCPError(types.INVALID_REQUEST, "subscriptions/listen needs a request id")
        asked = params.notifications
        followed = self._followed(ctx, (asked.model_extra or {}).get("taskIds"))
        tools = bool(asked.tools_list_changed) and self.notifier is not None
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: sid}
        honored = types.SubscriptionFilter.model_validate(
            {
                **({"toolsListChanged": True} if tools else {}),
                **({"taskIds": list(followed.values())} if followed else {}),
            }
        )
        send, receive = anyio.create_memory_object_stream[str](BACKLOG)
        if tools and self.notifier is not None:
            self.notifier.listed(_Stream(send))
        ack = types.SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)
        await ctx.session.send_notification(types.SubscriptionsAcknowledgedNotification(params=ack), sid)
        async with anyio.create_task_group() as tg, send, receive:
            if followed:
                tg.start_soon(self._watch, followed, send)
            last: dict[str, Any] = {}
            async for what in receive:
                frame = self._frame(what, followed, meta)
                if frame is not None and last.get(what) != frame:  # a row written again unchanged says nothing
                    last[what] = frame
                    await ctx.session.send_notification(frame, sid)
        return types.SubscriptionsListenResult(_meta=meta)

    def _followed(self, ctx: ServerRequestContext[Any], task_ids: Any) -> dict[str, str]:
        """The asked tasks that are the caller's: their id by row key."""
        if not task_ids:
            return {}
        require_declared(ctx)
        if not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids):
            raise MCPError(types.INVALID_PARAMS, "notifications.taskIds is a list of task ids (strings)")
        if len(task_ids) > MAX_TASK_IDS:
            raise MCPError(types.INVALID_PARAMS, f"notifications.taskIds names at most {MAX_TASK_IDS} tasks")
        caller = self.caller(ctx)
        mine = {}
        for task_id in task_ids:
            row = self.rows.get(id_hash(task_id))
            if row is not None and row.caller == caller:
                mine[row.id_hash] = task_id
        return mine

    async def _watch(self, followed: dict[str, str], send: MemoryObjectSendStream[str]) -> None:
        """Pass on each change of a followed task, from any worker, as its row key."""
        with self.rows.store.subscribe(CHANNEL) as subscription:
            while True:
                wake = await subscription.wait()
                for key in followed if wake.missed else [p for p in wake.payloads if p in followed]:
                    send.send_nowait(key)

    def _frame(self, what: str, followed: dict[str, str], meta: dict[str, Any]) -> Any:
        """The frame for a change: the tool list, or the task as it is now (None: it is gone)."""
        if what == "tools":
            return types.ToolListChangedNotification(params=types.NotificationParams(_meta=meta))
        row = self.rows.get(what)
        if row is None:
            return None
        shown = task_object(followed[what], row, self.poll_ms)
        return TaskStatusNotification(params=TaskStatusParams.model_validate({**shown, "_meta": meta}))


__all__ = ["Listener", "TaskStatusNotification"]
