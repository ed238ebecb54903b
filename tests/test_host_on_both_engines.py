# ruff: noqa: F811  (the engine fixtures are imported from _store_support and named as parameters)
"""A whole host on each engine: two hosts (two workers) on one store share approvals, grants,
saved scripts and the timeline, whether the store is SQLite or PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from _github_server import make_github
from _store_support import ENGINES, postgres_server, store_url  # noqa: F401  (fixtures)
from toolshell.config import Config
from toolshell.host import Host
from toolshell.store.engines import open_store
from toolshell.timeline.sinks import query

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("store_url", ENGINES, indirect=True)]


async def test_a_request_held_on_one_worker_is_granted_on_another_and_the_call_then_runs(
    store_url: str, tmp_path: Path
) -> None:
    calls: list[Any] = []
    config = Config.model_validate({"tools_in_shell": {"manage_scripts": True}})
    one_store, two_store = open_store(store_url), open_store(store_url)
    async with (
        Host.open(config, store=one_store, state_dir=tmp_path / "one", servers={"github": make_github(calls)}) as one,
        Host.open(config, store=two_store, state_dir=tmp_path / "two", servers={"github": make_github(calls)}) as two,
    ):
        held = await one.run("tools github delete-branch branch=fix-x")
        [pending] = two.policy.approvals.list_pending()
        two.policy.approvals.grant(pending.id)
        ran = await one.run("tools github delete-branch branch=fix-x")
        saved = await two.run("echo 'echo from a saved script' | tools scripts save hello --description Hi")
        listed = await one.run("tools scripts hello")
        rows = query(two.store)
    assert held.tools is not None and held.tools["stopped"]["request_id"] == pending.id
    assert ran.exit_code == 0 and calls == [("delete-branch", {"branch": "fix-x"})]
    assert saved.exit_code == 0 and listed.stdout == "from a saved script\n"
    assert {r["script_preview"] for r in rows} >= {"tools github delete-branch branch=fix-x", "tools scripts hello"}
