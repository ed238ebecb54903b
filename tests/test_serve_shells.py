# ruff: noqa: F811  (the engine fixtures are imported from _store_support and named as parameters)
"""Shell handles through `toolshell serve` (issue 15, items 1 and 4): a 2026-07-28 client keeps its
shell by passing the result's `shell` back, over one worker or round-robin across three workers on
one store; a legacy session keeps its shell without a handle; a gone handle runs nothing."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from _serve_auth_support import Served, client, serving
from _store_support import ENGINES, fresh_database, postgres_server, store_url  # noqa: F401  (fixtures)
from toolshell.frontends.serve.server import build_server
from toolshell.host import Host
from toolshell.store.keys import new_key

pytestmark = pytest.mark.anyio
TOKEN = "serve-token-for-the-shell-tests-0123456789"


def _body(result: Any) -> dict[str, Any]:
    body: dict[str, Any] = result.structured_content
    return body


async def _bash(c: Client, script: str, shell: str | None = None) -> dict[str, Any]:
    arguments = {"script": script} | ({"shell": shell} if shell else {})
    return _body(await c.call_tool("bash", arguments))


async def test_in_process_a_handle_names_the_shell_and_an_unknown_one_runs_nothing(tmp_path: Path) -> None:
    async with Host.open(state_dir=tmp_path / "state") as host:
        server = build_server(host, [])
        async with Client(server) as one, Client(server) as other:
            made = await _bash(one, "echo kept > state.txt; cd /tmp; X=5")
            again = await _bash(other, "cat /home/user/state.txt; pwd; echo $X", made["shell"])
            gone = await _bash(other, "echo ran > /home/user/marker", "sh_" + "x" * 43)
            fresh = await _bash(other, "ls /home/user", gone["shell"])
    assert again == {**again, "exit_code": 0, "stdout": "kept\n/tmp\n5\n", "shell": made["shell"]}
    assert gone["exit_code"] == 1 and json.loads(gone["stderr"])["error"]["code"] == "invalid_input"
    assert "is gone" in gone["shell_note"] and gone["shell"] != made["shell"]
    assert fresh["stdout"] == "", "nothing ran in the refused call, and the new shell is empty"


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[Served]:
    with serving(tmp_path / "state", env={"TOOLSHELL_SERVE_TOKEN": TOKEN}) as served:
        yield served


async def test_a_2026_client_keeps_its_shell_only_by_passing_the_handle_back(worker: Served) -> None:
    async with client(worker.url, TOKEN) as c:
        first = await _bash(c, "echo kept > state.txt")
        without = await _bash(c, "cat state.txt")
        with_handle = await _bash(c, "cat state.txt", first["shell"])
    assert first["exit_code"] == 0 and first["shell"].startswith("sh_")
    assert without["exit_code"] != 0 and without["shell"] != first["shell"], "no handle: a new shell"
    assert (with_handle["stdout"], with_handle["shell"]) == ("kept\n", first["shell"])


async def test_a_legacy_session_keeps_its_shell_without_a_handle_and_names_it(worker: Served) -> None:
    async with client(worker.url, TOKEN, mode="legacy") as c:
        first = await _bash(c, "echo kept > state.txt; cd /tmp")
        second = await _bash(c, "cat /home/user/state.txt; pwd")
    assert (second["stdout"], second["shell"]) == ("kept\n/tmp\n", first["shell"])


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
async def test_a_client_sent_round_robin_across_three_workers_on_one_store_keeps_its_shell(
    store_url: str, tmp_path: Path
) -> None:
    env = {"TOOLSHELL_SERVE_TOKEN": TOKEN, "TOOLSHELL_STATE_URL": store_url, "TOOLSHELL_STATE_KEYS": new_key()}
    with ExitStack() as stack:
        for i in range(3):
            (tmp_path / f"w{i}").mkdir()
        workers = [stack.enter_context(serving(tmp_path / f"w{i}" / "state", env=env)) for i in range(3)]
        results = []
        handle: str | None = None
        script = ["echo x > f; N=1", "echo y >> f; N=$((N+1))", "cat f; echo $N", "mkdir d; cd d", "pwd; cat ../f"]
        for step, text in enumerate(script):
            async with client(workers[step % 3].url, TOKEN) as c:
                result = await _bash(c, text, handle)
            handle = result["shell"]
            results.append(result)
    assert [r["exit_code"] for r in results] == [0, 0, 0, 0, 0]
    assert results[2]["stdout"] == "x\ny\n2\n" and results[4]["stdout"] == "/home/user/d\nx\ny\n"
    assert len({r["shell"] for r in results}) == 1


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
async def test_a_worker_on_a_shared_store_without_a_key_ring_refuses_to_start(store_url: str, tmp_path: Path) -> None:
    with pytest.raises(AssertionError) as refused:
        with serving(tmp_path / "state", env={"TOOLSHELL_SERVE_TOKEN": TOKEN, "TOOLSHELL_STATE_URL": store_url}):
            pass
    assert "TOOLSHELL_STATE_KEYS" in str(refused.value)


async def test_the_llm_adapter_and_the_python_api_use_the_same_handles(tmp_path: Path) -> None:
    # lazy: the adapter module is what this test is about
    from toolshell import Shells
    from toolshell.frontends.llm import run_tool_call

    async with Host.open(state_dir=tmp_path / "state") as host:
        shells = Shells.for_host(host)
        first = await run_tool_call(shells, "bash", {"script": "echo kept > f; cd /tmp"})
        handle = re.fullmatch(r"\[shell (sh_\S+)\]", first)  # the text names the shell: the model passes it back
        assert handle is not None, first
        second = await run_tool_call(shells, "bash", {"script": "cat /home/user/f; pwd", "shell": handle[1]})
        by_api = await shells.run(None, handle[1], "echo $PWD")
        other = await run_tool_call(shells, "bash", {"script": "ls"})
        shells.close()
    assert second == f"kept\n/tmp\n[shell {handle[1]}]"
    assert (by_api.stdout, by_api.shell) == ("/tmp\n", handle[1])
    assert re.fullmatch(r"\[shell sh_\S+\]", other) and handle[1] not in other


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
async def test_a_legacy_session_is_sticky_and_its_shell_handle_still_works_on_another_worker(
    store_url: str, tmp_path: Path
) -> None:
    """The sticky rule: an `Mcp-Session-Id` is served by the worker that opened it (another answers
    404, the SDK's answer for an unknown session); the shell behind it is in the store, so after
    re-initializing on another worker the client keeps its files by passing the handle back."""
    # lazy: raw HTTP only for the request the SDK client would not make
    import httpx2

    env = {"TOOLSHELL_SERVE_TOKEN": TOKEN, "TOOLSHELL_STATE_URL": store_url, "TOOLSHELL_STATE_KEYS": new_key()}
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
    with serving(tmp_path / "one" / "state", env=env) as one, serving(tmp_path / "two" / "state", env=env) as two:
        seen: list[str] = []

        async def record(response: Any) -> None:
            seen.extend([response.headers["mcp-session-id"]] if "mcp-session-id" in response.headers else [])

        auth = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx2.AsyncClient(headers=auth, event_hooks={"response": [record]}) as http:
            async with Client(streamable_http_client(one.url, http_client=http), mode="legacy") as c:
                first = await _bash(c, "echo kept > f")
        session_id = seen[0]
        headers = {
            "Authorization": f"Bearer {TOKEN}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Mcp-Session-Id": session_id,
            "Mcp-Protocol-Version": "2025-11-25",
        }
        body = {"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {}}
        async with httpx2.AsyncClient() as http:
            elsewhere = await http.post(two.url, json=body, headers=headers)
        async with client(two.url, TOKEN, mode="legacy") as c:
            again = await _bash(c, "cat f", first["shell"])
    assert len(session_id) >= 16 and elsewhere.status_code == 404
    assert (again["stdout"], again["shell"]) == ("kept\n", first["shell"])
