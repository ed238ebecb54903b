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

import contextlib
import time
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext

from toolshell.calls.replay import CallFeed
from toolshell.config.serve import ServeConfig
from toolshell.errors import ToolshellError
from toolshell.frontends.serve.list_notifier import ListNotifier
from toolshell.frontends.serve.tasks.keeper import (
    Answered,
    RunScript,
    TaskKeeper,
    keeper_for,
    question_place,
    stop_tasks,
)
from toolshell.frontends.serve.tasks.listen import Listener
from toolshell.frontends.serve.tasks.methods import Caller, TaskMethods
from toolshell.frontends.serve.tasks.wire import EXTENSION, TaskParams, UpdateParams, declared
from toolshell.frontends.serve.tasks.yielding import RunBash, Yielder, draining, yielder_for
from toolshell.frontends.serve.upstream import Asker
from toolshell.redact import Redactor
from toolshell.store.protocol import StateStore
from toolshell.store.replay import RESUME, opened_json
from toolshell.store.tasks import TaskRow, TaskRows
from toolshell.store.yields import YieldRows

Resumer = Callable[[ServerRequestContext[Any], dict[str, Any]], RunScript]
"""Makes the run of a task taken over, from what it was started with (`TaskKeeper.call`'s `resume`)."""


class Tasks:
    """The extension on one server: which calls become tasks, and the keeper that runs them.

    `resumer` (set by the server) runs a task again when this worker takes it over; None: tasks
    whose worker died fail."""

    def __init__(
        self,
        rows: TaskRows,
        yields: YieldRows,
        serve: ServeConfig,
        worker: str,
        ring: list[bytes],
        redact: Redactor | None = None,
        park_after: float = 0.0,
    ) -> None:
        self.rows, self.yields, self.serve, self.worker = rows, yields, serve, worker
        self.ring, self.redact, self.park_after = ring, redact, park_after
        self.resumer: Resumer | None = None
        self.yield_resumer: Callable[[ServerRequestContext[Any], dict[str, Any]], RunBash] | None = None
        """Runs a yielded call again when this worker's collector takes it over."""

    def offered(self, ctx: ServerRequestContext[Any]) -> bool:
        """Whether this call may become a task: its client declared the extension."""
        return declared(ctx)

    async def call(
        self,
        ctx: ServerRequestContext[Any],
        caller: str | None,
        run_script: RunScript,
        asks: bool,
        resume: dict[str, Any] | None = None,
    ) -> types.CallToolResult | dict[str, Any]:
        """The call's plain result if it ends soon, else its `CreateTaskResult` (`keeper.TaskKeeper.call`)."""
        keeper = keeper_for(ctx.lifespan_context, self._keeper)
        return await keeper.call(caller, run_script, asks, resume)

    async def take_over(self, ctx: ServerRequestContext[Any], row: TaskRow) -> bool | str | None:
        """A task whose owner went silent, or a parked one that was answered: claim it and run it
        again here by replay. True when this worker took it, False when another did first, None
        when it cannot be resumed (or, parked, has no answer yet), and why when that is known (its
        shell reaches the host: `resume.not_replayed`). The claim, the answers and the records'
        index are read in one worker thread: a takeover never holds the event loop either."""
        if draining(ctx.lifespan_context):  # this worker is going away: one that stays takes it
            return False
        resume = opened_json(self.ring, RESUME, row.id_hash, row.resume)
        if self.resumer is None or not isinstance(resume, dict) or resume.get("caller") != row.caller:
            return None
        if resume.get("not_replayed"):
            return str(resume["not_replayed"])
        keeper = keeper_for(ctx.lifespan_context, self._keeper)
        with anyio.CancelScope(shield=True):  # a claim made is a run started: the request's cancel waits
            claimed = await anyio.to_thread.run_sync(self._claim, keeper, row, time.time())
            if not isinstance(claimed, tuple):
                return claimed
            keeper.resume(row.id_hash, row.attempt + 1, self.resumer(ctx, resume), bool(resume.get("asks")), *claimed)
        return True

    def _claim(self, keeper: TaskKeeper, row: TaskRow, now: float) -> tuple[CallFeed, Answered] | bool | None:
        """(From a worker thread) the claim of `take_over`: the run's feed and answers once won,
        False when another worker won, None when a parked task has no answer yet. A claim whose
        records cannot be read is handed back (its heartbeat stale), so the next poll takes the
        task over again instead of this worker's beat keeping it `working` with nothing running."""
        if row.parked:
            if not self.rows.answered(row.id_hash):
                return None
            if not self.rows.claim_parked(row.id_hash, self.worker):
                return False
        elif not self.rows.claim(row.id_hash, self.worker, now - 3 * self.serve.heartbeat_seconds):
            return False
        try:
            answered = _answered(row, self.rows.take_answers(row.id_hash)) if row.parked else []
            return keeper.replay_feed(row.id_hash, answered), answered
        except ToolshellError:
            with contextlib.suppress(ToolshellError):  # best effort: with the store down too, the claim stays
                self.rows.hand_over(row.id_hash, self.worker, 0.0)
            raise

    async def run_or_yield(
        self,
        ctx: ServerRequestContext[Any],
        caller: str | None,
        handle: str,
        run_bash: RunBash,
        asker: Asker | None,
        resume: Callable[[int | None], dict[str, Any] | None] | None = None,
    ) -> types.CallToolResult:
        """A call of a client without Tasks: its result, or its output so far (`yielding`)."""
        if self.serve.yield_seconds <= 0:
            return await run_bash(lambda out, err: None, asker, None)  # never yields: nothing to resume
        yielder = yielder_for(ctx.lifespan_context, self._yielder)
        resumer = self.yield_resumer
        bound = None if resumer is None else (lambda info: resumer(ctx, info))
        return await yielder.call(caller, handle, run_bash, asker, resume, bound)

    def _yielder(self, tg: Any) -> Yielder:
        serve = self.serve

        def sweep() -> None:
            self.rows.sweep(time.time(), 3 * serve.heartbeat_seconds, serve.tasks.keep_seconds)

        return Yielder(
            self.yields, tg, self.worker, serve.yield_seconds, serve.heartbeat_seconds, self.ring, self.redact, sweep
        )

    def _keeper(self, tg: Any) -> TaskKeeper:
        return TaskKeeper(
            self.rows,
            tg,
            self.worker,
            self.serve.tasks,
            self.serve.heartbeat_seconds,
            self.ring,
            self.redact,
            self.park_after,
        )


def _answered(row: TaskRow, answers: dict[str, Any]) -> Answered:
    """The answers of a parked task, each with the place and message of the question it answers
    (in asking order); one whose key names no call is left out (the question is asked anew)."""
    out: Answered = []
    for key, request in (row.input_requests or {}).items():
        place = question_place(key)
        if key in answers and place is not None:
            try:
                out.append((place, request["params"]["message"], types.ElicitResult.model_validate(answers[key])))
            except (KeyError, TypeError, ValueError):  # a row another version wrote: asked anew instead
                continue
    return out


def install_tasks(
    server: Server[Any],
    store: StateStore,
    serve: ServeConfig,
    worker: str,
    caller: Caller,
    ring: list[bytes],
    notifier: ListNotifier | None = None,
    redact: Redactor | None = None,
    park_after: float = 0.0,
) -> Tasks:
    """Serve the extension's methods and `subscriptions/listen` on `server`, and advertise the
    extension (`server/discover`; `initialize` under `experimental`)."""
    rows = TaskRows(store)
    tasks = Tasks(rows, YieldRows(store), serve, worker, ring, redact, park_after)
    methods = TaskMethods(rows, serve.tasks, serve.heartbeat_seconds, caller, tasks.take_over)
    server.add_request_handler("tasks/get", TaskParams, methods.get)
    server.add_request_handler("tasks/update", UpdateParams, methods.update)
    server.add_request_handler("tasks/cancel", TaskParams, methods.cancel)
    server.add_request_handler(
        "subscriptions/listen",
        types.SubscriptionsListenRequestParams,
        Listener(notifier, rows, serve.tasks.poll_milliseconds, caller),
    )
    server.extensions[EXTENSION] = {}
    return tasks


__all__ = ["EXTENSION", "Resumer", "RunScript", "Tasks", "install_tasks", "stop_tasks"]
