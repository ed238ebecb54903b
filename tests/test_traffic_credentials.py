"""Credentials in tool traffic (issue 33 §4): a server that returns each credential shape has it
masked before the script (and the model, and the replay records) see it; a script that sends one
to a tool that reaches outside the host is refused with `denied`, which `tools plan` shows; an
allowed tool, a closed-world tool and a server with `scan_results = false` are let through."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from test_secrets_scan import AWS_KEY, GITHUB, JWT, KEY, OPENAI, SLACK
from toolshell.config import Config
from toolshell.host import Host

pytestmark = pytest.mark.anyio
URL_PASSWORD = "Pw-db-5ecret"
SHAPES = {
    "AWS Access Key": AWS_KEY,
    "GitHub Token": GITHUB,
    "Slack Token": SLACK,
    "OpenAI Token": OPENAI,
    "JSON Web Token": JWT,
    "Private Key": KEY,
    "Basic Auth Credentials": f"postgres://admin:{URL_PASSWORD}@db.example/app",
}
CLOSED = ToolAnnotations(openWorldHint=False, destructiveHint=False)


def _leaky() -> MCPServer:
    server = MCPServer("leaky", log_level="WARNING")

    async def config_of(kind: str) -> dict[str, Any]:
        return {"kind": kind, "value": SHAPES[kind], "note": "from the vault"}

    async def post(text: str) -> str:
        return f"posted {len(text)} characters"

    async def note(text: str) -> str:
        return f"noted {len(text)} characters"

    server.add_tool(config_of, name="config-of", description="A config value.", annotations=CLOSED)
    server.add_tool(post, name="post", description="Post text to the web (open world).")
    server.add_tool(note, name="note", description="Keep a local note.", annotations=CLOSED)
    return server


def _config(**server: Any) -> Config:
    return Config.model_validate(
        {
            "approval": {"mode": "off"},
            "mcp": {"servers": [{"name": "leaky", "type": "builtin", **server}]},
        }
    )


@pytest.mark.parametrize("kind", sorted(SHAPES))
async def test_a_credential_a_server_returns_is_masked_before_the_script_sees_it(kind: str, tmp_path: Path) -> None:
    async with Host.open(_config(), servers={"leaky": _leaky()}, state_dir=tmp_path) as host:
        result = await host.run(f"tools leaky config-of kind='{kind}' | jq -r .value")
        rows = host.store.query("SELECT * FROM nested_calls")
    secret = URL_PASSWORD if kind == "Basic Auth Credentials" else SHAPES[kind]
    assert result.exit_code == 0, result
    assert secret not in result.stdout and secret not in json.dumps(result.to_json())
    assert f"[credential: {kind}]" in result.stdout
    assert any("credential(s) in the result were masked" in hint for hint in result.hints)
    assert secret not in json.dumps([dict(r) for r in rows])


async def test_a_server_with_scan_results_off_passes_its_results_through(tmp_path: Path) -> None:
    async with Host.open(_config(scan_results=False), servers={"leaky": _leaky()}, state_dir=tmp_path) as host:
        result = await host.run("tools leaky config-of kind='AWS Access Key' | jq -r .value")
    assert result.stdout.strip() == AWS_KEY


@pytest.mark.parametrize("kind", sorted(SHAPES))
async def test_a_script_that_sends_a_credential_out_is_denied_and_nothing_is_sent(kind: str, tmp_path: Path) -> None:
    sent = json.dumps({"text": f"here it is: {SHAPES[kind]}"})
    async with Host.open(_config(), servers={"leaky": _leaky()}, state_dir=tmp_path) as host:
        result = await host.run(f"tools leaky post '{sent}'")
        note = await host.run(f"tools leaky note '{sent}'")
        plan = await host.run(f"tools plan <<'EOF'\ntools leaky post '{sent}'\nEOF")
        rows = host.store.query("SELECT input_preview, error_code FROM nested_calls")
    assert result.exit_code == 1
    error = json.loads(result.stderr.strip().splitlines()[-1])["error"]
    assert error["code"] == "denied" and kind in error["message"] and "[scan] allow_inputs" in error["message"]
    assert SHAPES[kind].splitlines()[0] not in error["message"]
    assert note.exit_code == 0, "a closed-world tool keeps the credential on this host"
    [planned] = json.loads(plan.stdout)["calls"]
    assert planned["risk"] == "blocked" and planned["why"] == "credential", plan.stdout
    secret = URL_PASSWORD if kind == "Basic Auth Credentials" else SHAPES[kind].splitlines()[0]
    assert secret not in json.dumps([dict(r) for r in rows]), "the timeline keeps a marker, never the value"
    assert any(r["error_code"] == "denied" and "[credential:" in r["input_preview"] for r in rows)


async def test_a_closed_world_tool_and_an_allowed_tool_get_the_credential(tmp_path: Path) -> None:
    config = Config.model_validate(
        {
            "approval": {"mode": "off"},
            "mcp": {"servers": [{"name": "leaky", "type": "builtin"}]},
            "scan": {"allow_inputs": ["leaky:post"]},
        }
    )
    sent = json.dumps({"text": AWS_KEY})
    async with Host.open(config, servers={"leaky": _leaky()}, state_dir=tmp_path) as host:
        posted = await host.run(f"tools leaky post '{sent}'")
        noted = await host.run(f"tools leaky note '{sent}'")
    assert posted.exit_code == 0 and noted.exit_code == 0, (posted, noted)
