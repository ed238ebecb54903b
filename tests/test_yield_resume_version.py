# ruff: noqa: F811  (the store fixtures are imported from _store_support and named as parameters)
"""A yielded call's resume data names the shell's version its run started from, not the one the
store holds when the row is written: a run that saved its shell in between (it ended meanwhile)
would otherwise be replayed on the state after it, if its worker stopped before writing its
result. In one process on both store engines."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

import toolshell.frontends.serve.server as server_module
from _replay_support import LOG_ENV, counter
from _store_support import ENGINES, postgres_server, store_url  # noqa: F401  (fixtures)
from toolshell.config import Config
from toolshell.frontends.serve.resume import resume_info
from toolshell.frontends.serve.server import build_server
from toolshell.frontends.serve.tasks.yielding import _sealed_to
from toolshell.host import Host, state_ring
from toolshell.store.engines import open_store
from toolshell.store.keys import new_key
from toolshell.store.replay import RESUME, opened_json
from toolshell.store.yields import YieldRows

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_the_resume_data_of_a_yielded_call_names_the_version_its_run_started_from(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOG_ENV, str(tmp_path / "calls.log"))
    monkeypatch.setenv("TOOLSHELL_STATE_KEYS", new_key())
    hold = tmp_path / "calls.log.hold-1"
    writing, saved = threading.Event(), threading.Event()

    def late_resume_info(shells: Any, caller: str | None, handle: str, *rest: Any) -> Any:
        """The row's write reaches its resume data only once the run saved its shell."""
        writing.set()
        saved.wait(60)  # a guard against a hang, not a timing
        return resume_info(shells, caller, handle, *rest)

    monkeypatch.setattr(server_module, "resume_info", late_resume_info)
    config = Config.model_validate({"serve": {"yield_seconds": 0.5}})  # the run is held: it yields
    async with Host.open(
        config, store=open_store(store_url), state_dir=tmp_path / "state", servers={"counter": counter()}
    ) as host:
        async with Client(build_server(host, [])) as client:
            first = (await client.call_tool("bash", {"script": "echo start > f"})).structured_content
            assert isinstance(first, dict) and first["exit_code"] == 0, first
            handle = first["shell"]
            before = _version(host, handle)
            hold.touch()  # the run waits in its first call: it found its shell, and cannot save yet
            call = "tools counter tick n=1; echo changed >> f"
            yielded: Any = None
            async with anyio.create_task_group() as tg:

                async def second() -> None:
                    nonlocal yielded
                    yielded = (await client.call_tool("bash", {"script": call, "shell": handle})).structured_content

                tg.start_soon(second)
                with anyio.fail_after(60):
                    while not writing.is_set():  # noqa: ASYNC110  (set in a worker thread)
                        await anyio.sleep(0.05)
                hold.unlink()  # the run ends and saves its shell, while the row is being written
                with anyio.fail_after(60):
                    while _version(host, handle) == before:  # noqa: ASYNC110  (a row in the store)
                        await anyio.sleep(0.05)
                saved.set()
            row = YieldRows(host.store).get(handle)
            ring = state_ring(host)
    assert isinstance(yielded, dict) and yielded["running"] is True, yielded
    assert row is not None and row.run_key is not None and row.resume is not None
    resume = opened_json(ring, RESUME, _sealed_to(row.run_key, handle, row.caller), row.resume)
    assert isinstance(resume, dict)
    assert resume["version"] == before, "a replay starts from the state before the call"


def _version(host: Host, handle: str) -> int:
    return int(host.store.query("SELECT version FROM shell_handles WHERE handle = ?", (handle,))[0]["version"])
