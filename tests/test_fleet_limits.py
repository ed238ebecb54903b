# ruff: noqa: F811  (the engine fixtures are imported from _store_support and named as parameters)
"""Limits and quotas across a fleet (issue 33 §1): three `serve --http` workers on one real
PostgreSQL behind the documented HAProxy; the call past the limit gets 429 with `Retry-After` and
the `RateLimit` fields whichever worker it lands on, and a quota's day shows in `toolshell stats`."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import anyio
import httpx2
import pytest
from click.testing import CliRunner

from _fleet_support import FLEET_CONFIG, MCP_HEADERS, META, TOKEN, fleet, fleet_env, port_of
from _proxy_support import proxy
from _store_support import fresh_database, needs_postgres, postgres_server  # noqa: F401  (fixture)
from toolshell.frontends.cli import main as cli_main
from toolshell.store.engines import open_store

pytestmark = pytest.mark.anyio
LIMITS = (
    'allowed_hosts = ["mcp.example.com", "127.0.0.1"]\ntrusted_proxies = ["127.0.0.1"]\n'
    '[[limits]]\nname = "agents"\nper_minute = 1\nburst = 4\n'
    "[[quotas]]\ncalls_per_day = 1000\n"
)


async def _call(url: str, marker: str) -> httpx2.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "bash", "arguments": {"script": f"echo {marker}"}, "_meta": META},
    }
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}", "Host": "mcp.example.com"}
    headers |= {"Mcp-Method": "tools/call", "Mcp-Name": "bash"}
    async with httpx2.AsyncClient(timeout=60, verify=False) as http:  # a new connection: the proxy picks a worker
        return await http.post(url, content=json.dumps(body), headers=headers)


async def test_a_limit_holds_across_three_workers_behind_haproxy_and_the_quota_shows_in_stats(
    postgres_server: str | None, tmp_path: Path
) -> None:
    url = fresh_database(needs_postgres(postgres_server))
    marker = f"m{secrets.token_hex(4)}"
    with (
        fleet(tmp_path, fleet_env(url), 3, config=FLEET_CONFIG + LIMITS) as workers,
        proxy("haproxy", [port_of(w) for w in workers], tmp_path / "haproxy") as front,
    ):
        with anyio.fail_after(120):
            answers = [await _call(front.url, marker) for _ in range(5)]
    assert [a.status_code for a in answers] == [200, 200, 200, 200, 429], [a.text for a in answers]
    refused = answers[-1]
    wait = int(refused.headers["retry-after"])
    assert 1 <= wait <= 60
    assert refused.headers["ratelimit-policy"] == '"agents";q=1;w=60'
    assert refused.headers["ratelimit"] == f'"agents";r=0;t={wait}'
    error = refused.json()["error"]
    assert refused.json()["id"] == 7 and error["data"]["code"] == "rate_limited"
    assert error["data"]["retryable"] is True and error["data"]["retry_after_seconds"] == wait
    assert "agents" in error["message"] and "retry in" in error["message"]
    store = open_store(url)
    try:
        rows = store.query("SELECT worker FROM shell_calls WHERE script_preview LIKE ?", (f"%{marker}%",))
    finally:
        store.close()
    assert len(rows) == 4 and len({r["worker"] for r in rows}) >= 2, "the admitted calls ran on several workers"
    config = tmp_path / "stats.toml"
    config.write_text("[[quotas]]\ncalls_per_day = 1000\n")
    shown = CliRunner().invoke(cli_main, ["stats", "--config", str(config), "--json"], env={"TOOLSHELL_STATE_URL": url})
    assert shown.exit_code == 0, shown.output
    [usage] = json.loads(shown.output)["quotas"]
    assert usage["calls"] == 4 and usage["result_bytes"] > 0
