"""What the operator's controls cost per call: the audit trail, a nested-call limit, a shell-call
limit and a daily quota, against the same calls with none of them, on each store engine.

Usage: `python benchmarks/controls.py [--calls N] [--postgres-url URL]`. In process: one `Host`,
one script of one nested `tools` call (an in-process server whose tool returns at once), run N
times per case after a warm-up; the shell-call limit and the quota are checked the way the HTTP
transport checks them (`Limits.admit_shell_call` + `count_result` around the run). Reports the
median ms per shell call and the added cost against the case with no controls; then each
control's own step timed alone (median µs of N: one limit check, one quota count, one audit line),
which is steadier than a difference of two end-to-end medians on a busy machine. Without
`--postgres-url` (or `TOOLSHELL_TEST_POSTGRES_URL`) only SQLite runs.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer

from toolshell.config import Config
from toolshell.config.operator import AuditConfig, LimitRule, QuotaRule
from toolshell.host import Host
from toolshell.policy.limits import Limits
from toolshell.redact import Redactor
from toolshell.registry.entry import ToolEntry
from toolshell.store.engines import open_store
from toolshell.timeline.audit import AuditLog

SCRIPT = "tools octo echo n=1"
CASES: dict[str, dict[str, Any]] = {
    "no controls": {},
    "audit to a file": {"audit": {"enabled": True}},
    "audit, input digested": {"audit": {"enabled": True, "input": "digest"}},
    "nested-call limit": {"limits": [{"name": "n", "applies_to": "nested_calls", "per_minute": 1e6}]},
    "shell-call limit": {"limits": [{"name": "s", "per_minute": 1e6}]},
    "shell-call limit + quota": {"limits": [{"name": "s", "per_minute": 1e6}], "quotas": [{"calls_per_day": 10**9}]},
}


def _octo() -> MCPServer:
    server = MCPServer("octo", log_level="WARNING")

    async def echo(n: str) -> str:
        return n

    server.add_tool(echo, name="echo", description="Echo n.")
    return server


async def _case(settings: dict[str, Any], calls: int, state: Path, store_url: str | None) -> float:
    raw: dict[str, Any] = {"mcp": {"servers": [{"name": "octo", "type": "builtin"}]}, **settings}
    if store_url is not None:
        raw["state"] = {"url": store_url}
    config = Config.model_validate(raw)
    async with Host.open(config, servers={"octo": _octo()}, state_dir=state) as host:
        limits = host.policy.limits
        session = host.session(source="agent")
        times: list[float] = []
        for i in range(calls + 20):
            started = time.perf_counter()
            if limits.shell_rules or limits.quotas:
                await anyio.to_thread.run_sync(limits.admit_shell_call, "bench")
            result = await session.run(SCRIPT)
            if limits.quotas:
                await anyio.to_thread.run_sync(limits.count_result, "bench", len(result.stdout))
            if i >= 20:  # after the warm-up
                times.append(time.perf_counter() - started)
            assert result.exit_code == 0, result
        return statistics.median(times) * 1000


def _steps(calls: int, state: Path, store_url: str | None) -> dict[str, float]:
    """Median µs of each control's own step, alone."""
    store = open_store(store_url or str(state / "steps.db"))
    limits = Limits(
        store,
        [
            LimitRule(name="s", per_minute=1e6),
            LimitRule(name="n", applies_to="nested_calls", per_minute=1e6),
        ],
        [QuotaRule(calls_per_day=10**9)],
    )
    audit = AuditLog(AuditConfig(enabled=True), state, Redactor(["sk-a-configured-secret-0123"]), "w1")
    tool = ToolEntry(server="octo", name="echo", description="", input_schema={"type": "object"})
    steps = {
        "limit check (1 rule)": lambda: limits._take(limits.shell_rules[0], "bench", ""),
        "quota: check + count": lambda: (limits._quota("bench"), limits.count_result("bench", 100)),
        "nested limit check": lambda: limits.admit_nested_call("bench", tool),
        "audit line (masked input)": lambda: audit.nested_call(
            shell_call_id="s",
            session_id="x",
            caller="bench",
            address="127.0.0.1",
            server="octo",
            tool="echo",
            arguments={"n": "1", "repo": "acme/api"},
            outcome="completed",
            error_code=None,
            duration_ms=0.1,
            result_bytes=10,
        ),
    }
    out: dict[str, float] = {}
    for name, step in steps.items():
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            step()
            times.append(time.perf_counter() - started)
        out[name] = statistics.median(times) * 1e6
    audit.close()
    store.close()
    return out


def _database(server: str) -> str:
    import psycopg  # lazy: only where PostgreSQL is measured

    name = "bench_" + secrets.token_hex(4)
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    base, _, query = server.partition("?")
    return f"{base.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--postgres-url", default=os.environ.get("TOOLSHELL_TEST_POSTGRES_URL"))
    args = parser.parse_args()
    engines: list[tuple[str, str | None]] = [("sqlite", None)]
    if args.postgres_url:
        engines.append(("postgresql", args.postgres_url))
    print(f"{'case':<28} {'engine':<11} {'ms/call':>8} {'added ms':>9}")
    for engine, server in engines:
        base = None
        for name, settings in CASES.items():
            with tempfile.TemporaryDirectory() as state:
                url = None if server is None else _database(server)
                ms = await _case(settings, args.calls, Path(state), url)
            base = ms if base is None else base
            print(f"{name:<28} {engine:<11} {ms:>8.3f} {ms - base:>+9.3f}")
    print(f"\n{'step alone':<28} {'engine':<11} {'µs':>8}")
    for engine, server in engines:
        with tempfile.TemporaryDirectory() as state:
            url = None if server is None else _database(server)
            for name, us in _steps(args.calls, Path(state), url).items():
                print(f"{name:<28} {engine:<11} {us:>8.1f}")


if __name__ == "__main__":
    anyio.run(main)
