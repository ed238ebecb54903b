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


# Issue 30, items 2 and 3: a real `--move` from a 0600 host file holding secrets of every shape.
PASSWORD = "Pw-db-5ecret-77"
AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"
SLACK = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
API_KEY = "q9X2-api-value-31"
GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
OPENAI = "sk-proj-" + "abcdEFGHijklMNOPqrst" + "T3BlbkFJ" + "uvwxYZabcdEFGHijklMN"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJjaS1ib3QiLCJpYXQiOjE3MDAwMDAwMDB9."
    "k3lmiV2t79wzCltM07cY1pVE4lDLZOgVI8naGS6GSTk"
)
PRIVATE_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU=\n-----END OPENSSH PRIVATE KEY-----"
SECRETS = [PASSWORD, AWS_KEY, SLACK, API_KEY, GITHUB, OPENAI, JWT, PRIVATE_KEY]
WITH_SECRETS = {
    "numStartups": 9,
    "mcpServers": {
        "db": {
            "command": "db-mcp",
            "args": ["--url", f"postgres://admin:{PASSWORD}@db.example/app", "--key", AWS_KEY],
            "env": {"SLACK": SLACK, "MODE": "ro"},
        },
        "search": {"type": "http", "url": f"https://search.example/mcp?api_key={API_KEY}&region=eu"},
        "kit": {
            "command": "npx",
            "args": ["-y", "kit-mcp", "--identity", JWT, f"--upstream=https://proxy.example/{OPENAI}/v1"],
            "env": {"GH": GITHUB, "SIGNING": PRIVATE_KEY, "HOME_DIR": "/home/me"},
        },
    },
}
# What toolshell.toml holds in their place, and the variable that gives each value back.
LIFTED = {
    "DB_PASSWORD": PASSWORD,
    "DB_KEY": AWS_KEY,
    "SLACK_TOKEN": SLACK,
    "SEARCH_API_KEY": API_KEY,
    "KIT_JSON_WEB_TOKEN": JWT,
    "KIT_OPENAI_TOKEN": OPENAI,
    "GH_TOKEN": GITHUB,
    "SIGNING_TOKEN": PRIVATE_KEY,
}


def _plant_claude_json(home: Path) -> str:
    text = json.dumps(WITH_SECRETS, indent=2)
    (home / ".claude.json").write_text(text)
    (home / ".claude.json").chmod(0o600)
    return text


def test_move_writes_a_0600_toolshell_toml_with_every_secret_shape_as_a_masked_variable(home: Path) -> None:
    _plant_claude_json(home)
    result = CliRunner().invoke(main, ["setup", "claude-code", "--move", "--yes"])
    assert result.exit_code == 0, result.output
    written = user_config().read_text()
    assert user_config().stat().st_mode & 0o777 == 0o600
    assert [s for s in SECRETS if s in written or s in result.output] == []
    for variable in LIFTED:
        assert f"set {variable}\n" in result.output
    servers = {s["name"]: s for s in tomllib.loads(written)["mcp"]["servers"]}
    assert servers["db"]["args"] == ["--url", "postgres://admin:${DB_PASSWORD}@db.example/app", "--key", "${DB_KEY}"]
    assert servers["db"]["env"] == {"SLACK": "${SLACK_TOKEN}", "MODE": "ro"}
    assert servers["search"]["url"] == "https://search.example/mcp?api_key=${SEARCH_API_KEY}&region=eu"
    assert servers["kit"]["args"][3:] == [
        "${KIT_JSON_WEB_TOKEN}",
        "--upstream=https://proxy.example/${KIT_OPENAI_TOKEN}/v1",
    ]
    assert servers["kit"]["env"] == {"GH": "${GH_TOKEN}", "SIGNING": "${SIGNING_TOKEN}", "HOME_DIR": "/home/me"}
    # Set the variables, and each server is what it was in the host's file; each value is masked.
    loaded = cfg.load_file(user_config(), env=LIFTED)
    got = {s.name: s for s in loaded.mcp.servers}
    for name in ("db", "kit"):
        assert got[name].args == WITH_SECRETS["mcpServers"][name]["args"]
        assert got[name].env == WITH_SECRETS["mcpServers"][name]["env"]
    assert got["search"].url == WITH_SECRETS["mcpServers"]["search"]["url"]
    assert set(SECRETS) - loaded.secrets == set() and "/home/me" not in loaded.secrets


def test_move_keeps_the_original_host_file_as_its_one_backup(home: Path) -> None:
    original = _plant_claude_json(home)
    result = CliRunner().invoke(main, ["setup", "claude-code", "--move", "--yes"])
    assert result.exit_code == 0, result.output
    backup = home / ".claude.json.toolshell.bak"
    assert backup.read_text() == original and backup.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in home.iterdir() if p.name.startswith(".claude.json")) == [
        ".claude.json",
        ".claude.json.toolshell.bak",
    ]
    assert f"(the previous file: {backup})" in result.output
    assert list(json.loads((home / ".claude.json").read_text())["mcpServers"]) == ["toolshell"]


def test_move_never_replaces_an_earlier_backup_and_names_the_new_one(home: Path) -> None:
    original = _plant_claude_json(home)
    (home / ".claude.json.toolshell.bak").write_text("an earlier run's backup\n")
    result = CliRunner().invoke(main, ["setup", "claude-code", "--move", "--yes"])
    assert result.exit_code == 0, result.output
    assert (home / ".claude.json.toolshell.bak").read_text() == "an earlier run's backup\n"
    assert (home / ".claude.json.toolshell.bak.1").read_text() == original
    assert not (home / ".claude.json.toolshell.bak.2").exists()


def test_move_into_an_existing_toolshell_toml_makes_it_no_wider_than_the_host_file(home: Path) -> None:
    _plant_claude_json(home)
    user_config().parent.mkdir(parents=True)
    user_config().write_text("# mine\n")
    user_config().chmod(0o644)
    result = CliRunner().invoke(main, ["setup", "claude-code", "--move", "--yes"])
    assert result.exit_code == 0, result.output
    assert user_config().stat().st_mode & 0o777 == 0o600
    assert user_config().read_text().startswith("# mine\n")
    assert (user_config().parent / "toolshell.toml.toolshell.bak").read_text() == "# mine\n"
