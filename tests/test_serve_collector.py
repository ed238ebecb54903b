"""A serving worker's garbage collector (issue 31, round 3): once it listens, what startup made is
frozen out of later collections and the youngest generation is collected every 10,000
allocations, not CPython's 700 (`frontends.serve.collector`). A start that failed changes nothing."""

from __future__ import annotations

import gc
import socket
from collections.abc import Iterator

import pytest
import uvicorn
from starlette.applications import Starlette

from toolshell.frontends.serve.collector import YOUNG_THRESHOLD
from toolshell.frontends.serve.drain import Drain, DrainingServer

pytestmark = pytest.mark.anyio
CPYTHON_DEFAULT = (700, 10, 10)


@pytest.fixture
def collector_state() -> Iterator[None]:
    """CPython's own collector settings for the test (an earlier test may have served in this
    process, and settled it), and the test process's settings as they were after it."""
    threshold = gc.get_threshold()
    gc.unfreeze()
    gc.set_threshold(*CPYTHON_DEFAULT)
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def _server(port: int = 0) -> DrainingServer:
    """Ready for `startup`, as `serve` gets it there."""
    config = uvicorn.Config(Starlette(), host="127.0.0.1", port=port, log_level="critical", lifespan="off")
    config.load()
    server = DrainingServer(config, Drain(1.0))
    server.lifespan = config.lifespan_class(config)
    return server


async def test_a_worker_that_listens_freezes_what_startup_made_and_collects_young_objects_less_often(
    collector_state: None,
) -> None:
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == CPYTHON_DEFAULT
    made_at_startup = [object() for _ in range(3)]  # noqa: F841  (alive while it starts)
    server = _server()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        await server.startup(sockets=[sock])
        try:
            frozen, threshold = gc.get_freeze_count(), gc.get_threshold()
        finally:
            await server.shutdown(sockets=[sock])
    assert frozen > 0, "what startup made was not frozen"
    assert threshold[0] == YOUNG_THRESHOLD


async def test_a_start_that_failed_leaves_the_collector_as_it_was(collector_state: None) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    server = _server(taken.getsockname()[1])
    try:
        with pytest.raises(SystemExit):  # uvicorn exits when the port is in use
            await server.startup()
    finally:
        taken.close()
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == CPYTHON_DEFAULT
