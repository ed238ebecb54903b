"""`toolshell stats` and `GET /api/stats`: per server and tool, from the timeline — calls, errors
by code, approvals asked, p50/p95/max duration."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

from _cli_support import toolshell
from toolshell.config import Config
from toolshell.frontends.web import web_app
from toolshell.host import Host
from toolshell.timeline.events import NestedCall
from toolshell.timeline.stats import parse_duration, summarize

pytestmark = pytest.mark.anyio
READ = ToolAnnotations(readOnlyHint=True)
TOKEN = "test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _octo() -> MCPServer:
    server = MCPServer("octo", log_level="WARNING")

    def broken() -> str:
        raise ToolError("broken on purpose")

    server.add_tool(lambda n: f"echo {n}", name="echo", description="Echo n.", annotations=READ)
    server.add_tool(broken, name="broken", description="Always fails.", annotations=READ)
    server.add_tool(
        lambda: "wiped", name="wipe", description="Wipe.", annotations=ToolAnnotations(destructiveHint=True)
    )
    return server


_CONFIG = Config.model_validate({"mcp": {"servers": [{"name": "octo", "type": "builtin"}]}})
_SCRIPT = (
    "for n in 1 2 3; do tools octo echo n=$n; done; tools octo broken; tools web-fetch url=x; w=wipe; tools octo $w"
)


async def _record(state: Path) -> None:
    """Calls from a real run, plus one echo from two hours ago."""
    async with Host.open(_CONFIG, servers={"octo": _octo()}, state_dir=state) as host:
        await host.run(_SCRIPT)
        old = NestedCall("old.1", "old", "s", "tools octo echo", "{}", "completed", None, 9999.0, time.time() - 7200)
        host.sink.emit(old)


def test_the_percentiles_are_nearest_rank_over_calls_that_ran_and_errors_count_by_code() -> None:
    calls: list[dict[str, Any]] = [
        {"command": "tools octo echo", "outcome": "completed", "error_code": None, "duration_ms": float(ms)}
        for ms in range(1, 21)
    ]
    calls += [
        {"command": "tools octo echo", "outcome": "failed", "error_code": "unavailable", "duration_ms": 100.0},
        {"command": "tools octo echo", "outcome": "refused", "error_code": "denied", "duration_ms": 0.0},
        {
            "command": "tools web-fetch",
            "outcome": "stopped_for_approval",
            "error_code": "needs_approval",
            "duration_ms": 0.0,
        },
    ]
    asked = [{"command": "tools web-fetch"}, {"command": "tools web-fetch"}]
    fetch, echo = summarize(calls, asked)  # top-level tools first
    assert (echo.server, echo.tool, echo.calls, echo.errors) == ("octo", "echo", 22, {"unavailable": 1, "denied": 1})
    assert (echo.p50_ms, echo.p95_ms, echo.max_ms) == (11.0, 20.0, 100.0)  # 21 calls ran; the refused one did not
    assert (fetch.server, fetch.tool, fetch.calls, fetch.approvals_asked) == (None, "web-fetch", 1, 2)
    assert (fetch.p50_ms, fetch.p95_ms, fetch.max_ms) == (None, None, None), "no call ran: no duration, not 0 ms"


def test_a_duration_is_a_number_and_a_unit_and_anything_else_names_the_form() -> None:
    assert [parse_duration(t) for t in ("30s", "15m", "2h", "1h30m", "7d", "1w")] == [
        30,
        900,
        7200,
        5400,
        604800,
        604800,
    ]
    for bad in ("", "5", "5x", "-1h", "1.5h", "h", "9" * 12 + "s"):
        with pytest.raises(ValueError, match="write a number and a unit"):
            parse_duration(bad)


async def test_toolshell_stats_shows_each_tools_calls_errors_approvals_and_durations(tmp_path: Path) -> None:
    await _record(tmp_path)
    everything = toolshell("stats", "--state-dir", str(tmp_path), "--json")
    recent = toolshell("stats", "--state-dir", str(tmp_path), "--json", "--since", "1h", "--server", "octo")
    table = toolshell("stats", "--state-dir", str(tmp_path))
    assert everything.returncode == 0, everything.stderr
    rows = {(r["server"], r["tool"]): r for r in json.loads(everything.stdout)["rows"]}
    assert set(rows) == {("octo", "echo"), ("octo", "broken"), ("octo", "wipe"), (None, "web-fetch")}
    assert rows["octo", "echo"]["calls"] == 4 and rows["octo", "echo"]["max_ms"] == 9999.0
    assert rows["octo", "broken"]["errors"] == {"tool_error": 1}
    assert rows["octo", "wipe"]["errors"] == {"needs_approval": 1} and rows["octo", "wipe"]["approvals_asked"] == 1
    assert rows[None, "web-fetch"]["errors"] == {"denied": 1}  # `x` is no web address
    shown = json.loads(recent.stdout)
    assert isinstance(shown["since"], float) and time.time() - 3700 < shown["since"] < time.time()
    by_tool = {r["tool"]: r for r in shown["rows"]}
    assert set(by_tool) == {"echo", "broken", "wipe"} and by_tool["echo"]["calls"] == 3
    assert by_tool["echo"]["max_ms"] < 9999.0
    assert table.stdout.splitlines()[0].split() == [
        "server", "tool", "calls", "errors", "approvals", "p50", "p95", "max"
    ]  # fmt: skip
    assert any(line.split()[:3] == ["octo", "echo", "4"] for line in table.stdout.splitlines())
    [wipe] = [line.split() for line in table.stdout.splitlines() if line.split()[:2] == ["octo", "wipe"]]
    assert wipe[-3:] == ["-", "-", "-"], "a tool none of whose calls ran shows no duration, not 0.0ms"
    assert rows["octo", "wipe"]["p50_ms"] is None


def test_a_bad_since_is_one_clear_error_without_a_traceback(tmp_path: Path) -> None:
    ran = toolshell("stats", "--state-dir", str(tmp_path), "--since", "yesterday")
    assert ran.returncode == 2 and "Traceback" not in ran.stderr
    assert "'yesterday' is not a duration; write a number and a unit" in ran.stderr


async def test_the_web_api_serves_the_same_rows_as_toolshell_stats_json(tmp_path: Path) -> None:
    await _record(tmp_path)
    cli = json.loads(toolshell("stats", "--state-dir", str(tmp_path), "--json", "--server", "octo").stdout)
    async with Host.open(_CONFIG, servers={"octo": _octo()}, state_dir=tmp_path) as host:
        transport = httpx2.ASGITransport(app=web_app(host, TOKEN))
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8766") as client:
            page = (await client.get("/api/stats?server=octo", headers=AUTH)).json()
            recent = (await client.get("/api/stats?since=1h", headers=AUTH)).json()
            bad = await client.get("/api/stats?since=soon", headers=AUTH)
            anonymous = await client.get("/api/stats")
    assert page == cli and page["since"] is None
    assert {r["tool"] for r in recent["rows"]} == {"echo", "broken", "wipe", "web-fetch"}
    assert next(r for r in recent["rows"] if r["tool"] == "echo")["calls"] == 3
    assert bad.status_code == 400 and "write a number and a unit" in bad.json()["error"]["message"]
    assert anonymous.status_code == 401
