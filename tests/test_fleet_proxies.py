# ruff: noqa: F811  (the engine fixtures are imported from _store_support and named as parameters)
"""nginx and HAProxy, with the configurations docs/scale-out.md prints, in front of three workers
on one PostgreSQL (issue 23, §1): 2026-07-28 clients are spread over the workers and keep their
shell through its handle; a legacy session stays on the worker that opened it; mcporter and the
MCP Inspector's CLI call `bash` through the documented route; the DNS-rebinding protection holds
behind the proxy."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from _ci_support import skip_or_fail
from _fleet_support import FLEET_CONFIG, TOKEN, bash_stdout, fleet, fleet_env, port_of
from _proxy_support import PROXIES, Proxy, proxy
from _serve_auth_support import Served
from _store_support import fresh_database, needs_postgres, postgres_server  # noqa: F401  (fixture)
from toolshell.store.engines import open_store

pytestmark = pytest.mark.anyio
CONFIG = FLEET_CONFIG + 'allowed_hosts = ["mcp.example.com", "127.0.0.1"]\ntrusted_proxies = ["127.0.0.1"]\n'
CLIENTS = Path(__file__).resolve().parent / "node-clients" / "node_modules"
PUBLIC = {"Host": "mcp.example.com"}


@pytest.fixture(scope="module")
def workers(
    postgres_server: str | None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[list[Served], str]]:
    """Three workers on one new database; and its URL."""
    url = fresh_database(needs_postgres(postgres_server))
    with fleet(tmp_path_factory.mktemp("fleet"), fleet_env(url), 3, config=CONFIG) as served:
        yield served, url


@pytest.fixture(scope="module", params=PROXIES)
def front(
    request: pytest.FixtureRequest, workers: tuple[list[Served], str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Proxy]:
    with proxy(request.param, [port_of(w) for w in workers[0]], tmp_path_factory.mktemp(request.param)) as p:
        yield p


def _workers_that_ran(store_url: str, marker: str) -> list[str]:
    """The worker of each shell call whose script names `marker`, oldest first."""
    store = open_store(store_url)
    try:
        rows = store.query("SELECT worker FROM shell_calls WHERE script_preview LIKE ? ORDER BY seq", (f"%{marker}%",))
    finally:
        store.close()
    return [str(r["worker"]) for r in rows]


def _client(url: str, mode: str | None = None) -> Client:
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {TOKEN}", **PUBLIC}, verify=False, timeout=httpx2.Timeout(30, read=60)
    )
    transport = streamable_http_client(url, http_client=http)
    return Client(transport, mode=mode) if mode else Client(transport)


async def test_2026_clients_are_spread_over_the_workers_and_keep_their_shell_through_its_handle(
    front: Proxy, workers: tuple[list[Served], str]
) -> None:
    marker = f"m{secrets.token_hex(4)}"
    with anyio.fail_after(120):
        async with _client(front.url) as c:
            first = await c.call_tool("bash", {"script": f"echo kept > note; cat note # {marker}"})
            shell = first.structured_content["shell"]
            later = [
                bash_stdout(await c.call_tool("bash", {"script": f"cat note # {marker}", "shell": shell}))
                for _ in range(5)
            ]
    assert bash_stdout(first) == "kept\n" and later == ["kept\n"] * 5
    ran_on = _workers_that_ran(workers[1], marker)
    assert len(ran_on) == 6 and len(set(ran_on)) >= 2, f"{front.name} spread the calls over the workers: {ran_on}"


async def test_a_legacy_session_stays_on_the_worker_that_opened_it(
    front: Proxy, workers: tuple[list[Served], str]
) -> None:
    markers = [f"m{secrets.token_hex(4)}" for _ in range(2)]
    counts: list[list[str]] = []
    with anyio.fail_after(120):
        for marker in markers:  # two sessions, one after the other: each opened on some worker
            async with _client(front.url, mode="legacy") as c:
                script = f"echo x >> log; wc -l < log # {marker}"
                counts.append([bash_stdout(await c.call_tool("bash", {"script": script})).strip() for _ in range(4)])
    assert counts == [["1", "2", "3", "4"]] * 2, "each call found its session (and the session's shell)"
    for marker in markers:
        ran_on = _workers_that_ran(workers[1], marker)
        assert len(ran_on) == 4 and len(set(ran_on)) == 1, f"{front.name} kept the session on one worker: {ran_on}"


async def test_behind_the_proxy_a_host_that_is_not_allowed_still_gets_421(front: Proxy) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json", "Host": "evil.example"}
    async with httpx2.AsyncClient(verify=False, timeout=30) as http:
        refused = await http.post(front.url, json=body, headers={**headers, "Accept": "application/json"})
        probe = await http.get(front.url.removesuffix("/mcp") + "/readyz")
    assert refused.status_code == 421
    assert (probe.status_code, probe.text) == (200, "ready\n")


def _node_client(*argv: str, cert: Path) -> subprocess.CompletedProcess[str]:
    if not (CLIENTS / ".bin").is_dir():
        message = "the npm clients are not installed: npm install --prefix tests/node-clients (.ci/run does)"
        skip_or_fail(message)
    env = {**os.environ, "NODE_EXTRA_CA_CERTS": str(cert)}
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, check=False)


async def test_mcporter_calls_bash_through_the_documented_proxy(front: Proxy, tmp_path: Path) -> None:
    config = tmp_path / "mcporter.json"
    server = {"baseUrl": front.url, "headers": {"Authorization": f"Bearer {TOKEN}"}}
    config.write_text(json.dumps({"mcpServers": {"toolshell": server}}))
    cert = front.log.parent / "mcp.crt"
    done = await anyio.to_thread.run_sync(
        lambda: _node_client(
            str(CLIENTS / ".bin" / "mcporter"),
            "call",
            "--config",
            str(config),
            "toolshell.bash",
            "script=echo through-mcporter",
            "--output",
            "json",
            cert=cert,
        )  # fmt: skip
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["stdout"] == "through-mcporter\n"


async def test_the_inspector_cli_calls_bash_through_the_documented_proxy(front: Proxy) -> None:
    cli = CLIENTS / "@modelcontextprotocol" / "inspector" / "cli" / "build" / "index.js"
    cert = front.log.parent / "mcp.crt"
    done = await anyio.to_thread.run_sync(
        lambda: _node_client(
            "node",
            str(cli),
            front.url,
            "--transport",
            "http",
            "--header",
            f"Authorization: Bearer {TOKEN}",
            "--method",
            "tools/call",
            "--tool-name",
            "bash",
            "--tool-arg",
            "script=echo through-inspector",
            cert=cert,
        )  # fmt: skip
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["structuredContent"]["stdout"] == "through-inspector\n"
