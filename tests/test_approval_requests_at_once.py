# ruff: noqa: F811  (the engine fixtures are imported from _store_support and named as parameters)
"""Two identical calls of one process that ask at once, each from its own worker thread (a call's
store steps run off the event loop), open one approval request, on both engines: PostgreSQL's
transaction at READ COMMITTED alone would let both look, find none, and insert."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from _store_support import ENGINES, postgres_server, store_url  # noqa: F401  (fixtures)
from toolshell.policy.approvals import Approvals
from toolshell.registry.entry import ToolEntry
from toolshell.store.engines import open_store

LOOK = "SELECT * FROM approval_requests WHERE status=?"


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
def test_two_identical_calls_asking_at_once_from_two_threads_open_one_request(store_url: str) -> None:
    store = open_store(store_url)
    both_looked = threading.Barrier(2, timeout=5)  # without the request lock both look before either inserts
    query = store.query

    def looking(sql: str, params: Any = ()) -> Any:
        rows = query(sql, params)
        if sql.startswith(LOOK):
            try:
                both_looked.wait()
            except threading.BrokenBarrierError:  # the other waits its turn: one looks at a time
                pass
        return rows

    try:
        approvals = Approvals(store)
        store.query = looking  # type: ignore[method-assign]
        entry, opened = ToolEntry("github", "delete-branch"), []

        def ask() -> None:
            opened.append(approvals.request(entry, {"branch": "x"}, "s1", "destructive").id)

        threads = [threading.Thread(target=ask) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        store.query = query  # type: ignore[method-assign]
        pending = approvals.list_pending()
    finally:
        store.close()
    assert len(opened) == 2 and opened[0] == opened[1], f"two requests for one call: {opened}"
    assert [p.id for p in pending] == opened[:1]
