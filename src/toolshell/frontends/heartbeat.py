"""The heartbeat of a process that serves from the store: `toolshell serve` and `toolshell triggers
serve` register as workers (`store.workers`) and beat until they stop.

Each beat also ends what dead workers left open: their running shell calls are marked lost in the
timeline, and (where this process keeps trigger claims) their unfinished trigger runs are ended
as lost (`scripts.claims`), so a run whose process was killed does not stay `running` for good.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, nullcontext

import anyio

from toolshell.errors import ToolshellError
from toolshell.host import Host
from toolshell.scripts.claims import TriggerClaims
from toolshell.store.workers import Workers
from toolshell.timeline.sinks import mark_lost

logger = logging.getLogger(__name__)


@asynccontextmanager
async def registered(
    host: Host, heartbeat_seconds: float, claims: TriggerClaims | None = None
) -> AsyncIterator[Workers]:
    """`host` registered as a worker and beating while the block runs; forgotten when it ends
    (its unfinished claims, if any, are then lost to any reader)."""
    workers = Workers(host.store, heartbeat_seconds)
    workers.register(host.worker_id)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(keep_alive, workers, host, claims)
            yield workers
            tg.cancel_scope.cancel()
    finally:
        try:
            workers.forget(host.worker_id)
        except ToolshellError as err:  # the store went first: the heartbeat goes stale instead
            logger.warning("could not leave the workers in the state store: %s", err.message)


async def keep_alive(workers: Workers, host: Host, claims: TriggerClaims | None = None) -> None:
    """Beat, and end what dead workers left open. A store that fails for a while costs beats, not
    the worker (`/readyz` says it is unreachable). Each beat runs in a worker thread: a store that
    hangs (a dropped database: its pool waits for a connection) holds that thread, not the event
    loop that answers the calls and `/readyz`."""
    while True:
        await anyio.to_thread.run_sync(beat_once, workers, host, claims)
        await anyio.sleep(workers.heartbeat_seconds)


def beat_once(workers: Workers, host: Host, claims: TriggerClaims | None = None) -> None:
    try:
        # beat first: back from an outage longer than three beats, this worker's own stale
        # heartbeat would otherwise end its own runs, still going, as lost
        with nullcontext() if host.metrics is None else host.metrics.heartbeat():  # metrics: beats, store latency
            workers.beat(host.worker_id)
        for dead in workers.dead():
            if dead != host.worker_id:
                mark_lost(host.store, [dead])
                workers.forget(dead)
        if claims is not None:
            claims.end_lost()
    except ToolshellError as err:
        logger.warning("could not beat in the state store: %s", err.message)
