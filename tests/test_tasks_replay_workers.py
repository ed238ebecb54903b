# ruff: noqa: F811  (the PostgreSQL fixture is imported from _store_support and named as a parameter)
"""Resume by replay across real workers on the real PostgreSQL: two `toolshell serve --http`
processes on one store, a 10-call script whose worker is killed with SIGKILL after its 6th call
completed. The other worker takes it over (a task when polled, a yielded call when its shell's
next call collects it) and finishes it; the fixture server's call log (a file every worker's
server writes) shows each of the 10 calls exactly once."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import anyio
import mcp_types as types
import pytest

from _replay_support import COUNTER_CONFIG, LOG_ENV, calls
from _serve_auth_support import Served, client, serving
from _store_support import fresh_database, postgres_server  # noqa: F401  (fixture)
from _tasks_support import CreatedTask, TasksClient, until_status
from toolshell.store.engines import open_store
from toolshell.store.keys import new_key
from toolshell.store.protocol import StateStore
from toolshell.store.tasks import id_hash

pytestmark = pytest.mark.anyio
TOKEN = "serve-token-for-the-replay-worker-tests-01"
CONFIG = COUNTER_CONFIG + "[serve]\nheartbeat_seconds = 1\nyield_seconds = 2\n[serve.tasks]\nafter_seconds = 0\n"
TEN_CALLS = "for i in 1 2 3 4 5 6 7 8 9 10; do tools counter tick n=$i; done; echo done"


@pytest.fixture
def workers(postgres_server: str | None, tmp_path: Path) -> Iterator[tuple[str, Path, list[Served]]]:
    """Two workers on one fresh PostgreSQL database, their fixture servers logging to one file."""
    if postgres_server is None:
        pytest.skip("PostgreSQL is not installed here: scripts/postgres.sh installs and starts it")
    store = fresh_database(postgres_server)
    log = tmp_path / "calls.log"
    env = {
        "TOOLSHELL_SERVE_TOKEN": TOKEN,
        "TOOLSHELL_STATE_URL": store,
        "TOOLSHELL_STATE_KEYS": new_key(),
        LOG_ENV: str(log),
    }
    with ExitStack() as stack:
        served = []
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
            served.append(stack.enter_context(serving(tmp_path / name / "state", config=CONFIG, env=env)))
        yield store, log, served


async def test_a_task_whose_worker_is_killed_after_its_sixth_call_is_finished_by_another_and_each_call_runs_once(
    workers: tuple[str, Path, list[Served]],
) -> None:
    store, log, (a, b) = workers
    hold = log.with_name(f"{log.name}.hold-7")
    hold.touch()  # call 7 waits before it does anything: the worker dies with its first six done
    async with client(a.url, TOKEN, extensions=[TasksClient()]) as on_a:
        created = await on_a.session.call_tool("bash", {"script": TEN_CALLS}, allow_claimed=True)
    assert isinstance(created, CreatedTask), created
    look = open_store(store)
    try:
        with anyio.fail_after(60):
            while _recorded(look, id_hash(created.task_id)) < 6:  # noqa: ASYNC110  (rows in the store)
                await anyio.sleep(0.2)
    finally:
        look.close()
    before = _kill(a, hold, log)
    async with client(b.url, TOKEN, extensions=[TasksClient()]) as on_b:
        done = await until_status(on_b.session, created.task_id, "completed", "failed", seconds=90)
    assert before == [1, 2, 3, 4, 5, 6]
    assert done.status == "completed", done
    body = types.CallToolResult.model_validate(done.result).structured_content
    assert body["stdout"] == "".join(f"tick {i}\n" for i in range(1, 11)) + "done\n"
    assert calls(log) == list(range(1, 11)), "each of the 10 calls exactly once, across both workers"


async def test_a_yielded_call_whose_worker_is_killed_after_its_sixth_call_is_finished_by_the_collector(
    workers: tuple[str, Path, list[Served]],
) -> None:
    """A client without Tasks: the call yields after 2 s; the next call on its shell, on the other
    worker, takes it over once the owner is silent and delivers the rest, every byte once."""
    store, log, (a, b) = workers
    hold = log.with_name(f"{log.name}.hold-7")
    hold.touch()
    async with client(a.url, TOKEN, read_timeout_seconds=20) as on_a:
        first = (await on_a.call_tool("bash", {"script": TEN_CALLS})).structured_content
    assert isinstance(first, dict) and first["running"] is True, first
    look = open_store(store)
    try:
        with anyio.fail_after(60):
            while _recorded(look) < 6:  # noqa: ASYNC110  (rows in the store)
                await anyio.sleep(0.2)
    finally:
        look.close()
    before = _kill(a, hold, log)
    pieces = [first["stdout"]]
    with anyio.fail_after(120):
        while True:
            async with client(b.url, TOKEN, read_timeout_seconds=20) as on_b:
                got = (
                    await on_b.call_tool("bash", {"script": "echo after", "shell": first["shell"]})
                ).structured_content
            assert isinstance(got, dict)
            pieces.append(got.get("earlier", {}).get("stdout", ""))
            if "earlier" in got and not got["earlier"].get("running"):
                break
    assert before == [1, 2, 3, 4, 5, 6]
    assert "".join(pieces) == "".join(f"tick {i}\n" for i in range(1, 11)) + "done\n"
    assert got["earlier"]["exit_code"] == 0 and got["stdout"] == "after\n"
    assert calls(log) == list(range(1, 11)), "each of the 10 calls exactly once, across both workers"


def _kill(worker: Served, hold: Path, log: Path) -> list[int]:
    """SIGKILL the worker, then let call 7 go on (wherever it is made next); the calls made so far."""
    worker.proc.send_signal(signal.SIGKILL)
    worker.proc.wait(10)
    before = calls(log)
    hold.unlink()
    return before


def _recorded(store: StateStore, key: str | None = None) -> int:
    if key is None:
        return int(store.query("SELECT COUNT(*) AS n FROM run_calls")[0]["n"])
    rows = store.query("SELECT COUNT(*) AS n FROM run_calls WHERE run_key = ?", (key,))
    return int(rows[0]["n"])
