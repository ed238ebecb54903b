# ruff: noqa: F811  (the PostgreSQL fixture is imported from _store_support and named as a parameter)
"""Writes you cannot replay, the way it was found: two `toolshell serve --http` processes on one
PostgreSQL store, a task on a shell with a writable `[[shell.mounts]]` folder whose worker is
killed with SIGKILL after its 2nd nested call (its script wrote `paid-once` to the host between
the two) and, where it may be replayed, both calls' records are in the store (a call whose record
was not yet written when its worker died was in flight, and replay makes it again: docs/tasks.md). The other worker does
not run it again: the task reads `failed`, saying why, and the host file holds the line once.
With `[shell] replay_host_writes = true` it is resumed, and the line is written again, as that
setting accepts."""

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
from test_replay_host_writes import PAYS, _until_calls
from toolshell.store.engines import open_store
from toolshell.store.keys import new_key
from toolshell.store.tasks import id_hash

pytestmark = pytest.mark.anyio
TOKEN = "serve-token-for-the-host-write-replay-tests"
SERVE = "[serve]\nheartbeat_seconds = 1\n[serve.tasks]\nafter_seconds = 0\n"


@pytest.fixture(params=[False, True], ids=["default", "replay_host_writes"])
def workers(
    request: pytest.FixtureRequest, postgres_server: str | None, tmp_path: Path
) -> Iterator[tuple[bool, Path, str, list[Served]]]:
    """Two workers on one fresh PostgreSQL database, one host folder mounted writable in both."""
    if postgres_server is None:
        pytest.skip("PostgreSQL is not installed here: scripts/postgres.sh installs and starts it")
    opt_in: bool = request.param
    (tmp_path / "host").mkdir()
    shell = f"[shell]\nreplay_host_writes = {'true' if opt_in else 'false'}\n"
    mount = f'[[shell.mounts]]\nhost = "{tmp_path / "host"}"\npath = "/out"\nwritable = true\n'
    config = COUNTER_CONFIG + SERVE + shell + mount
    store = fresh_database(postgres_server)
    env = {
        "TOOLSHELL_SERVE_TOKEN": TOKEN,
        "TOOLSHELL_STATE_URL": store,
        "TOOLSHELL_STATE_KEYS": new_key(),
        LOG_ENV: str(tmp_path / "calls.log"),
    }
    with ExitStack() as stack:
        served = []
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
            served.append(stack.enter_context(serving(tmp_path / name / "state", config=config, env=env)))
        yield opt_in, tmp_path, store, served


async def test_a_task_writing_to_a_mount_whose_worker_is_killed_is_not_replayed_unless_the_config_accepts_it(
    workers: tuple[bool, Path, str, list[Served]],
) -> None:
    opt_in, root, store, (a, b) = workers
    log, ledger = root / "calls.log", root / "host" / "ledger"
    hold = log.with_name(f"{log.name}.hold-3")
    hold.touch()  # call 3 waits before it does anything: the worker dies after its 2nd call
    async with client(a.url, TOKEN, extensions=[TasksClient()]) as on_a:
        created = await on_a.session.call_tool("bash", {"script": PAYS}, allow_claimed=True)
    assert isinstance(created, CreatedTask), created
    await _until_calls(log, [1, 2])
    if opt_in:  # by default such a run keeps no records: it is never replayed
        await _until_recorded(store, id_hash(created.task_id), 2)
    a.proc.send_signal(signal.SIGKILL)
    a.proc.wait(10)
    hold.unlink()
    async with client(b.url, TOKEN, extensions=[TasksClient()]) as on_b:
        done = await until_status(on_b.session, created.task_id, "completed", "failed", seconds=90)
    if opt_in:
        assert done.status == "completed", done
        body = dict(types.CallToolResult.model_validate(done.result).structured_content or {})
        assert body["stdout"] == "tick 1\ntick 2\ntick 3\ndone\n"
        assert ledger.read_text() == "paid-once\npaid-once\n", "accepted: the replay writes it again"
    else:
        assert done.status == "failed", done
        assert done.status_message is not None and "not run again by replay" in done.status_message
        assert "writable [[shell.mounts]] /out" in done.status_message
        assert ledger.read_text() == "paid-once\n", "written once: nothing ran again"
    assert calls(log) == ([1, 2, 3] if opt_in else [1, 2]), "each tool call at most once"


async def _until_recorded(url: str, key: str, made: int) -> None:
    """Until the run's first `made` calls are recorded: killed earlier, the last was still in flight."""
    look = open_store(url)
    try:
        with anyio.fail_after(60):
            while look.query("SELECT COUNT(*) AS n FROM run_calls WHERE run_key = ?", (key,))[0]["n"] < made:  # noqa: ASYNC110
                await anyio.sleep(0.1)  # rows in the store: nothing to wait on
    finally:
        look.close()
