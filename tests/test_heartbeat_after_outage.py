"""A live worker's runs are not ended as lost by mistake: back from a store outage longer than
three beats it beats before it judges claims (`frontends.heartbeat`), and beats are judged by the
store's clock, so a process whose clock runs ahead does not take it for dead (`store.workers`).
Beats talk to the store from a worker thread: a store that hangs does not stop the event loop."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from _store_support import ENGINES, postgres_server, store_url
from toolshell.calls.replay import CallFeed
from toolshell.config import load_text
from toolshell.config.serve import ServeTasksConfig
from toolshell.frontends.heartbeat import keep_alive
from toolshell.frontends.serve.tasks.keeper import TaskKeeper, TaskRun, _Owned
from toolshell.host import Host
from toolshell.scripts.claims import TriggerClaims
from toolshell.store.engines import open_store
from toolshell.store.tasks import TaskRows
from toolshell.store.workers import MISSED_BEATS, Workers

__all__ = ["postgres_server", "store_url"]  # fixtures, imported for pytest


@pytest.mark.anyio
async def test_a_worker_back_from_a_long_outage_keeps_its_own_running_claim(tmp_path: Path) -> None:
    async with Host.open(load_text("", env={}), state_dir=tmp_path) as host:
        workers = Workers(host.store, heartbeat_seconds=1.0)
        workers.register(host.worker_id)
        claims = TriggerClaims(host.store, workers=workers, worker=host.worker_id)
        assert claims.claim_key("deploy", "key-1", "digest") is None  # this process runs it
        stale = time.time() - 10 * MISSED_BEATS  # no beat got through for ten beats' time
        host.store.execute("UPDATE workers SET heartbeat_at = ? WHERE id = ?", (stale, host.worker_id))
        async with anyio.create_task_group() as tg:
            tg.start_soon(keep_alive, workers, host, claims)
            with anyio.fail_after(60):  # generous: a busy machine is slow
                while not workers.alive(host.worker_id):  # noqa: ASYNC110  (the store holds it: nothing to wait on)
                    await anyio.sleep(0.2)
            tg.cancel_scope.cancel()
        (row,) = host.store.query("SELECT ended_by, finished_at FROM trigger_claims WHERE slot = ?", ("key-1",))
        assert (row["ended_by"], row["finished_at"]) == (None, None)


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
def test_a_process_whose_clock_runs_ahead_does_not_take_a_live_worker_for_lost(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(store_url)
    try:
        running = Workers(store, heartbeat_seconds=1.0)
        running.register("worker-a")
        TriggerClaims(store, workers=running, worker="worker-a").claim_slot(
            "nightly", datetime(2026, 12, 1, tzinfo=UTC)
        )
        ahead = time.time() + 100 * MISSED_BEATS  # this process's clock, far ahead of the store's
        monkeypatch.setattr(time, "time", lambda: ahead)
        judge = TriggerClaims(store, "host-b:2", workers=Workers(store, heartbeat_seconds=1.0))
        assert judge.end_lost() == 0
        assert judge.workers is not None and judge.workers.dead() == []
    finally:
        store.close()


@pytest.mark.anyio
async def test_the_heartbeats_store_calls_run_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The serving heartbeat (`keep_alive`) and the task keeper's sweep: each call to the store runs
    in a worker thread, so a store that hangs (a dropped database, whose pool waits for a
    connection) holds that thread, not the loop that answers `/readyz` and the calls."""
    loop_thread = threading.get_ident()
    where: dict[str, list[int]] = {"beat": [], "dead": [], "sweep": []}
    beat, dead, sweep = Workers.beat, Workers.dead, TaskRows.sweep

    def beat_where(self: Workers, worker: str) -> None:
        where["beat"].append(threading.get_ident())
        beat(self, worker)

    def dead_where(self: Workers) -> list[str]:
        where["dead"].append(threading.get_ident())
        return dead(self)

    def sweep_where(self: TaskRows, *args: float) -> None:
        where["sweep"].append(threading.get_ident())
        sweep(self, *args)

    monkeypatch.setattr(Workers, "beat", beat_where)
    monkeypatch.setattr(Workers, "dead", dead_where)
    monkeypatch.setattr(TaskRows, "sweep", sweep_where)
    async with Host.open(load_text("", env={}), state_dir=tmp_path) as host:
        workers = Workers(host.store, heartbeat_seconds=1.0)
        workers.register(host.worker_id)
        async with anyio.create_task_group() as tg:
            tg.start_soon(keep_alive, workers, host, None)
            TaskKeeper(TaskRows(host.store), tg, host.worker_id, ServeTasksConfig(), 1.0, [b"k" * 32])
            with anyio.fail_after(60):  # generous: a busy machine is slow
                while not all(where.values()):  # noqa: ASYNC110  (threads record it: nothing to wait on)
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
    assert all(loop_thread not in threads for threads in where.values()), f"store calls on the loop's thread: {where}"


@pytest.mark.anyio
async def test_the_task_keeper_keeps_its_tasks_in_step_from_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `bash` call that became a task ends: the keeper reads its row, takes its answers and
    publishes its end from a worker thread, never the event loop's, and the row says it ended."""
    loop_thread = threading.get_ident()
    where: list[tuple[str, int]] = []
    for name in ("get", "take_answers", "set_state"):
        original = getattr(TaskRows, name)

        def recorded(self: TaskRows, *args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
            where.append((_name, threading.get_ident()))
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(TaskRows, name, recorded)
    release = anyio.Event()

    async def run_script(asker: Any, feed: Any) -> types.CallToolResult:
        await release.wait()
        return types.CallToolResult(content=[types.TextContent(type="text", text="done")])

    async with Host.open(load_text("", env={}), state_dir=tmp_path) as host:
        rows = TaskRows(host.store)
        async with anyio.create_task_group() as tg:
            config = ServeTasksConfig(after_seconds=0)
            keeper = TaskKeeper(rows, tg, host.worker_id, config, 60.0, [b"k" * 32])
            created = await keeper.call(None, run_script, asks=False)
            assert isinstance(created, dict), created  # a task, not a result
            where.clear()  # what `call` itself read, on the request's path
            release.set()
            with anyio.fail_after(60):  # generous: a busy machine is slow
                while keeper._owned:  # noqa: ASYNC110  (the keeper's loop ends it: nothing to wait on)
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        (row,) = host.store.query("SELECT status FROM tasks")
    assert row["status"] == "completed"
    assert {name for name, _ in where} >= {"get", "take_answers", "set_state"}, where
    assert all(thread != loop_thread for _, thread in where), f"store calls on the loop's thread: {where}"


@pytest.mark.anyio
async def test_a_run_resumed_while_the_keeper_asked_the_store_is_kept(tmp_path: Path) -> None:
    """The keeper asks the store about a task off the loop; if meanwhile this worker resumed the
    task (a new run under the same key), the answer about the old run does not drop the new one."""
    async with Host.open(load_text("", env={}), state_dir=tmp_path) as host:
        rows = TaskRows(host.store)
        async with anyio.create_task_group() as tg:
            keeper = TaskKeeper(rows, tg, host.worker_id, ServeTasksConfig(), 60.0, [b"k" * 32])
            old = _Owned(TaskRun(lambda: None), anyio.CancelScope(), CallFeed(), key="k1")
            new = _Owned(TaskRun(lambda: None), anyio.CancelScope(), CallFeed(), key="k1")
            keeper._owned["k1"] = old

            def get(key: str) -> None:  # the old run's row is gone; meanwhile the task was resumed here
                keeper._owned[key] = new
                return None

            rows.get = get  # type: ignore[method-assign]
            await keeper._sync()
            tg.cancel_scope.cancel()
    assert old.scope.cancel_called, "the old run is stopped"
    assert keeper._owned.get("k1") is new, "the resumed run is still kept"
