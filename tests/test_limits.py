# ruff: noqa: F811  (the engine fixtures are imported from _store_support and named as parameters)
"""Rate limits and daily quotas (issue 33 §1), on both store engines: a limit is the fleet's (two
stores on one database share it, and racing threads never take more than the burst), a refusal
says which limit and when to retry, and a script can branch on a refused nested call."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from _github_server import make_github
from _store_support import ENGINES, postgres_server, store_url  # noqa: F401  (fixtures)
from toolshell.config import Config
from toolshell.config.operator import LimitRule, QuotaRule
from toolshell.errors import ConfigError
from toolshell.frontends.web import web_app
from toolshell.host import Host
from toolshell.policy.limits import Limits
from toolshell.registry.entry import ToolEntry
from toolshell.store.engines import open_store
from toolshell.store.protocol import StateStore

both_engines = pytest.mark.parametrize("store_url", ENGINES, indirect=True)


@pytest.fixture
def stores(store_url: str) -> Iterator[tuple[StateStore, StateStore]]:
    """Two stores on one database: two workers of a fleet."""
    first, second = open_store(store_url), open_store(store_url)
    yield first, second
    first.close()
    second.close()


def _tool(server: str, name: str) -> ToolEntry:
    return ToolEntry(server=server, name=name, description="", input_schema={"type": "object"})


@both_engines
def test_a_limit_holds_for_the_fleet_and_the_refusal_says_when_to_retry(
    stores: tuple[StateStore, StateStore],
) -> None:
    rule = LimitRule(name="per-caller", per_minute=6, burst=3)
    one, two = Limits(stores[0], [rule], []), Limits(stores[1], [rule], [])
    admitted = [one.admit_shell_call("ann"), two.admit_shell_call("ann"), one.admit_shell_call("ann")]
    assert admitted == [None, None, None]
    refused = two.admit_shell_call("ann")
    assert refused is not None and refused.name == "per-caller"
    assert 0 < refused.retry_after <= 10.0  # one place frees every 10 s at 6 a minute
    assert "per-caller" in refused.message and "caller ann" in refused.message and "retry in" in refused.message
    headers = refused.headers()
    assert headers["Retry-After"] == str(refused.retry_after_seconds)
    assert headers["RateLimit-Policy"] == '"per-caller";q=6;w=60'
    assert headers["RateLimit"].startswith('"per-caller";r=0;t=')
    assert one.admit_shell_call("bob") is None, "each caller has a counter of its own"


@both_engines
def test_racing_workers_never_take_more_than_the_burst(stores: tuple[StateStore, StateStore]) -> None:
    rule = LimitRule(name="shared", per_minute=1, burst=5, per="all")
    limits = [Limits(stores[i % 2], [rule], []) for i in range(2)]
    results: list[bool] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def take(i: int) -> None:
        start.wait()
        for _ in range(3):
            ok = limits[i % 2].admit_shell_call(f"caller-{i}") is None
            with lock:
                results.append(ok)

    threads = [threading.Thread(target=take, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(results) == 24 and results.count(True) == 5


@both_engines
def test_a_nested_limit_counts_only_the_tools_its_pattern_names(stores: tuple[StateStore, StateStore]) -> None:
    rule = LimitRule(name="search", applies_to="nested_calls", tool="github:search-*", per_minute=60, burst=1)
    limits = Limits(stores[0], [rule], [])
    assert limits.admit_nested_call("ann", _tool("github", "search-code")) is None
    assert limits.admit_nested_call("ann", _tool("github", "get-pull")) is None
    assert limits.admit_nested_call("ann", _tool("github", "get-pull")) is None
    refused = limits.admit_nested_call("ann", _tool("github", "search-code"))
    assert refused is not None and refused.retry_after_seconds == 1


@both_engines
def test_a_daily_quota_refuses_until_midnight_and_counts_result_bytes(stores: tuple[StateStore, StateStore]) -> None:
    limits = Limits(stores[0], [], [QuotaRule(calls_per_day=2, result_bytes_per_day=1_000)])
    other = Limits(stores[1], [], [QuotaRule(calls_per_day=2, result_bytes_per_day=1_000)])
    assert limits.admit_shell_call("ann") is None
    limits.count_result("ann", 10)
    assert other.admit_shell_call("ann") is None
    other.count_result("ann", 20)
    refused = limits.admit_shell_call("ann")
    assert refused is not None and refused.name == "daily" and "00:00 UTC" in refused.message
    assert 0 < refused.retry_after <= 86_400
    assert limits.admit_shell_call("bob") is None
    limits.count_result("bob", 5_000)
    assert limits.admit_shell_call("bob") is not None, "the bytes of results count too"
    assert limits.usage() == [
        {"caller": "ann", "calls": 2, "result_bytes": 30},
        {"caller": "bob", "calls": 1, "result_bytes": 5_000},
    ]


def test_two_limits_with_one_name_are_refused(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "s.db"))
    rule = LimitRule(name="x", per_minute=1)
    with pytest.raises(ConfigError, match="two limits are named x"):
        Limits(store, [rule, rule], [])
    store.close()


def test_a_tool_pattern_on_a_shell_call_limit_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match='applies_to = "nested_calls"'):
        LimitRule(name="x", per_minute=1, tool="github:*")


@pytest.mark.anyio
async def test_a_script_branches_on_a_rate_limited_nested_call(tmp_path: Path) -> None:
    config = Config.model_validate(
        {
            "mcp": {"servers": [{"name": "github", "type": "builtin"}]},
            "limits": [
                {"name": "pulls", "applies_to": "nested_calls", "tool": "github:list-*", "per_minute": 1, "burst": 2}
            ],
        }
    )
    script = """
for i in 1 2 3; do
  if out=$(tools github list-pulls repo=acme/api 2>&1); then echo "ok $i"
  else echo "$out" | jq -c '.error | {code, retryable, retry_after_seconds}'; fi
done
"""
    async with Host.open(config, servers={"github": make_github()}, state_dir=tmp_path) as host:
        result = await host.run(script)
    lines = result.stdout.strip().splitlines()
    assert lines[:2] == ["ok 1", "ok 2"]
    refused = json.loads(lines[2])
    assert refused["code"] == "rate_limited" and refused["retryable"] is True
    assert 1 <= refused["retry_after_seconds"] <= 60


@pytest.mark.anyio
async def test_the_page_shows_each_callers_quota_use_of_the_day(tmp_path: Path) -> None:
    config = Config.model_validate({"quotas": [{"calls_per_day": 100}]})
    async with Host.open(config, state_dir=tmp_path) as host:
        host.policy.limits.count_result("ann", 120)
        host.policy.limits.count_result("ann", 30)
        transport = httpx2.ASGITransport(app=web_app(host, "page-token-for-the-limits-test-0123456789"))
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8766") as client:
            headers = {"Authorization": "Bearer page-token-for-the-limits-test-0123456789"}
            page = (await client.get("/api/stats", headers=headers)).json()
    assert page["quotas"] == [{"caller": "ann", "calls": 2, "result_bytes": 150}]
