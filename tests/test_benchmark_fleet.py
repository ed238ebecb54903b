# ruff: noqa: F811  (the engine fixtures are imported from _store_support and named as parameters)
"""benchmarks/fleet.py: a short run of a one-worker fleet on the real PostgreSQL, its raw JSON-RPC
client on both protocol eras against a real `serve --http`, and its lost-state check."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from _store_support import needs_postgres, postgres_server  # noqa: F401  (fixtures)

BENCH = Path(__file__).parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))
import fleet  # noqa: E402 - benchmarks/ is a folder of scripts, put on the path just above
import fleet_pg  # noqa: E402
from fleet_load import LostState, Plan, Session, percentile  # noqa: E402


def test_a_short_run_counts_calls_transactions_and_wal_and_every_shell_kept_its_lines(
    postgres_server: str | None, tmp_path: Path
) -> None:
    url = needs_postgres(postgres_server)
    out = tmp_path / "fleet.json"
    argv = [sys.executable, str(BENCH / "fleet.py"), "--workers", "1", "--sessions-per-worker", "2"]
    argv += [
        "--seconds",
        "3",
        "--warmup",
        "1",
        "--baseline-calls",
        "0",
        "--no-floor",
        "--postgres-url",
        url,
        "--json-out",
        str(out),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=os.environ)
    assert done.returncode == 0, done.stdout + done.stderr
    (point,) = json.loads(out.read_text())["points"]
    assert point["calls"] > 0 and point["p50_ms"] > 0
    assert point["errors"] == {} and point["lost_state"] == []
    assert point["checked_calls"] == point["calls"]
    assert point["worker_cpu_ms_per_call"] > 0 and point["load_cpu_ms_per_call"] > 0
    assert point["transactions_per_call"] > 0 and point["writing_transactions_per_call"] > 0
    assert point["wal_bytes_per_call"] > 0  # each call saves the shell: the database wrote
    assert "| workers | load | sessions | calls/s |" in done.stdout


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
def test_a_shell_that_lost_lines_of_its_log_is_reported_on_either_protocol(
    postgres_server: str | None, tmp_path: Path, protocol: str
) -> None:
    url = needs_postgres(postgres_server)
    name = f"fleet_test_{os.getpid()}_{protocol[:4]}"
    workers = fleet.Workers(fleet.toolshell_exe(), fleet_pg.fresh_database(url, name), 1, None, tmp_path)
    try:

        async def scenario() -> LostState:
            plan = Plan(workers.urls, workers.token, [0, 1], 2, protocol, None)
            one, other = Session(0, plan), Session(1, plan)
            await one.open()  # the first call: the shell is made, its log has one line
            await one.call()
            await other.open()  # another shell, one line in its log
            assert one.done == 2 and one.handle is not None and other.handle != one.handle
            one.handle = other.handle  # the next call lands in a shell that lacks one line of the log
            with pytest.raises(LostState) as lost:
                await one.call()
            one.close()
            other.close()
            return lost.value

        lost = asyncio.run(scenario())
        assert lost.record == {"session": 0, "expected": 3, "got": 2}
    finally:
        workers.stop()
        fleet_pg.drop_database(url, name)


def test_percentiles_are_nearest_rank() -> None:
    samples = [float(x) for x in range(1, 101)]
    assert percentile(samples, 0.50) == 50.0
    assert percentile(samples, 0.99) == 99.0
    assert percentile(samples, 1.0) == 100.0
    assert percentile([7.0], 0.99) == 7.0
    assert percentile([], 0.5) is None
