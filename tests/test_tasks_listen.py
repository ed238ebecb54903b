"""`subscriptions/listen` on `toolshell serve` (2026-07-28): the SDK client in its default mode
hears `notifications/tools/list_changed`, and a Tasks client hears `notifications/tasks` for its
own tasks; other callers' tasks and an undeclared extension are refused."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client import NotificationBinding
from mcp.client.subscriptions import ToolsListChanged
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict

from _tasks_support import CreatedTask, TasksClient
from toolshell.config import Config
from toolshell.frontends.serve.list_notifier import ListNotifier
from toolshell.frontends.serve.server import build_server
from toolshell.host import Host

pytestmark = pytest.mark.anyio
EVERY_CALL = Config.model_validate({"serve": {"tasks": {"after_seconds": 0}}})


class TaskNote(types.NotificationParams):
    model_config = ConfigDict(extra="allow")
    task_id: str
    status: str


class ListenParams(types.RequestParams):
    notifications: dict[str, Any]


class Listen(types.Request[ListenParams, Literal["subscriptions/listen"]]):
    method: Literal["subscriptions/listen"] = "subscriptions/listen"


class HearingTasks(TasksClient):
    """The Tasks client, also hearing `notifications/tasks` (the SDK's `NotificationBinding`)."""

    def __init__(self) -> None:
        super().__init__()
        self.heard, self._inbox = anyio.create_memory_object_stream[TaskNote](64)

    def notifications(self) -> Sequence[NotificationBinding[Any]]:
        return [NotificationBinding(method="notifications/tasks", params_type=TaskNote, handler=self._heard)]

    async def _heard(self, note: TaskNote) -> None:
        await self.heard.send(note)


async def test_a_2026_client_hears_tools_list_changed_on_subscriptions_listen() -> None:
    notifier = ListNotifier()
    async with Host.open() as host:
        async with Client(build_server(host, [], notifier=notifier)) as client:
            async with client.listen(tools_list_changed=True) as subscription:
                await notifier.changed()  # a server settled: the `bash` description changed
                with anyio.fail_after(10):
                    event = await anext(aiter(subscription))
    assert subscription.honored.tools_list_changed is True
    assert isinstance(event, ToolsListChanged)


async def test_a_tasks_client_hears_notifications_tasks_for_its_task_until_it_completes() -> None:
    async with Host.open(EVERY_CALL) as host:
        hearing = HearingTasks()
        async with Client(build_server(host, []), extensions=[hearing]) as client:
            created = await client.session.call_tool("bash", {"script": "sleep 1; echo heard"}, allow_claimed=True)
            assert isinstance(created, CreatedTask)
            listen = Listen(params=ListenParams(notifications={"taskIds": [created.task_id, "someone-elses"]}))
            statuses = []
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.session.send_request, listen, types.SubscriptionsListenResult)
                with anyio.fail_after(30):
                    async for note in hearing._inbox:
                        statuses.append(note.status)
                        if note.status == "completed":
                            break
                tg.cancel_scope.cancel()
    assert statuses[-1] == "completed" and note.task_id == created.task_id
    extra = note.model_extra or {}
    result = types.CallToolResult.model_validate(extra["result"])
    assert result.structured_content["stdout"] == "heard\n"


async def test_asking_for_task_notifications_without_the_extension_is_refused() -> None:
    async with Host.open() as host:
        async with Client(build_server(host, [])) as client:
            listen = Listen(params=ListenParams(notifications={"taskIds": ["any"]}))
            with anyio.fail_after(10), pytest.raises(MCPError) as refused:
                await client.session.send_request(listen, types.SubscriptionsListenResult)
    assert refused.value.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
