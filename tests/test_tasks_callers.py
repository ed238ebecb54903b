"""A task belongs to the caller that made it, through `toolshell serve --http` with two real
authenticated callers (two machine clients of one OAuth issuer, `test_serve_oauth.served_with_oauth`):
the other caller's `tasks/cancel` and `tasks/update` with the task's id get the same `Task not
found` as an unknown id, change nothing (the question stays open, nothing ran), and the owner's
task still finishes on the owner's answer."""

from __future__ import annotations

import mcp_types as types
import pytest
from mcp import MCPError

from _serve_auth_support import client
from _tasks_support import CreatedTask, TasksClient, cancel_task, get_task, until_status, update_task
from test_serve_oauth import served_with_oauth

pytestmark = pytest.mark.anyio
DELETE = "echo start; tools github delete-branch branch=x; echo after"
ONCE = {"action": "accept", "content": {"answer": "once"}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _never(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
    raise AssertionError("a task's question went out as elicitation/create instead of inputRequests")


async def test_another_callers_cancel_and_update_of_a_task_are_refused_and_the_owners_task_still_finishes() -> None:
    async with served_with_oauth() as served:
        served.issuer.provider.machines["other-robot"] = "other-secret"
        alice_token, bob_token = await served.token(), await served.token("other-robot", "other-secret")
        tasks = {"extensions": [TasksClient()], "elicitation_callback": _never}
        async with client(served.url, alice_token, **tasks) as alice, client(served.url, bob_token, **tasks) as bob:
            created = await alice.session.call_tool("bash", {"script": DELETE}, allow_claimed=True)
            assert isinstance(created, CreatedTask), created
            asked = await until_status(alice.session, created.task_id, "input_required")
            [key] = asked.input_requests or {}
            refused = {}
            for name, request in (
                ("get", lambda: get_task(bob.session, created.task_id)),
                ("cancel", lambda: cancel_task(bob.session, created.task_id)),
                ("update", lambda: update_task(bob.session, created.task_id, {key: ONCE})),
                ("unknown", lambda: cancel_task(bob.session, "no-such-task")),
            ):
                try:
                    await request()
                    refused[name] = (0, "accepted")
                except MCPError as error:
                    refused[name] = (error.code, error.message)
            still = await get_task(alice.session, created.task_id)
            await update_task(alice.session, created.task_id, {key: ONCE})
            done = await until_status(alice.session, created.task_id, "completed", "failed", "cancelled")
    not_found = (types.INVALID_PARAMS, "Failed to retrieve task: Task not found")
    assert refused == {"get": not_found, "cancel": not_found, "update": not_found, "unknown": not_found}
    assert still.status == "input_required" and still.input_requests == asked.input_requests, "bob changed nothing"
    assert done.status == "completed", done
    body = dict(types.CallToolResult.model_validate(done.result).structured_content or {})
    assert body["stdout"] == "start\ndeleted x\nafter\n"
