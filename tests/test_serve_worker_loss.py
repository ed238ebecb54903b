# ruff: noqa: F811  (the engine fixtures are imported from _store_support and named as parameters)
"""A worker killed with SIGKILL mid-call loses nothing that was recorded (issue 15, item 4): another
worker on the store marks the shell call it held as lost, its approval request stays answerable,
and the client's next request is served."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from _serve_auth_support import GITHUB_CONFIG, client, serving, toolshell_exe
from _store_support import ENGINES, postgres_server, store_url  # noqa: F401  (fixtures)
from toolshell.policy.approvals import Approvals
from toolshell.store.engines import open_store
from toolshell.store.keys import new_key
from toolshell.timeline.sinks import query

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("store_url", ENGINES, indirect=True)]
TOKEN = "serve-token-for-the-worker-loss-tests-42"
CONFIG = GITHUB_CONFIG + '[approval]\nwait_for = "store"\nwait_seconds = 600\n[serve]\nheartbeat_seconds = 1\n'
SCRIPT = "tools github delete-branch branch=doomed"


async def _until(check: Any, seconds: float = 30) -> Any:
    """Poll `check` (a store read) until it returns something true; bounded."""
    with anyio.fail_after(seconds):
        while not (found := check()):  # noqa: ASYNC110  (another process writes it: nothing to wait on here)
            await anyio.sleep(0.2)  # a poll, bounded above
    return found


async def test_a_worker_killed_mid_call_leaves_its_call_marked_lost_and_its_request_answerable(
    store_url: str, tmp_path: Path
) -> None:
    # On PostgreSQL each worker has a state dir of its own; on SQLite both share one (one host).
    shared = store_url.startswith("postgresql://")
    env = {"TOOLSHELL_SERVE_TOKEN": TOKEN, "TOOLSHELL_STATE_KEYS": new_key()}
    env |= {"TOOLSHELL_STATE_URL": store_url} if shared else {}
    state, second_state = tmp_path / "state", (tmp_path / "second" / "state" if shared else tmp_path / "state")
    second_state.parent.mkdir(exist_ok=True)
    with serving(state, config=CONFIG, env=env) as first:
        look = open_store(store_url if shared else str(state / "toolshell.db"))
        approvals = Approvals(look)
        async with anyio.create_task_group() as tg:

            async def doomed_call() -> None:
                try:
                    async with client(first.url, TOKEN) as c:
                        await c.call_tool("bash", {"script": SCRIPT})
                except Exception:  # the worker dies under the call: the client sees the connection go
                    pass

            tg.start_soon(doomed_call)
            [pending] = await _until(approvals.list_pending)
            first.proc.kill()  # SIGKILL: no clean-up of any kind
            first.proc.wait(10)
            tg.cancel_scope.cancel()
    with serving(second_state, config=CONFIG, env=env) as second:
        lost = await _until(lambda: [r for r in query(look) if r["script_preview"] == SCRIPT and r["exit_code"]])
        async with client(second.url, TOKEN) as c:
            after = (await c.call_tool("bash", {"script": "echo served"})).structured_content
        still = Approvals(look).get(pending.id)
        grant = await anyio.run_process(
            [toolshell_exe(), "approvals", "grant", pending.id, "--state-dir", str(state)],
            env={**os.environ, **env},
            check=False,
        )
    assert (lost[0]["exit_code"], lost[0]["ended_by"]) == (137, "worker_lost")
    assert still.status == "pending", "the request outlived its worker"
    assert grant.returncode == 0, grant.stderr.decode()
    assert Approvals(look).get(pending.id).status == "granted_once"
    assert after["stdout"] == "served\n"
    look.close()
