"""The task keeper and the run it keeps, across the thread hops of `TaskKeeper.call` and `_sync`:
a run that ends while its task's row is written is published at once, not a heartbeat later, and
answers taken for a task that was resumed on this worker meanwhile reach the resumed run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import mcp_types as types
import pytest

from toolshell.calls.replay import CallFeed
from toolshell.config import load_text
from toolshell.config.serve import ServeTasksConfig
from toolshell.frontends.serve.tasks.keeper import TaskKeeper, TaskRun, _Owned
from toolshell.host import Host
from toolshell.store.tasks import TaskRow, TaskRows

pytestmark = pytest.mark.anyio
RING = [b"k" * 32]


async def test_a_run_that_ends_while_its_tasks_row_is_written_is_published_without_waiting_a_heartbeat(
    tmp_path: Path,
) -> None:
    release, ended = anyio.Event(), anyio.Event()

    async def run_script(asker: Any, feed: Any) -> types.CallToolResult:
        await release.wait()
        ended.set()
        return types.CallToolResult(content=[types.TextContent(type="text", text="done")])

    async def settle() -> None:  # the run ends, and the keeper's loop takes its wake, key unseen yet
        await ended.wait()
        for _ in range(50):
            await anyio.lowlevel.checkpoint()

    async with Host.open(load_text("", env={}), state_dir=tmp_path) as host:
        rows = TaskRows(host.store)
        create = rows.create

        def create_then_end(*args: Any, **kwargs: Any) -> None:  # in the worker thread of `call`
            create(*args, **kwargs)
            anyio.from_thread.run_sync(release.set)
            anyio.from_thread.run(settle)

        rows.create = create_then_end  # type: ignore[method-assign]
        async with anyio.create_task_group() as tg:
            keeper = TaskKeeper(rows, tg, host.worker_id, ServeTasksConfig(after_seconds=0), 3600.0, RING)
            created = await keeper.call(None, run_script, asks=False)
            assert isinstance(created, dict), created  # a task, not a result
            with anyio.fail_after(60):  # far below the hour-long heartbeat
                while keeper._owned:  # noqa: ASYNC110  (the keeper's loop ends it: nothing to wait on)
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        (row,) = host.store.query("SELECT status FROM tasks")
    assert row["status"] == "completed"


async def test_answers_taken_for_a_task_resumed_meanwhile_go_to_the_resumed_run(tmp_path: Path) -> None:
    got: list[types.ElicitResult | None] = []
    async with Host.open(load_text("", env={}), state_dir=tmp_path) as host:
        rows = TaskRows(host.store)
        async with anyio.create_task_group() as tg:
            keeper = TaskKeeper(rows, tg, host.worker_id, ServeTasksConfig(), 3600.0, RING)
            old = _Owned(TaskRun(lambda: None), anyio.CancelScope(), CallFeed(), key="k1")
            new = _Owned(TaskRun(lambda: None), anyio.CancelScope(), CallFeed(), key="k1")
            keeper._owned["k1"] = old
            params = types.ElicitRequestFormParams(
                message="approve?", requested_schema={"type": "object", "properties": {}}
            )

            async def ask() -> None:  # the resumed run asks again, and waits for the answer
                got.append(await new.run.ask(params))

            tg.start_soon(ask)
            with anyio.fail_after(30):
                while not isinstance(asked := new.run.current(), types.InputRequiredResult):  # noqa: ASYNC110
                    await anyio.sleep(0.01)
            (question,) = asked.input_requests

            def read(key: str) -> tuple[TaskRow | None, dict[str, Any]]:  # taken; meanwhile resumed here
                keeper._owned[key] = new
                return None, {question: {"action": "accept", "content": {"ok": True}}}

            keeper._read = read  # type: ignore[method-assign]
            await keeper._sync()
            with anyio.fail_after(30):
                while not got:  # noqa: ASYNC110  (the resumed run's question is answered)
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
    assert old.scope.cancel_called and keeper._owned.get("k1") is new, "the old run stops, the resumed one is kept"
    assert got[0] is not None and got[0].action == "accept" and got[0].content == {"ok": True}
