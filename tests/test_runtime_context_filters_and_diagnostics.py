"""DESIGN §7, end to end: the session context a script's call carries, the
project key, a user's built-in registered by `module`, stdio `cwd`, `mcpServers` JSON as the config,
server filters in the shell, and what `toolshell servers` shows."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

from _connections_support import SERVERS, STDIO_SERVER
from _github_server import make_github
from toolshell.config import Config
from toolshell.connections.base import ConnState
from toolshell.frontends.cli import main
from toolshell.host import Host

pytestmark = pytest.mark.anyio


def _context_server() -> MCPServer:
    server = MCPServer("ctx", log_level="WARNING")

    async def whoami(ctx: Context) -> str:
        return json.dumps((ctx.request_context.meta or {}).get("io.toolshell/session"))

    server.add_tool(whoami, name="whoami", annotations=ToolAnnotations(readOnlyHint=True))
    return server


async def test_a_call_from_a_script_carries_the_calling_sessions_context(tmp_path: Path) -> None:
    repo, plain = tmp_path / "repo", tmp_path / "plain"
    (repo / ".git").mkdir(parents=True)
    plain.mkdir()
    config = Config.model_validate({"roles": [{"name": "developer:general", "mcp": {"server_refs": ["ctx"]}}]})
    async with Host.open(config, servers={"ctx": _context_server()}) as host:
        one = await host.session(session_id="s-1", role="developer:general", workdir=str(repo)).run("tools ctx whoami")
        two = await host.session(session_id="s-2", workdir=str(plain)).run("tools ctx whoami")
        project = host.project_id
    assert json.loads(one.stdout) == {
        "role": "developer",
        "spec": "general",
        "project": project,
        "session_id": "s-1",
        "workdir": str(repo),
        "git": True,
        "shell": True,
        "context_epoch": 0,
    }
    assert {k: v for k, v in json.loads(two.stdout).items() if k in ("session_id", "role", "git", "workdir")} == {
        "session_id": "s-2",
        "role": "",
        "git": False,
        "workdir": str(plain),
    }


@pytest.mark.parametrize(
    "remote", ["git@github.com:acme/api.git", "https://github.com/acme/api.git", "ssh://github.com/acme/api"]
)
async def test_the_project_key_is_16_hex_chars_of_the_normalized_git_remote(
    tmp_path: Path, monkeypatch, remote
) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text(f'[core]\n\tbare = false\n[remote "origin"]\n\turl = {remote}\n')
    monkeypatch.chdir(tmp_path)
    async with Host.open() as host:
        assert host.project_id == hashlib.sha256(b"github.com/acme/api").hexdigest()[:16]


@pytest.fixture
def in_plain_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Work in a directory that is no git repository; its canonical path."""
    monkeypatch.chdir(tmp_path)
    return str(tmp_path.resolve())


async def test_without_a_git_remote_the_project_key_comes_from_the_canonical_path(in_plain_dir: str) -> None:
    async with Host.open() as host:
        assert host.project_id == hashlib.sha256(in_plain_dir.encode()).hexdigest()[:16]


async def test_a_users_builtin_server_is_registered_in_one_place_by_its_module() -> None:
    config = Config.model_validate(
        {"mcp": {"servers": [{"name": "echo", "type": "builtin", "module": "_builtin_support:make_server"}]}}
    )
    async with Host.open(config) as host:
        result = await host.run("tools echo --help | head -1; tools echo echo text=hi")
    assert (result.stdout, result.stderr) == ("tools echo <tool>: 1 tool\nhi\n", "")


async def test_a_stdio_server_runs_in_its_configured_cwd() -> None:
    server = {
        "name": "rel",
        "type": "stdio",
        "command": sys.executable,
        "args": ["stdio_server.py"],
        "cwd": str(SERVERS),
    }
    config = Config.model_validate({"mcp": {"servers": [server]}, "approval": {"mode": "off"}})
    async with Host.open(config) as host:
        result = await host.run("tools rel echo text=from-its-cwd")
    assert (result.stdout, result.stderr) == ("from-its-cwd\n", ""), "the relative path resolves only in `cwd`"


def test_another_hosts_mcp_servers_json_is_used_as_the_config_file_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(json.dumps({"mcpServers": {"echoer": {"command": sys.executable, "args": [STDIO_SERVER]}}}))
    result = CliRunner().invoke(
        main,
        ["run", "--config", str(path), "--state-dir", str(tmp_path / "st"), "-c", "tools echoer echo text=imported"],
    )
    assert (result.exit_code, result.stdout) == (0, "imported\n"), result.output


async def test_a_servers_tools_filter_hides_the_other_tools_from_the_shell() -> None:
    config = Config.model_validate(
        {"mcp": {"servers": [{"name": "github", "type": "builtin", "tools": ["get-*", "list-pulls"]}]}}
    )
    async with Host.open(config, servers={"github": make_github()}) as host:
        listed = await host.run("tools github --help")
        hidden = await host.run("tools github search-code query=x")
    assert listed.stdout.splitlines()[0] == "tools github <tool>: 2 tools"
    assert json.loads(hidden.stderr)["error"]["code"] == "unknown_command"


async def test_host_open_reports_each_startup_servers_progress() -> None:
    seen: list[tuple[str, Any]] = []
    lazy = Config.model_validate({"mcp": {"servers": [{"name": "github", "type": "builtin", "load": "on_demand"}]}})
    async with Host.open(
        lazy, servers={"github": make_github()}, on_server_progress=lambda s, st: seen.append((s, st))
    ):
        pass
    assert sorted(seen) == sorted(
        [(name, state) for name in ("text_metrics", "runtime") for state in (ConnState.CONNECTING, ConnState.READY)]
    )


def test_toolshell_servers_shows_state_protocol_tool_count_last_error_and_stderr_tail(tmp_path: Path) -> None:
    config = tmp_path / "servers.toml"
    config.write_text(
        f'[[mcp.servers]]\nname = "good"\ncommand = "{sys.executable}"\nargs = ["{STDIO_SERVER}"]\n'
        f'[[mcp.servers]]\nname = "stuck"\ncommand = "{sys.executable}"\nargs = ["{STDIO_SERVER}", "hang-startup"]\n'
        "startup_timeout_seconds = 0.5\n"
    )
    base = ["servers", "--config", str(config), "--state-dir", str(tmp_path / "st")]
    text = CliRunner().invoke(main, base)
    rows = {r["name"]: r for r in json.loads(CliRunner().invoke(main, [*base, "--json"]).stdout)}
    error = (
        "server 'stuck' could not start: no answer to the MCP handshake within 0.5s; its stderr said: "
        "'stdio-test-server starting'"
    )
    assert text.exit_code == 0
    shown = [line for line in text.stdout.splitlines() if not line.startswith("    rated ")]  # ratings: their own tests
    assert shown[:4] == [
        f"{'good':<16} {'stdio':<8} {'ready':<11} load={'startup':<10} tools={'4':<4} 2025-11-25",
        f"{'stuck':<16} {'stdio':<8} {'failed':<11} load={'startup':<10} tools={'-':<4} -",
        f"    last error: {error}",
        "    stderr| stdio-test-server starting",
    ]
    assert isinstance(rows["good"].pop("rated", []), list)  # which tools were rated: their own tests
    assert rows["good"] == {
        "name": "good", "type": "stdio", "state": "ready", "load": "startup", "protocol_version": "2025-11-25",
        "tool_count": 4, "last_error": None, "stderr_tail": ["stdio-test-server starting", "listing tools"],
        "restarts": 0, "auth_reason": None,
    }  # fmt: skip
    assert (rows["stuck"]["state"], rows["stuck"]["last_error"], rows["stuck"]["stderr_tail"]) == (
        "failed",
        error,
        ["stdio-test-server starting"],
    )
