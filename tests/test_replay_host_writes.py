# ruff: noqa: F811  (the store fixtures are imported from _store_support and named as parameters)
"""Writes you cannot replay are not replayed: a run whose shell reaches the host (a writable
`[[shell.mounts]]` folder, `[shell] network_allow`) is not run again when its worker stops, since
no record answers what the script itself wrote there. Its task reads `failed` and its yielded call
`exit_code: 137`, each saying why; `[shell] replay_host_writes = true` resumes it, repeating those
writes knowingly. In one process on both store engines; across real workers killed with SIGKILL
in `test_replay_host_writes_workers.py`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from _replay_support import LOG_ENV, calls, counter
from _store_support import ENGINES, postgres_server, store_url  # noqa: F401  (fixtures)
from _tasks_support import CreatedTask, TasksClient, get_task, until_status
from toolshell.config import Config, ShellConfig
from toolshell.frontends.serve.resume import not_replayed
from toolshell.frontends.serve.server import build_server
from toolshell.host import Host
from toolshell.store.engines import open_store
from toolshell.store.keys import new_key
from toolshell.store.tasks import id_hash

pytestmark = pytest.mark.anyio
PAYS = (
    "tools counter tick n=1; echo paid-once >> /out/ledger; tools counter tick n=2; tools counter tick n=3; echo done"
)
"""Call 1, a write to the host, call 2, then call 3 (held: its worker stops there)."""


def _config(tmp_path: Path, *, opt_in: bool = False, **serve: Any) -> Config:
    (tmp_path / "host").mkdir(exist_ok=True)
    mount = {"host": str(tmp_path / "host"), "path": "/out", "writable": True}
    return Config.model_validate(
        {
            "shell": {"mounts": [mount], "replay_host_writes": opt_in},
            "serve": {"heartbeat_seconds": 1, "tasks": {"after_seconds": 0}, **serve},
        }
    )


@asynccontextmanager
async def _serving(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: Config, tasks: bool = True
) -> AsyncIterator[tuple[Host, Client]]:
    monkeypatch.setenv(LOG_ENV, str(tmp_path / "calls.log"))
    monkeypatch.setenv("TOOLSHELL_STATE_KEYS", new_key())
    async with Host.open(
        config, store=open_store(store_url), state_dir=tmp_path / "state", servers={"counter": counter()}
    ) as host:
        async with Client(build_server(host, []), extensions=[TasksClient()] if tasks else []) as client:
            yield host, client


async def _until_calls(log: Path, made: list[int]) -> None:
    with anyio.fail_after(60):
        while calls(log) != made:  # noqa: ASYNC110  (a file the fixture server writes)
            await anyio.sleep(0.1)


def _recorded(host: Host, key: str) -> int:
    return int(host.store.query("SELECT COUNT(*) AS n FROM run_calls WHERE run_key = ?", (key,))[0]["n"])


def test_a_shell_that_writes_to_the_host_or_reaches_the_network_is_not_replayed_unless_the_config_accepts_it(
    tmp_path: Path,
) -> None:
    mounts = [{"host": str(tmp_path), "path": "/in"}, {"host": str(tmp_path), "path": "/out", "writable": True}]
    writes = not_replayed(ShellConfig.model_validate({"mounts": mounts}))
    network = not_replayed(ShellConfig.model_validate({"network_allow": ["https://api.example.com"]}))
    accepted = ShellConfig.model_validate(
        {"mounts": mounts, "network_allow": ["https://x"], "replay_host_writes": True}
    )
    assert writes is not None and "writable [[shell.mounts]] /out" in writes and "/in" not in writes
    assert network is not None and "network requests ([shell] network_allow)" in network
    assert "[shell] replay_host_writes = true" in writes
    assert not_replayed(ShellConfig.model_validate({"mounts": mounts[:1]})) is None, "a read-only mount changes nothing"
    assert not_replayed(accepted) is None


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_task_whose_shell_writes_to_the_host_fails_with_its_worker_saying_why_and_the_write_is_made_once(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hold = tmp_path / "calls.log.hold-3"
    hold.touch()
    async with _serving(store_url, tmp_path, monkeypatch, _config(tmp_path)) as (host, client):
        created = await client.session.call_tool("bash", {"script": PAYS}, allow_claimed=True)
        assert isinstance(created, CreatedTask), created
        key = id_hash(created.task_id)
        await _until_calls(tmp_path / "calls.log", [1, 2])
        host.store.execute("UPDATE tasks SET beat = beat - 3600, worker = 'gone' WHERE id_hash = ?", (key,))
        failed = await get_task(client.session, created.task_id)  # the worker that reads it would take it over
        again = await get_task(client.session, created.task_id)
        recorded = _recorded(host, key)
        hold.unlink()
    assert failed.status == "failed" and again.status == "failed"
    message = failed.status_message or ""
    assert "not run again by replay" in message and "writable [[shell.mounts]] /out" in message
    assert failed.error is not None and failed.error["message"] == message
    assert (tmp_path / "host" / "ledger").read_text() == "paid-once\n"
    assert calls(tmp_path / "calls.log")[:2] == [1, 2] and recorded == 0, "nothing is recorded for a replay"


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_with_replay_host_writes_such_a_task_is_resumed_and_its_host_write_knowingly_made_again(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hold = tmp_path / "calls.log.hold-3"
    hold.touch()
    config = _config(tmp_path, opt_in=True)
    async with _serving(store_url, tmp_path, monkeypatch, config) as (host, client):
        created = await client.session.call_tool("bash", {"script": PAYS}, allow_claimed=True)
        assert isinstance(created, CreatedTask), created
        key = id_hash(created.task_id)
        with anyio.fail_after(60):
            while _recorded(host, key) < 2:  # noqa: ASYNC110  (rows in the store)
                await anyio.sleep(0.1)
        host.store.execute("UPDATE tasks SET beat = beat - 3600, worker = 'gone' WHERE id_hash = ?", (key,))
        taken = await get_task(client.session, created.task_id)
        hold.unlink()
        done = await until_status(client.session, created.task_id, "completed", "failed")
    assert taken.status == "working" and done.status == "completed", done
    assert (tmp_path / "host" / "ledger").read_text() == "paid-once\npaid-once\n", "the opt-in repeats it"
    assert calls(tmp_path / "calls.log") == [1, 2, 3], "each tool call still once"


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_yielded_call_on_a_shell_with_network_reads_as_stopped_saying_why_and_is_not_run_again(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hold = tmp_path / "calls.log.hold-3"
    hold.touch()
    config = _config(tmp_path, yield_seconds=5)  # room for the second call on a busy machine
    config.shell.network_allow = ["https://api.example.com"]
    async with _serving(store_url, tmp_path, monkeypatch, config, tasks=False) as (host, client):
        with anyio.fail_after(60):
            first = (await client.call_tool("bash", {"script": PAYS})).structured_content
        assert isinstance(first, dict) and first["running"] is True, first
        await _until_calls(tmp_path / "calls.log", [1, 2])
        host.store.execute("UPDATE yielded_runs SET beat = beat - 3600, worker = 'gone'")
        with anyio.fail_after(60):
            after = (
                await client.call_tool("bash", {"script": "echo next", "shell": first["shell"]})
            ).structured_content
        hold.unlink()
    assert isinstance(after, dict) and after["stdout"] == "next\n"
    earlier = after["earlier"]
    assert earlier["exit_code"] == 137 and "not run again by replay" in earlier["note"]
    assert "writable [[shell.mounts]] /out and network requests" in earlier["note"]
    assert (tmp_path / "host" / "ledger").read_text() == "paid-once\n"


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_worker_that_stops_cleanly_fails_such_a_task_saying_why_instead_of_handing_it_over(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOG_ENV, str(tmp_path / "calls.log"))
    monkeypatch.setenv("TOOLSHELL_STATE_KEYS", new_key())
    (tmp_path / "calls.log.hold-3").touch()
    config = _config(tmp_path)

    def opened(name: str) -> Any:
        return Host.open(config, store=open_store(store_url), state_dir=tmp_path / name, servers={"counter": counter()})

    async with opened("two") as two:
        async with opened("one") as one, Client(build_server(one, []), extensions=[TasksClient()]) as on_one:
            created = await on_one.session.call_tool("bash", {"script": PAYS}, allow_claimed=True)
            assert isinstance(created, CreatedTask), created
            await _until_calls(tmp_path / "calls.log", [1, 2])
        # worker one stopped: its run with it
        (tmp_path / "calls.log.hold-3").unlink()
        async with Client(build_server(two, []), extensions=[TasksClient()]) as on_two:
            done = await until_status(on_two.session, created.task_id, "completed", "failed")
    assert done.status == "failed", done
    assert done.status_message is not None and "not run again by replay" in done.status_message
    assert "writable [[shell.mounts]] /out" in done.status_message
    assert (tmp_path / "host" / "ledger").read_text() == "paid-once\n"
