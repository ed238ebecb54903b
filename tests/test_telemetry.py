"""OpenTelemetry traces (`docs/telemetry.md`): exported over OTLP/HTTP to a real receiver on
127.0.0.1 that decodes the protobuf (`tests/_otlp_support.py`), never an in-memory exporter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from _otlp_support import Received, Receiver, otlp_receiver
from toolshell.config import Config, load_text
from toolshell.config.models import TelemetryConfig
from toolshell.frontends.serve.server import build_server
from toolshell.host import Host
from toolshell.telemetry import wanted

pytestmark = pytest.mark.anyio
READ = ToolAnnotations(readOnlyHint=True)
TOKEN = "tok-9f8e7d6c5b4a39281706"
CLIENT_KIND, INTERNAL_KIND, ERROR_STATUS = 3, 1, 2


def _octo(seen: list[str]) -> MCPServer:
    """A server that records the `traceparent` each call brought in its `_meta`."""
    server = MCPServer("octo", log_level="WARNING")

    async def echo(n: str, ctx: Context) -> str:
        seen.append(str((ctx.request_context.meta or {}).get("traceparent")))
        return f"echo {n}"

    async def broken(ctx: Context) -> str:
        seen.append(str((ctx.request_context.meta or {}).get("traceparent")))
        raise ToolError("broken on purpose")

    server.add_tool(echo, name="echo", description="Echo n.", annotations=READ)
    server.add_tool(broken, name="broken", description="Always fails.", annotations=READ)
    return server


def _config(receiver: Receiver, **telemetry: Any) -> Config:
    return Config.model_validate(
        {
            "mcp": {"servers": [{"name": "octo", "type": "builtin"}]},
            "telemetry": {"enabled": True, "endpoint": receiver.url, **telemetry},
        }
    )


def _ids(traceparent: str) -> str:
    """A W3C `traceparent` without its flags (version, trace id, parent span id)."""
    return traceparent.rpartition("-")[0]


def _children(receiver: Receiver, parent: Received) -> list[Received]:
    return [s for s in receiver.spans if s.parent_span_id == parent.span_id]


async def test_one_script_with_three_nested_calls_is_one_trace_of_a_shell_call_span_and_three_children(
    tmp_path: Path,
) -> None:
    seen: list[str] = []
    with otlp_receiver() as receiver:
        async with Host.open(_config(receiver), servers={"octo": _octo(seen)}, state_dir=tmp_path) as host:
            result = await host.run("tools octo echo n=1; tools octo echo n=22 >/dev/null; tools octo broken")
        shell = receiver.one("execute_tool bash")
        calls = _children(receiver, shell)
    assert result.exit_code == 1
    assert set(receiver.paths) == {"/v1/traces", "/v1/metrics"}, "spans and metrics each to their own path"
    assert shell.kind == INTERNAL_KIND and shell.parent_span_id == "" and shell.service == "toolshell"
    assert {k: shell.attributes[k] for k in ("gen_ai.tool.name", "toolshell.source", "toolshell.calls")} == {
        "gen_ai.tool.name": "bash",
        "toolshell.source": "agent",
        "toolshell.calls": 3,
    }
    assert shell.attributes["toolshell.outcome"] == "error" and shell.attributes["toolshell.exit_code"] == 1
    assert [c.name for c in calls] == ["tools/call echo", "tools/call echo", "tools/call broken"]
    assert {c.trace_id for c in calls} == {shell.trace_id}
    assert all(c.kind == CLIENT_KIND for c in calls)
    first, second, failed = (c.attributes for c in calls)
    assert {k: first[k] for k in ("mcp.method.name", "gen_ai.tool.name", "toolshell.server", "toolshell.outcome")} == {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "echo",
        "toolshell.server": "octo",
        "toolshell.outcome": "completed",
    }
    assert first["toolshell.risk"] == "read_only" and first["toolshell.result.bytes"] == len("echo 1")
    assert second["toolshell.result.bytes"] == len("echo 22")
    assert failed["toolshell.outcome"] == "failed" and failed["error.type"] == "tool_error"
    assert calls[2].status == ERROR_STATUS and "toolshell.duration_ms" in failed
    assert not any(k.startswith("gen_ai.tool.call.") for c in calls for k in c.attributes)  # no input unless asked


async def test_each_server_receives_the_traceparent_of_its_own_nested_call_span(tmp_path: Path) -> None:
    seen: list[str] = []
    with otlp_receiver() as receiver:
        async with Host.open(_config(receiver), servers={"octo": _octo(seen)}, state_dir=tmp_path) as host:
            await host.run("tools octo echo n=a & tools octo echo n=b & wait")
        calls = receiver.named("tools/call echo")
    expected = {f"00-{c.trace_id}-{c.span_id}" for c in calls}
    assert len(calls) == 2 and {_ids(tp) for tp in seen} == expected


async def test_an_upstream_sdk_clients_traceparent_is_the_parent_of_the_shell_call_span(tmp_path: Path) -> None:
    upstream = SpanContext(
        trace_id=0x4BF92F3577B34DA6A3CE929D0E0E4736,
        span_id=0x00F067AA0BA902B7,
        is_remote=False,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    seen: list[str] = []
    with otlp_receiver() as receiver:
        async with Host.open(_config(receiver), servers={"octo": _octo(seen)}, state_dir=tmp_path) as host:
            async with Client(build_server(host, [])) as client:
                # The client's own span is current, as in a traced application: the SDK puts its
                # traceparent in the request's `_meta` (SEP-414).
                token = otel_context.attach(trace.set_span_in_context(NonRecordingSpan(upstream)))
                try:
                    result = await client.call_tool("bash", {"script": "tools octo echo n=1"})
                finally:
                    otel_context.detach(token)
        shell = receiver.one("execute_tool bash")
        call = receiver.one("tools/call echo")
    assert not result.is_error
    assert shell.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736" and shell.parent_span_id == "00f067aa0ba902b7"
    assert call.parent_span_id == shell.span_id and [_ids(tp) for tp in seen] == [f"00-{shell.trace_id}-{call.span_id}"]


async def test_a_malformed_upstream_traceparent_is_ignored_and_the_shell_call_is_a_root_span(tmp_path: Path) -> None:
    hostile = {"traceparent": "00-" + "z" * 4000, "tracestate": "=" * 5000}
    with otlp_receiver() as receiver:
        async with Host.open(_config(receiver), servers={"octo": _octo([])}, state_dir=tmp_path) as host:
            async with Client(build_server(host, [])) as client:
                result = await client.call_tool("bash", {"script": "tools octo echo n=1"}, meta=hostile)
        shell = receiver.one("execute_tool bash")
    assert not result.is_error and result.structured_content is not None
    assert shell.parent_span_id == "" and receiver.one("tools/call echo").parent_span_id == shell.span_id


async def test_no_span_attribute_ever_shows_a_configured_secret_even_with_inputs_and_results_recorded(
    tmp_path: Path,
) -> None:
    seen: list[str] = []
    with otlp_receiver() as receiver:
        text = textwrap.dedent(
            f"""
            [telemetry]
            enabled = true
            endpoint = "{receiver.url}"
            record_io = true

            [[mcp.servers]]
            name = "octo"
            type = "builtin"

            [[mcp.servers]]
            name = "remote"
            type = "http"
            url = "http://127.0.0.1:9/mcp"
            load = "on_demand"
            headers = {{ Authorization = "Bearer ${{MY_TOKEN}}" }}
            """
        )
        config = load_text(text, env={"MY_TOKEN": TOKEN})
        async with Host.open(config, servers={"octo": _octo(seen)}, state_dir=tmp_path) as host:
            await host.run(f"tools octo echo n={TOKEN}; tools octo echo n=x{TOKEN}y; tools octo broken")
        spans = receiver.spans
    recorded = [s for s in spans if "gen_ai.tool.call.arguments" in s.attributes]
    assert len(recorded) == 3 and "***" in recorded[0].attributes["gen_ai.tool.call.arguments"]
    assert "***" in recorded[0].attributes["gen_ai.tool.call.result"]
    assert "***" in receiver.one("execute_tool bash").attributes["toolshell.script"]
    everything = json.dumps([[s.name, s.attributes] for s in spans])
    assert TOKEN not in everything and TOKEN[:12] not in everything


async def test_an_approval_wait_is_a_span_in_the_shell_calls_trace(tmp_path: Path) -> None:
    server = MCPServer("octo", log_level="WARNING")
    server.add_tool(
        lambda: "wiped", name="wipe", description="Wipe it.", annotations=ToolAnnotations(destructiveHint=True)
    )
    asked: list[str] = []

    async def approver(entry: Any, arguments: dict[str, Any], risk: Any) -> str:
        asked.append(entry.command)
        return "once"

    with otlp_receiver() as receiver:
        async with Host.open(_config(receiver), servers={"octo": server}, state_dir=tmp_path) as host:
            result = await host.session().run("tools octo wipe", approver=approver)
        shell = receiver.one("execute_tool bash")
        waits = receiver.named("toolshell.approval.wait")
    assert result.stdout == "wiped\n" and asked
    assert waits and {w.trace_id for w in waits} == {shell.trace_id}
    assert waits[0].attributes == {"toolshell.command": "tools octo wipe", "toolshell.why": "destructive"}


async def test_a_server_start_is_a_span_under_the_shell_call_that_needed_the_server(tmp_path: Path) -> None:
    with otlp_receiver() as receiver:
        config = _config(receiver).model_copy(deep=True)
        config.mcp.servers[0].load = "on_demand"
        async with Host.open(config, servers={"octo": _octo([])}, state_dir=tmp_path) as host:
            await host.run("tools octo echo n=1")
        shell = receiver.one("execute_tool bash")
        starts = {s.attributes["toolshell.server"]: s for s in receiver.named("toolshell.server.start")}
    assert starts["octo"].parent_span_id == shell.span_id and starts["octo"].trace_id == shell.trace_id
    assert starts["runtime"].parent_span_id == ""  # a startup server starts with the host, in no shell call


def test_tracing_is_on_only_when_configured_and_the_standard_variables_can_turn_it_off() -> None:
    assert not wanted(TelemetryConfig(), env={})
    assert wanted(TelemetryConfig(), env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert wanted(TelemetryConfig(enabled=True), env={})
    assert not wanted(TelemetryConfig(enabled=False), env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert not wanted(TelemetryConfig(enabled=True), env={"OTEL_SDK_DISABLED": "true"})
    assert not wanted(TelemetryConfig(enabled=True), env={"OTEL_TRACES_EXPORTER": "none"})


_PROBE = """
import sys, anyio
from toolshell.host import Host
async def main():
    async with Host.open(state_dir=sys.argv[1]) as host:
        r = await host.run("tools text-metrics --help >/dev/null; echo ran")
    print(r.stdout.strip(), host.telemetry is None, "opentelemetry.sdk" in sys.modules)
anyio.run(main)
"""


def _probe(state: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", _PROBE, str(state)]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


def test_with_tracing_off_a_run_never_imports_the_opentelemetry_sdk_and_the_otel_variables_turn_it_on(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    off = _probe(tmp_path / "a", env)
    with otlp_receiver() as receiver:
        env |= {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_SERVICE_NAME": "agents-toolshell"}
        on = subprocess.run(
            [sys.executable, "-c", _PROBE, str(tmp_path / "b")], env=env, capture_output=True, text=True
        )
        shell = receiver.one("execute_tool bash")
    assert off.stdout.split() == ["ran", "True", "False"], off.stderr
    assert on.stdout.split() == ["ran", "False", "True"], on.stderr
    assert shell.service == "agents-toolshell" and shell.attributes["toolshell.calls"] == 0


_FAILING = (
    "import os, sys\nprint('auth failed with token ' + os.environ['SERVER_TOKEN'], file=sys.stderr)\nsys.exit(1)\n"
)


async def test_a_server_that_fails_to_start_printing_its_token_leaves_it_in_no_attribute_event_or_status(
    tmp_path: Path,
) -> None:
    """`record_io` off: the SDK's own exception recording (`exception.message`, `.stacktrace`, the
    status description) would carry the server's stderr; the span says only what failed, masked."""
    (tmp_path / "leaky.py").write_text(_FAILING)
    with otlp_receiver() as receiver:
        text = textwrap.dedent(
            f"""
            [telemetry]
            enabled = true
            endpoint = "{receiver.url}"

            [[mcp.servers]]
            name = "leaky"
            command = {json.dumps(sys.executable)}
            args = [{json.dumps(str(tmp_path / "leaky.py"))}]
            load = "on_demand"
            env = {{ SERVER_TOKEN = "${{MY_TOKEN}}" }}
            """
        )
        config = load_text(text, env={"MY_TOKEN": TOKEN})
        async with Host.open(config, state_dir=tmp_path / "state") as host:
            result = await host.run("tools leaky whoami")
        starts = receiver.named("toolshell.server.start")
        spans = receiver.spans
    leaky = [s for s in starts if s.attributes["toolshell.server"] == "leaky"]
    assert json.loads(result.stderr)["error"]["code"] == "unavailable" and "token ***" in result.stderr
    assert leaky and all(s.status == ERROR_STATUS and s.events == [] for s in leaky)
    failed = leaky[0].attributes
    assert failed["error.type"] == "unavailable" and failed["toolshell.error_code"] == "unavailable"
    assert "token ***" in failed["toolshell.error.message"] and "token ***" in leaky[0].status_message
    everything = json.dumps([[s.name, s.attributes, s.events, s.status_message] for s in spans])
    assert TOKEN not in everything and TOKEN[:12] not in everything


async def test_a_secret_straddling_the_recorded_cut_is_masked_whole_before_the_text_is_cut(tmp_path: Path) -> None:
    """`record_io` keeps 1,000 characters: the token starts at 990 of the result (992 of the
    arguments), so cutting before masking would leave its first 8-10 characters on the span."""
    pad = "x" * 985
    with otlp_receiver() as receiver:
        config = load_text(
            f'[telemetry]\nenabled = true\nendpoint = "{receiver.url}"\nrecord_io = true\n\n'
            '[[mcp.servers]]\nname = "octo"\ntype = "builtin"\n\n[[mcp.servers]]\nname = "remote"\ntype = "http"\n'
            'url = "http://127.0.0.1:9/mcp"\nload = "on_demand"\nheaders = { Authorization = "Bearer ${MY_TOKEN}" }\n',
            env={"MY_TOKEN": TOKEN},
        )
        async with Host.open(config, servers={"octo": _octo([])}, state_dir=tmp_path) as host:
            result = await host.run(f"tools octo echo n={pad}{TOKEN}{pad}")
        call = receiver.one("tools/call echo").attributes
    assert result.stdout == f"echo {pad}***{pad}\n"
    assert call["gen_ai.tool.call.result"] == f"echo {pad}***{pad}"[:1000]
    assert call["gen_ai.tool.call.arguments"] == json.dumps({"n": f"{pad}***{pad}"})[:1000]
    assert TOKEN[:6] not in json.dumps(call)


async def test_a_call_to_an_unknown_command_or_tool_is_a_failed_nested_span_named_by_what_the_script_wrote(
    tmp_path: Path,
) -> None:
    with otlp_receiver() as receiver:
        async with Host.open(_config(receiver), servers={"octo": _octo([])}, state_dir=tmp_path) as host:
            result = await host.run("tools nosuch-server thing n=1; tools octo nope; tools octo echo n=1")
        shell = receiver.one("execute_tool bash")
        calls = _children(receiver, shell)
    assert result.exit_code == 0 and result.stdout == "echo 1\n"
    assert [c.name for c in calls] == ["tools/call", "tools/call", "tools/call echo"]
    unknown_server, unknown_tool = (c.attributes for c in calls[:2])
    assert unknown_server["toolshell.command"] == "tools nosuch-server thing"
    assert unknown_tool["toolshell.command"] == "tools octo nope"
    for attributes in (unknown_server, unknown_tool):
        assert attributes["error.type"] == attributes["toolshell.error_code"] == "unknown_command"
        assert attributes["mcp.method.name"] == "tools/call" and "toolshell.duration_ms" in attributes
        assert "gen_ai.tool.name" not in attributes, "no tool was resolved"
    assert unknown_server["toolshell.outcome"] == unknown_tool["toolshell.outcome"] == "failed", "as the timeline says"
    assert calls[0].status == calls[1].status == ERROR_STATUS
    assert {c.trace_id for c in calls} == {shell.trace_id}
