"""benchmarks/cli.py: one tiny run of the whole-process benchmark, and its refusal to time a failure."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from _ci_support import requires

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
import cli as bench  # noqa: E402 - benchmarks/ is a folder of scripts, put on the path just above

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "cli.py"
needs_time_server = requires(
    shutil.which("mcp-server-time", path=str(Path(sys.executable).parent)) or shutil.which("mcp-server-time"),
    reason="run `pip install -e '.[dev]'` (mcp-server-time)",
)
COLD = ["python_pass", "python_import_mcp", "echo_cold", "time_cold", "servers_cold"]


@needs_time_server
def test_one_quick_round_times_every_command_and_records_its_checked_answer(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    args = [sys.executable, str(SCRIPT), "--rounds", "1", "--quick", "--no-mcporter", "--out", str(out)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    summary = json.loads(out.read_text())
    cases = summary["cases"]
    warm = ["echo_warm", "time_warm", "servers_warm"] if summary["warm"] == "measured" else []
    assert list(cases) == COLD + warm
    for case in cases.values():
        assert case["runs"] == len(case["samples_ms"]) == 1
        assert case["median_ms"] == case["p90_ms"] == case["samples_ms"][0] > 0
    for phase in ["cold", *(["warm"] if warm else [])]:
        assert cases[f"echo_{phase}"]["answer"] == "hi"
        assert cases[f"time_{phase}"]["answer"].startswith("UTC 20")
        assert cases[f"servers_{phase}"]["answer"].startswith("time ")
    assert cases["time_cold"]["command"] in {
        "toolshell run -c 'tools time get-current-time timezone=UTC'",
        "toolshell run --no-daemon -c 'tools time get-current-time timezone=UTC'",
    }
    assert summary["mcporter"] == {"status": "skipped (--no-mcporter)"}
    assert [t["what"] for t in summary["targets"]] == [
        "echo_warm median ms",
        "time_warm median ms",
        "echo_cold / python_import_mcp",
    ]
    assert "target: echo_cold / python_import_mcp = " in done.stdout
    if not warm:
        assert summary["warm"].startswith("not available")
        assert [t["met"] for t in summary["targets"][:2]] == [None, None]
        assert "target: time_warm median ms = not available (at most 50.0): not available" in done.stdout


def test_a_command_that_fails_or_answers_wrongly_stops_the_run_instead_of_being_timed(tmp_path: Path) -> None:
    env = dict(os.environ)
    failing = bench.Case("fails", [sys.executable, "-c", "raise SystemExit(3)"], env, bench._ok, "fails")
    with pytest.raises(bench.BenchmarkError, match="fails: exit 3"):
        bench.measure([failing], 1, tmp_path, warmup=False)
    wrong = bench.Case("echo", [sys.executable, "-c", "print('ho')"], env, bench._hi, "echo hi")
    with pytest.raises(bench.BenchmarkError, match="echo hi: expected 'hi', got 'ho\\\\n'"):
        bench.measure([wrong], 1, tmp_path, warmup=False)
    not_time = bench.Case("time", [sys.executable, "-c", "print('{}')"], env, bench._time_json, "the call")
    with pytest.raises(bench.BenchmarkError, match="the call: not the time JSON"):
        bench.measure([not_time], 1, tmp_path, warmup=False)


def test_the_daemons_request_count_is_found_wherever_its_status_puts_it() -> None:
    status = {"running": True, "pid": 1649, "uptime_seconds": 6.0, "requests": 12, "reloads": 0}
    assert bench.served(status) == 12
    assert bench.served({"uptime_s": 3.5, "requests_served": 7}) == 7
    assert bench.served({"daemon": {"running": True, "requests": 4}, "servers": []}) == 4
    assert bench.served([{"served": 2}]) == 2
    assert bench.served({"running": True, "servers": [{"name": "time", "tools": 2}]}) is None
