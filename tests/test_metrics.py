"""OpenTelemetry metrics (issue 23 §4): exported over OTLP/HTTP to a real receiver, and scraped
from a real `serve --http` worker's Prometheus port over HTTP; names follow the MCP and database
semantic conventions where they name the metric."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from prometheus_client.parser import text_string_to_metric_families

from _net_support import free_port
from _otlp_support import Point, otlp_receiver
from _serve_auth_support import GITHUB_CONFIG, client, serving
from toolshell.config import Config
from toolshell.config.models import TelemetryConfig
from toolshell.errors import ToolshellError
from toolshell.host import Host
from toolshell.telemetry import metrics_wanted
from toolshell.telemetry.metrics import scrape_token

pytestmark = pytest.mark.anyio
READ = ToolAnnotations(readOnlyHint=True)
TOKEN = "serve-token-for-the-metrics-tests-0123456789"


def _octo() -> MCPServer:
    server = MCPServer("octo", log_level="WARNING")

    async def echo(n: str) -> str:
        return f"echo {n}"

    async def wipe() -> str:
        return "wiped"

    server.add_tool(echo, name="echo", description="Echo n.", annotations=READ)
    server.add_tool(wipe, name="wipe", description="Wipe.", annotations=ToolAnnotations(destructiveHint=True))
    return server


def _one(points: list[Point], **attributes: Any) -> Point:
    found = [p for p in points if all(p.attributes.get(k) == v for k, v in attributes.items())]
    assert len(found) == 1, (attributes, [p.attributes for p in points])
    return found[0]


async def test_nested_calls_shell_calls_and_pending_approvals_reach_a_real_otlp_receiver(tmp_path: Path) -> None:
    with otlp_receiver() as receiver:
        config = Config.model_validate(
            {
                "mcp": {"servers": [{"name": "octo", "type": "builtin"}]},
                "telemetry": {"enabled": True, "endpoint": receiver.url},
            }
        )
        async with Host.open(config, servers={"octo": _octo()}, state_dir=tmp_path) as host:
            await host.run("tools octo echo n=1; tools octo echo n=2")

            async def says_once(entry: Any, arguments: Any, risk: Any) -> str:
                return "once"

            session = host.session()
            await session.run("tools octo wipe", approver=says_once)  # asked, answered, sent
            session.close()
            await host.run("tools octo wipe")  # nobody to ask: it stops, its request stays pending
            worker = host.worker_id
        sent = receiver.metric("mcp.client.operation.duration")
        nested = receiver.metric("toolshell.nested_calls")
        shells = receiver.metric("toolshell.shell_calls")
        pending = receiver.metric("toolshell.approvals.pending")
        waits = receiver.metric("toolshell.approval.wait.duration")
        writes = receiver.metric("db.client.operation.duration")
    echo = _one(sent, **{"gen_ai.tool.name": "echo"})
    assert (echo.kind, echo.unit, echo.count) == ("histogram", "s", 2)
    assert echo.attributes == {
        "gen_ai.tool.name": "echo",
        "gen_ai.operation.name": "execute_tool",
        "mcp.method.name": "tools/call",
        "toolshell.server": "octo",
        "toolshell.outcome": "completed",
    }
    assert 0 < echo.sum < 60 and echo.resource["service.instance.id"] == worker
    assert _one(nested, **{"gen_ai.tool.name": "wipe", "toolshell.outcome": "completed"}).value == 1
    stopped = _one(nested, **{"gen_ai.tool.name": "wipe", "toolshell.outcome": "stopped_for_approval"})
    assert (stopped.value, stopped.attributes["toolshell.outcome"]) == (1, "stopped_for_approval")
    assert stopped.attributes["error.type"] == "needs_approval"
    assert _one(nested, **{"gen_ai.tool.name": "echo"}).value == 2
    ok, failed = _one(shells, **{"toolshell.outcome": "ok"}), _one(shells, **{"toolshell.outcome": "error"})
    assert (ok.value, failed.value) == (2, 1)
    waited = _one(waits, **{"toolshell.answer": "once"})
    assert (waited.count, waited.attributes["gen_ai.tool.name"], waited.attributes["toolshell.server"]) == (
        1,
        "wipe",
        "octo",
    )
    assert _one(sent, **{"gen_ai.tool.name": "wipe"}).count == 1, "the approved call was sent"
    timeline = _one(writes, **{"db.operation.name": "timeline.write"})
    assert timeline.count >= 1 and timeline.attributes["db.system.name"] == "sqlite"
    assert [p.value for p in pending] == [1], "the gauge reads the store: one request is waiting"


async def test_no_metric_label_holds_an_input_a_session_or_a_caller(tmp_path: Path) -> None:
    with otlp_receiver() as receiver:
        config = Config.model_validate(
            {
                "mcp": {"servers": [{"name": "octo", "type": "builtin"}]},
                "telemetry": {"enabled": True, "endpoint": receiver.url},
            }
        )
        async with Host.open(config, servers={"octo": _octo()}, state_dir=tmp_path) as host:
            session = host.session(caller="token:abcdef")
            await session.run("tools octo echo n=the-secret-input")
            session_id = session.id
            session.close()
    values = json.dumps([p.attributes for p in receiver.points])
    assert receiver.points and "the-secret-input" not in values
    assert session_id not in values and "token:abcdef" not in values


def _scrape(text: str) -> dict[str, list[Any]]:
    samples: dict[str, list[Any]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append(sample)
    return samples


async def test_a_serving_worker_answers_a_prometheus_scrape_over_http_with_the_same_instruments(
    tmp_path: Path,
) -> None:
    port = free_port()
    config = GITHUB_CONFIG + f"[serve]\nheartbeat_seconds = 1\n[telemetry]\nprometheus_port = {port}\n"
    state = tmp_path / "state"
    with serving(state, config=config, env={"TOOLSHELL_SERVE_TOKEN": TOKEN}) as served:
        async with client(served.url, TOKEN) as c:
            await c.call_tool("bash", {"script": "tools github list-pulls repo=acme/api"})
        url = f"http://127.0.0.1:{port}/metrics"
        async with httpx2.AsyncClient(timeout=30) as http:
            with anyio.fail_after(30):
                while True:  # the heartbeat runs every second: poll until one is counted (bounded)
                    scraped = await http.get(url)
                    samples = _scrape(scraped.text)
                    if samples.get("toolshell_heartbeats_total"):
                        break
                    await anyio.sleep(0.5)
            rebound = await http.get(url, headers={"Host": "evil.example"})
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    [sent] = [
        s
        for s in samples["mcp_client_operation_duration_seconds_count"]
        if s.labels["gen_ai_tool_name"] == "list-pulls"
    ]
    assert sent.value == 1 and sent.labels["toolshell_server"] == "github"
    [served_count] = samples["mcp_server_operation_duration_seconds_count"]
    assert served_count.value == 1 and served_count.labels["gen_ai_tool_name"] == "bash"
    assert samples["toolshell_heartbeats_total"][0].value >= 1
    assert any(
        s.labels["db_operation_name"] == "heartbeat" for s in samples["db_client_operation_duration_seconds_count"]
    )
    assert [s.value for s in samples["toolshell_workers_alive"]] == [1]
    # The one shell the call ran in stays live in this worker, and its files are counted.
    assert [s.value for s in samples["toolshell_live_shells"]] == [1]
    assert samples["toolshell_live_shells_bytes"][0].value > 0
    assert rebound.status_code == 403, "DNS-rebinding protection: a foreign Host gets nothing"


@pytest.mark.parametrize(
    ("config", "env", "exported"),
    [
        ({}, {}, False),
        ({}, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({}, {"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://127.0.0.1:4318/v1/metrics"}, True),
        ({"enabled": True}, {}, True),
        ({"enabled": True, "metrics": False}, {}, False),
        ({"enabled": True}, {"OTEL_METRICS_EXPORTER": "none"}, False),
        ({"enabled": True}, {"OTEL_TRACES_EXPORTER": "none"}, True),
        ({"enabled": True}, {"OTEL_SDK_DISABLED": "true"}, False),
        ({"enabled": False}, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, False),
    ],
)
def test_metrics_are_exported_when_traces_would_be_and_their_own_variables_say_so(
    config: dict[str, Any], env: dict[str, str], exported: bool
) -> None:
    assert metrics_wanted(TelemetryConfig(**config), env) is exported


async def test_a_scrape_token_keeps_the_metrics_from_anyone_without_it(tmp_path: Path) -> None:
    port = free_port()
    scrape = "scrape-token-for-the-metrics-tests-987654321"
    config = GITHUB_CONFIG + f'[telemetry]\nprometheus_port = {port}\nprometheus_token_env = "TOOLSHELL_SCRAPE_TOKEN"\n'
    env = {"TOOLSHELL_SERVE_TOKEN": TOKEN, "TOOLSHELL_SCRAPE_TOKEN": scrape}
    with serving(tmp_path / "state", config=config, env=env) as served:
        async with client(served.url, TOKEN) as c:
            await c.call_tool("bash", {"script": "tools github list-pulls repo=acme/api"})
        url = f"http://127.0.0.1:{port}/metrics"
        async with httpx2.AsyncClient(timeout=30) as http:
            bare = await http.get(url)
            wrong = await http.get(url, headers={"Authorization": "Bearer not-the-token"})
            serve_token = await http.get(url, headers={"Authorization": f"Bearer {TOKEN}"})
            right = await http.get(url, headers={"Authorization": f"Bearer {scrape}"})
    for refused in (bare, wrong, serve_token):
        assert refused.status_code == 401, refused.text
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert "mcp_server_operation" not in refused.text
    assert right.status_code == 200
    [served_count] = _scrape(right.text)["mcp_server_operation_duration_seconds_count"]
    assert served_count.labels["gen_ai_tool_name"] == "bash"


def test_a_scrape_token_variable_that_is_not_set_refuses_to_serve_the_metrics_open() -> None:
    with pytest.raises(ToolshellError) as refused:
        scrape_token("TOOLSHELL_NO_SUCH_TOKEN", {})
    assert refused.value.code == "invalid_input" and "TOOLSHELL_NO_SUCH_TOKEN" in refused.value.message
    assert scrape_token(None, {}) is None
    assert scrape_token("T", {"T": "abc"}) == "abc"
