"""`setup HOST --move` and `config import`: other hosts' servers become toolshell's, secrets as `${VAR}`."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from toolshell import config as cfg
from toolshell.frontends.cli import main

CLAUDE = {
    "numStartups": 4,
    "mcpServers": {
        "github": {"type": "http", "url": "https://api.example/mcp", "headers": {"Authorization": "Bearer ghp_s3cr3t"}},
        "db": {"command": "db-mcp", "args": ["--ro"], "env": {"DB_PASSWORD": "hunter22", "MODE": "ro"}},
        "off": {"command": "old-mcp", "disabled": True},
    },
}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    return home


def user_config() -> Path:
    return Path(os.environ["XDG_CONFIG_HOME"]) / "toolshell" / "toolshell.toml"


def test_move_puts_the_hosts_servers_in_toolshell_toml_with_secrets_as_variables(home: Path) -> None:
    (home / ".claude.json").write_text(json.dumps(CLAUDE))
    result = CliRunner().invoke(main, ["setup", "claude-code", "--move", "--yes"])
    assert result.exit_code == 0, result.output
    assert "moving to" in result.output and "github, db, off" in result.output
    assert "set GITHUB_TOKEN" in result.output and "set DB_PASSWORD" in result.output
    written = user_config().read_text()
    assert "ghp_s3cr3t" not in written and "hunter22" not in written and "ghp_s3cr3t" not in result.output
    servers = {s["name"]: s for s in tomllib.loads(written)["mcp"]["servers"]}
    assert servers["github"]["headers"] == {"Authorization": "Bearer ${GITHUB_TOKEN}"}
    assert servers["db"]["env"] == {"DB_PASSWORD": "${DB_PASSWORD}", "MODE": "ro"}
    assert servers["off"]["enabled"] is False
    loaded = cfg.load_file(user_config(), env={"GITHUB_TOKEN": "t", "DB_PASSWORD": "p"})
    assert [s.name for s in loaded.mcp.servers] == ["github", "db", "off"]
    host = json.loads((home / ".claude.json").read_text())
    assert list(host) == ["numStartups", "mcpServers"] and list(host["mcpServers"]) == ["toolshell"]
    assert host["mcpServers"]["toolshell"]["args"][:3] == ["serve", "--config", str(user_config())]


def test_move_appends_to_an_existing_toolshell_toml_keeping_its_comments_and_same_named_servers(
    home: Path, tmp_path: Path
) -> None:
    mine = tmp_path / "toolshell-mine.toml"
    mine.write_text('# my servers\n[[mcp.servers]]\nname = "db"  # the real one\ncommand = "my-db"\n')
    codex = home / ".codex" / "config.toml"
    codex.parent.mkdir()
    codex.write_text(
        '[mcp_servers.db]\ncommand = "db-mcp"\n\n[mcp_servers.docs]\nurl = "https://docs.example/mcp"\n'
        'bearer_token_env_var = "DOCS_TOKEN"\n'
    )
    result = CliRunner().invoke(main, ["setup", "codex", "--move", "--yes", "--config", str(mine)])
    assert result.exit_code == 0, result.output
    assert "kept 'db'" in result.output
    text = mine.read_text()
    assert text.startswith('# my servers\n[[mcp.servers]]\nname = "db"  # the real one\n')
    docs = tomllib.loads(text)["mcp"]["servers"][1]
    assert docs == {
        "name": "docs",
        "type": "http",
        "url": "https://docs.example/mcp",
        "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"},
    }
    left = tomllib.loads(codex.read_text())["mcp_servers"]
    assert list(left) == ["db", "toolshell"]


def test_move_without_a_terminal_or_yes_changes_nothing(home: Path) -> None:
    (home / ".claude.json").write_text(json.dumps(CLAUDE))
    result = CliRunner().invoke(main, ["setup", "claude-code", "--move"])
    assert result.exit_code == 1 and "run this again with --yes" in result.output
    assert json.loads((home / ".claude.json").read_text()) == CLAUDE
    assert not user_config().exists()


def test_config_import_writes_a_literal_bearer_token_as_a_variable_and_names_it(tmp_path: Path) -> None:
    source = tmp_path / "claude_desktop_config.json"
    source.write_text(json.dumps({"mcpServers": {"my-api": CLAUDE["mcpServers"]["github"]}}))
    result = CliRunner().invoke(main, ["config", "import", str(source)])
    assert result.exit_code == 0
    assert 'headers = { "Authorization" = "Bearer ${MY_API_TOKEN}" }' in result.stdout
    assert "ghp_s3cr3t" not in result.stdout + result.stderr
    assert "mcp.servers[my-api].headers.Authorization held a secret; written as ${MY_API_TOKEN}" in result.stderr


def test_config_import_leaves_a_reference_as_it_was(tmp_path: Path) -> None:
    source = tmp_path / "mcp.json"
    spec = {"command": "x", "env": {"API_KEY": "${API_KEY}"}}
    source.write_text(json.dumps({"mcpServers": {"x": spec}}))
    result = CliRunner().invoke(main, ["config", "import", str(source)])
    assert 'env = { "API_KEY" = "${API_KEY}" }' in result.stdout and result.stderr == ""
