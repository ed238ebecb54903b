"""The audit trail (issue 33 §2): one JSON line per shell call and per nested call, in a 0600 file
appended one write per line, with masked or digested input, per-server opt-out, and lines that
survive a worker killed mid-run."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from _fleet_support import MCP_HEADERS, META
from _github_server import make_github
from _otlp_support import otlp_receiver
from _serve_auth_support import GITHUB_CONFIG, serving
from toolshell.config import Config
from toolshell.errors import ConfigError, ToolshellError
from toolshell.frontends.serve.server import serve
from toolshell.host import Host

pytestmark = pytest.mark.anyio
SECRET = "sk-audit-secret-0123456789abcdef"
TOKEN = "serve-token-for-the-audit-tests-0123456789"


def _lines(path: Path) -> list[dict[str, Any]]:
    """Every whole line of the file (a last line without its newline was cut by a crash)."""
    text = path.read_text()
    whole = text.split("\n")[:-1]
    return [json.loads(line) for line in whole]


def _config(tmp_path: Path, **audit: Any) -> Config:
    config = Config.model_validate(
        {
            "mcp": {
                "servers": [
                    {"name": "github", "type": "builtin"},
                    {"name": "quiet", "type": "builtin", "audit": False},
                ]
            },
            "audit": {"enabled": True, **audit},
        }
    )
    config.set_secrets([SECRET])  # as loading does with `secret_env`'s values
    return config


async def test_each_shell_call_and_nested_call_is_one_line_with_the_span_attribute_names(tmp_path: Path) -> None:
    config = _config(tmp_path)
    servers = {"github": make_github(), "quiet": make_github()}
    script = (
        f"tools github get-pull repo=acme/api number=7 note={SECRET}; tools quiet list-pulls repo=acme/api;"
        f" tools {SECRET} nothing; true"
    )
    async with Host.open(config, servers=servers, state_dir=tmp_path) as host:
        result = await host.run(script)
    assert result.exit_code == 0, result
    path = tmp_path / "audit.jsonl"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    lines = _lines(path)
    assert SECRET not in path.read_text(), "a configured secret never reaches the audit file"
    nested = [line for line in lines if line["event.name"] == "toolshell.nested_call"]
    [shell] = [line for line in lines if line["event.name"] == "toolshell.shell_call"]
    assert [(n["toolshell.server"] if "toolshell.server" in n else None) for n in nested] == ["github", None]
    sent, unknown = nested
    assert sent["gen_ai.tool.name"] == "get-pull" and sent["mcp.method.name"] == "tools/call"
    assert sent["toolshell.outcome"] == "completed" and "error.type" not in sent
    assert sent["toolshell.result.bytes"] > 0 and sent["toolshell.duration_ms"] >= 0
    assert '"repo":"acme/api"' in sent["gen_ai.tool.call.arguments"].replace(" ", "")
    assert "***" in sent["gen_ai.tool.call.arguments"]
    assert unknown["error.type"] == "unknown_command" and "***" in unknown["gen_ai.tool.name"]
    assert shell["toolshell.exit_code"] == 0 and shell["gen_ai.tool.name"] == "bash"
    assert shell["toolshell.shell_call.id"] == sent["toolshell.shell_call.id"]
    assert shell["toolshell.worker"] == sent["toolshell.worker"] == host.worker_id
    assert sent["time"].endswith("+00:00")


async def test_digest_mode_writes_the_inputs_hash_and_never_the_input(tmp_path: Path) -> None:
    config = _config(tmp_path, input="digest", path="trail/audit.log")
    async with Host.open(config, servers={"github": make_github(), "quiet": make_github()}, state_dir=tmp_path) as host:
        await host.run("tools github get-pull repo=acme/api number=7")
    [sent] = [line for line in _lines(tmp_path / "trail" / "audit.log") if line["event.name"].endswith("nested_call")]
    expected = hashlib.sha256(b'{"number":7,"repo":"acme/api"}').hexdigest()
    assert sent["toolshell.arguments.sha256"] == expected
    assert "gen_ai.tool.call.arguments" not in sent


async def test_an_audit_file_others_could_read_is_tightened_and_a_link_is_never_followed(tmp_path: Path) -> None:
    wide = tmp_path / "audit.jsonl"
    wide.write_text("")
    wide.chmod(0o644)
    async with Host.open(
        _config(tmp_path), servers={"github": make_github(), "quiet": make_github()}, state_dir=tmp_path
    ):
        pass
    assert stat.S_IMODE(wide.stat().st_mode) == 0o600
    elsewhere = tmp_path / "bashrc"
    elsewhere.write_text("untouched\n")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "audit.jsonl").symlink_to(elsewhere)
    with pytest.raises(ConfigError, match="link is never followed"):
        async with Host.open(
            _config(linked), servers={"github": make_github(), "quiet": make_github()}, state_dir=linked
        ):
            pass
    assert elsewhere.read_text() == "untouched\n"


async def test_a_worker_killed_mid_run_leaves_only_whole_lines_behind(tmp_path: Path) -> None:
    config = GITHUB_CONFIG + "[audit]\nenabled = true\n"
    state = tmp_path / "state"
    path = state / "audit.jsonl"
    loop = "for i in $(seq 1 100000); do tools github list-pulls repo=acme/api > /dev/null; done"
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "bash", "arguments": {"script": loop}, "_meta": META},
    }
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}", "Mcp-Method": "tools/call", "Mcp-Name": "bash"}
    with serving(state, config=config, env={"TOOLSHELL_SERVE_TOKEN": TOKEN}) as served:
        async with anyio.create_task_group() as tg, httpx2.AsyncClient(timeout=120) as http:

            async def run_forever() -> None:
                try:
                    await http.post(served.url, content=json.dumps(body), headers=headers)
                except httpx2.HTTPError:  # the worker is killed under it: the call cannot end well
                    pass

            tg.start_soon(run_forever)
            with anyio.fail_after(120):
                while True:  # poll the file (bounded) until the loop has written 50 lines: kill it then
                    if path.exists() and len(path.read_text().splitlines()) >= 50:
                        break
                    await anyio.sleep(0.05)
            os.kill(served.proc.pid, signal.SIGKILL)
            served.proc.wait(10)
    lines = _lines(path)
    assert len(lines) >= 50
    assert all(line["event.name"] in ("toolshell.shell_call", "toolshell.nested_call") for line in lines)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_stdout_audit_is_refused_beside_the_stdio_transport(tmp_path: Path) -> None:
    config = Config.model_validate({"audit": {"enabled": True, "to": "stdout"}})
    with pytest.raises(ToolshellError, match="stdio transport"):
        await serve(config, str(tmp_path), http=False, host="127.0.0.1", port=0)


async def test_the_audit_trail_goes_out_as_opentelemetry_log_records(tmp_path: Path) -> None:
    with otlp_receiver() as receiver:
        config = _config(tmp_path, to="otel")
        config.telemetry.endpoint = receiver.url
        servers = {"github": make_github(), "quiet": make_github()}
        async with Host.open(config, servers=servers, state_dir=tmp_path) as host:
            await host.run(f"tools github get-pull repo=acme/api number=7 note={SECRET}")
    assert not (tmp_path / "audit.jsonl").exists()
    events = {log["event_name"]: log for log in receiver.logs}
    assert set(events) == {"toolshell.nested_call", "toolshell.shell_call"}, receiver.logs
    sent = events["toolshell.nested_call"]["attributes"]
    assert sent["gen_ai.tool.name"] == "get-pull" and sent["toolshell.server"] == "github"
    assert "***" in sent["gen_ai.tool.call.arguments"] and SECRET not in str(receiver.logs)
