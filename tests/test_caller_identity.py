"""The caller's identity is recorded on every shell call and approval request (what per-caller state is keyed by)."""

from __future__ import annotations

from typing import Any

import pytest

from _github_server import make_github
from toolshell.config import Config
from toolshell.host import Host
from toolshell.policy import Approvals
from toolshell.registry.entry import ToolEntry
from toolshell.store.sqlite import Store
from toolshell.timeline.sinks import SqliteSink, query

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_sessions_caller_is_on_its_shell_call_row_and_its_approval_request() -> None:
    store = Store()
    calls: list[Any] = []
    async with Host.open(Config(), servers={"github": make_github(calls)}, sink=SqliteSink(store)) as host:
        session = host.session(caller="token:3f9c0e1a")
        await session.run("echo hi")
        await session.run("tools github delete-branch branch=fix-x")
        [pending] = host.policy.approvals.list_pending()
        anonymous = host.session()
        await anonymous.run("echo hi")
    assert pending.caller == "token:3f9c0e1a"
    assert pending.to_json()["caller"] == "token:3f9c0e1a"
    rows = query(store)
    assert [(r["session_id"], r["caller"]) for r in rows] == [
        (anonymous.id, None),
        (session.id, "token:3f9c0e1a"),
        (session.id, "token:3f9c0e1a"),
    ]
    assert calls == [], "the call waits for a person"


def test_a_state_made_before_callers_were_recorded_gains_the_column(tmp_path: Any) -> None:
    path = tmp_path / "state.db"
    old = Store(path)
    old.execute(
        "CREATE TABLE approval_requests (id TEXT PRIMARY KEY, server TEXT NOT NULL, tool TEXT NOT NULL, "
        "command TEXT NOT NULL, input TEXT NOT NULL, session_id TEXT NOT NULL, why TEXT, "
        "message TEXT NOT NULL DEFAULT '', fingerprint TEXT NOT NULL, status TEXT NOT NULL, "
        "created_at REAL NOT NULL, decided_at REAL)"
    )
    old.close()
    approvals = Approvals(Store(path))
    entry = ToolEntry("github", "delete_branch", "Delete a branch.", {"type": "object"}, {"destructiveHint": True})
    request = approvals.request(entry, {"branch": "x"}, "s1", "destructive", caller="oauth:alice")
    assert approvals.get(request.id).caller == "oauth:alice"
