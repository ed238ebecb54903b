"""`[approval] wait_for = "store"`: a call waits, parked, for an answer given in another process."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from _github_server import make_github
from toolshell.config import Config
from toolshell.host import Host
from toolshell.policy.approvals import Approvals
from toolshell.result import RunResult
from toolshell.store.sqlite import Store

pytestmark = pytest.mark.anyio
SCRIPT = "echo start; for b in x; do tools github delete-branch branch=$b; done; echo after"


async def _run_and_answer(tmp_path: Path, answer: str) -> RunResult:
    config = Config.model_validate({"approval": {"wait_for": "store", "wait_seconds": 60}})
    results: list[RunResult] = []
    async with Host.open(config, state_dir=tmp_path, servers={"github": make_github()}) as host:
        other = Approvals(Store(tmp_path / "toolshell.db"))  # another process's view of the same state
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                results.append(await host.session().run(SCRIPT))

            tg.start_soon(run)
            with anyio.fail_after(20):
                while not (pending := other.list_pending()):  # noqa: ASYNC110  (another process writes it)
                    await anyio.sleep(0.05)
                if answer == "deny":
                    other.deny(pending[0].id)
                else:
                    other.grant(pending[0].id, always=answer == "always")
    return results[0]


async def test_a_call_waiting_on_the_store_runs_when_another_process_grants_it(tmp_path: Path) -> None:
    result = await _run_and_answer(tmp_path, "once")
    assert (result.exit_code, result.stdout) == (0, "start\ndeleted x\nafter\n")


async def test_a_call_waiting_on_the_store_stops_when_another_process_denies_it(tmp_path: Path) -> None:
    result = await _run_and_answer(tmp_path, "deny")
    assert result.stdout == "start\n"
    assert result.tools is not None and result.tools["stopped"]["approval"] == "denied"
    assert result.tools["stopped"]["request_id"].startswith("apr_")
