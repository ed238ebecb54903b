"""A worker back from a store outage longer than three beats beats before it judges claims: its
own run, still going, is not ended as lost by its own first beat (`frontends.heartbeat`)."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from toolshell.config import load_text
from toolshell.frontends.heartbeat import keep_alive
from toolshell.host import Host
from toolshell.scripts.claims import TriggerClaims
from toolshell.store.workers import MISSED_BEATS, Workers


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
