"""`bash` as an MCP task (the Tasks extension, SEP-2663, `io.modelcontextprotocol/tasks`).

A client that declares the extension on a `tools/call` may get a `CreateTaskResult` for `bash`
(a call still running after `[serve.tasks] after_seconds`, or asking a person); one that does not
never does. The task's row is committed before the result goes out, and every worker on the store
answers `tasks/get`, `tasks/update` and `tasks/cancel` (docs/tasks.md):

- `wire`: the params, task objects and errors as the extension spells them;
- `keeper`: the worker running a task keeps its row in step (questions, answers, cancel, result);
- `methods`: the `tasks/*` handlers any worker serves;
- `listen`: `subscriptions/listen` streams (`tools/list_changed`, `notifications/tasks`);
- `progress`: `notifications/progress` of long calls;
- `yielding`: yield-and-wait, for clients without Tasks.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext

from toolshell.config.serve import ServeConfig
from toolshell.frontends.serve.list_notifier import ListNotifier
from toolshell.frontends.serve.tasks.keeper import RunScript, TaskKeeper, keeper_for, stop_tasks
from toolshell.frontends.serve.tasks.listen import Listener
from toolshell.frontends.serve.tasks.methods import Caller, TaskMethods
from toolshell.frontends.serve.tasks.wire import EXTENSION, TaskParams, UpdateParams, declared
from toolshell.frontends.serve.tasks.yielding import RunBash, Yielder, yielder_for
from toolshell.frontends.serve.upstream import Asker
from toolshell.store.protocol import StateStore
from toolshell.store.tasks import TaskRows, YieldRows


class Tasks:
    """The extension on one server: which calls become tasks, and the keeper that runs them."""

    def __init__(self, rows: TaskRows, yields: YieldRows, serve: ServeConfig, worker: str) -> None:
        self.rows, self.yields, self.serve, self.worker = rows, yields, serve, worker

    def offered(self, ctx: ServerRequestContext[Any]) -> bool:
        """Whether this call may become a task: its client declared the extension."""
        return declared(ctx)

    async def call(
        self, ctx: ServerRequestContext[Any], caller: str | None, run_script: RunScript, asks: bool
    ) -> types.CallToolResult | dict[str, Any]:
        """The call's plain result if it ends soon, else its `CreateTaskResult` (`keeper.TaskKeeper.call`)."""
        keeper = keeper_for(ctx.lifespan_context, self._keeper)
        return await keeper.call(caller, run_script, asks)

    async def run_or_yield(
        self, ctx: ServerRequestContext[Any], caller: str | None, handle: str, run_bash: RunBash, asker: Asker | None
    ) -> types.CallToolResult:
        """A call of a client without Tasks: its result, or its output so far (`yielding`)."""
        if self.serve.yield_seconds <= 0:
            return await run_bash(lambda out, err: None, asker)
        yielder = yielder_for(ctx.lifespan_context, self._yielder)
        return await yielder.call(caller, handle, run_bash, asker)

    def _yielder(self, tg: Any) -> Yielder:
        return Yielder(self.yields, tg, self.worker, self.serve.yield_seconds, self.serve.heartbeat_seconds)

    def _keeper(self, tg: Any) -> TaskKeeper:
        return TaskKeeper(self.rows, tg, self.worker, self.serve.tasks, self.serve.heartbeat_seconds)


def install_tasks(
    server: Server[Any],
    store: StateStore,
    serve: ServeConfig,
    worker: str,
    caller: Caller,
    notifier: ListNotifier | None = None,
) -> Tasks:
    """Serve the extension's methods and `subscriptions/listen` on `server`, and advertise the
    extension (`server/discover`; `initialize` under `experimental`)."""
    rows = TaskRows(store)
    methods = TaskMethods(rows, serve.tasks, serve.heartbeat_seconds, caller)
    server.add_request_handler("tasks/get", TaskParams, methods.get)
    server.add_request_handler("tasks/update", UpdateParams, methods.update)
    server.add_request_handler("tasks/cancel", TaskParams, methods.cancel)
    server.add_request_handler(
        "subscriptions/listen",
        types.SubscriptionsListenRequestParams,
        Listener(notifier, rows, serve.tasks.poll_milliseconds, caller),
    )
    server.extensions[EXTENSION] = {}
    return Tasks(rows, YieldRows(store), serve, worker)


__all__ = ["EXTENSION", "Tasks", "install_tasks", "stop_tasks"]
