# ruff: noqa: F811  (the engine fixtures are imported from _store_support and named as parameters)
"""One pending request per identical call, expiry and who answered, on both store engines: what one
process writes, another reading the same store sees."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from _store_support import ENGINES, postgres_server, store_url  # noqa: F401  (fixtures)
from toolshell.errors import ToolshellError
from toolshell.policy.approvals import Approvals
from toolshell.registry.entry import ToolEntry
from toolshell.store.engines import open_store
from toolshell.store.protocol import StateStore

pytestmark = pytest.mark.parametrize("store_url", ENGINES, indirect=True)
DELETE = ToolEntry("github", "delete-branch", annotations={"destructiveHint": True}, server_id="gh")


@pytest.fixture
def two(store_url: str) -> Iterator[tuple[StateStore, StateStore]]:
    a, b = open_store(store_url), open_store(store_url)
    yield a, b
    a.close()
    b.close()


def test_two_processes_running_the_same_call_share_one_request_per_caller(two: tuple[StateStore, StateStore]) -> None:
    first, second = Approvals(two[0]), Approvals(two[1])
    mine = first.request(DELETE, {"branch": "x"}, "session-1", "destructive")
    again = second.request(DELETE, {"branch": "x"}, "session-2", "destructive")
    theirs = second.request(DELETE, {"branch": "x"}, "session-3", "destructive", caller="bob")
    assert mine.id == again.id != theirs.id
    assert [r.id for r in first.list_pending()] == [mine.id, theirs.id]


def test_a_request_left_unanswered_expires_for_every_process(two: tuple[StateStore, StateStore]) -> None:
    first, second = Approvals(two[0], expire_seconds=60), Approvals(two[1], expire_seconds=60)
    old = first.request(DELETE, {"branch": "x"}, "s1", "destructive")
    two[0].execute("UPDATE approval_requests SET created_at=? WHERE id=?", (time.time() - 61, old.id))
    assert second.list_pending() == []
    assert [r.status for r in second.list_expired()] == ["expired"]
    with pytest.raises(ToolshellError, match="expired"):
        second.deny(old.id, by="the person on the web page")


def test_who_denied_a_request_is_what_another_process_reads(two: tuple[StateStore, StateStore]) -> None:
    first, second = Approvals(two[0]), Approvals(two[1])
    rid = first.request(DELETE, {"branch": "x"}, "s1", "destructive").id
    first.deny(rid, by="the person at the terminal")
    assert second.get(rid).answer == "denied by the person at the terminal"
