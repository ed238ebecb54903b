"""Masking hides what is secret, not every configured value (docs/configuration.md, secrets):
secret-named variables, header values, `*_env` variables and `secret_env` are masked; a path or
a repository shows as it is."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from _cli_support import toolshell
from toolshell.config import load_text
from toolshell.host import Host
from toolshell.redact import Redactor, secret_name

TOKEN = "tok-0123456789-secret"
GIT_SERVER = shutil.which("mcp-server-git") or str(Path(sys.executable).parent / "mcp-server-git")
PATH = "/srv/memory/notes.json"


@pytest.mark.parametrize(
    "name", ["GITHUB_TOKEN", "API_KEY", "apiKey", "X-Api-Key", "OPENAI_APIKEY", "DB_PASSWORD", "X-Auth", "SESSION_ID"]
)
def test_a_name_that_says_secret_is_secret(name: str) -> None:
    assert secret_name(name)


@pytest.mark.parametrize("name", ["MEMORY_FILE_PATH", "REPO_DIR", "MONKEY", "GIT_AUTHOR_NAME", "KEYBOARD", "HOME"])
def test_a_name_that_does_not_say_secret_is_not(name: str) -> None:
    assert not secret_name(name)


def test_the_secret_set_holds_secret_names_headers_star_env_and_secret_env_and_nothing_else() -> None:
    text = textwrap.dedent(
        """
        secret_env = ["DB_URL"]

        [[mcp.servers]]
        name = "memory"
        command = "server-memory"
        args = ["--db", "${DB_URL}"]
        env = { MEMORY_FILE_PATH = "${MEMORY_FILE_PATH}", GH = "${GITHUB_TOKEN}" }

        [[mcp.servers]]
        name = "docs"
        type = "http"
        url = "https://docs.example.com/mcp?team=${TEAM}"
        headers = { X-Tenant = "${TENANT}" }

        [[triggers]]
        name = "deploy"
        script = "deploy"
        webhook = true
        secret_env = "HOOK"
        """
    )
    env = {
        "DB_URL": "postgres://db.internal/app",
        "MEMORY_FILE_PATH": PATH,
        "GITHUB_TOKEN": TOKEN,
        "TEAM": "team-blue-7",
        "TENANT": "tenant-a1",
        "HOOK": "hook-token-99",
    }
    config = load_text(text, env=env)
    assert config.secrets == {"postgres://db.internal/app", TOKEN, "team-blue-7", "tenant-a1", "hook-token-99"}


def test_config_trust_shows_a_path_and_masks_a_token_and_a_header(tmp_path: Path) -> None:
    config = tmp_path / "toolshell.toml"
    config.write_text(
        textwrap.dedent(
            f"""
            [[mcp.servers]]
            name = "memory"
            command = "server-memory"
            env = {{ MEMORY_FILE_PATH = "{PATH}", GITHUB_TOKEN = "{TOKEN}" }}

            [[mcp.servers]]
            name = "docs"
            type = "http"
            url = "https://docs.example.com/mcp"
            headers = {{ X-Tenant = "tenant-a1" }}
            """
        )
    )
    trusted = toolshell("config", "trust", str(config), "--yes", env={"TOOLSHELL_STATE_DIR": str(tmp_path / "s")})
    shown = trusted.stdout + trusted.stderr
    assert trusted.returncode == 0, shown
    assert f"env MEMORY_FILE_PATH={PATH}" in shown
    assert "env GITHUB_TOKEN=***" in shown and TOKEN not in shown
    assert "header X-Tenant: ***" in shown and "tenant-a1" not in shown


@pytest.mark.anyio
@pytest.mark.skipif(
    not (Path(GIT_SERVER).exists() and shutil.which("git")) and not os.environ.get("CI"),
    reason="run `pip install mcp-server-git` (needs git)",
)
async def test_a_git_error_names_the_allowed_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    await anyio.run_process(["git", "init", "-q", str(repo)])
    text = f'[[mcp.servers]]\nname = "git"\ncommand = {json.dumps(GIT_SERVER)}\n'
    text += 'args = ["--repository", "${REPO_DIR}"]\n'
    config = load_text(text, env={"REPO_DIR": str(repo)})
    async with Host.open(config, state_dir=tmp_path / "state") as host:
        result = await host.run(f"tools git git-status repo_path={tmp_path / 'other'}")
    assert result.exit_code == 1
    assert f"outside the allowed repository {str(repo)!r}" in result.stderr, result.stderr
    assert "***" not in result.stderr


SERVER = textwrap.dedent(
    """
    import os, sys
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations
    print(f"starting with {os.environ['SERVER_TOKEN']}", file=sys.stderr, flush=True)
    server = MCPServer("echo", log_level="ERROR")

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def where() -> str:
        return f"{os.environ['MEMORY_FILE_PATH']} {os.environ['SERVER_TOKEN']}"

    server.run()
    """
)


@pytest.mark.anyio
async def test_a_secret_named_value_is_still_masked_in_script_output_and_logs_while_a_path_shows(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script = tmp_path / "echo.py"
    script.write_text(SERVER)
    text = textwrap.dedent(
        f"""
        [[mcp.servers]]
        name = "echo"
        command = {json.dumps(sys.executable)}
        args = [{json.dumps(str(script))}]
        env = {{ SERVER_TOKEN = "${{MY_TOKEN}}", MEMORY_FILE_PATH = "${{MEMORY_FILE_PATH}}" }}
        """
    )
    config = load_text(text, env={"MY_TOKEN": TOKEN, "MEMORY_FILE_PATH": PATH})
    with caplog.at_level(logging.DEBUG):
        async with Host.open(config, state_dir=tmp_path / "state") as host:
            result = await host.run("tools echo where; tools echo where | rev")
            status = json.dumps([s.to_json() for s in host.statuses()])
    assert result.stdout.splitlines()[0] == f"{PATH} ***"
    assert TOKEN not in result.stdout + result.stderr + status + caplog.text
    assert TOKEN[::-1] not in result.stdout, "an encoded form is masked too"


@pytest.mark.parametrize(
    "name",
    ["GH_PAT", "GITLAB_PAT", "DB_PASS", "SMTP_PASS", "MYSQL_PWD", "SENTRY_DSN", "JWT", "BEARER", "GPG_PASSPHRASE"],
)
def test_a_pat_pass_pwd_dsn_jwt_or_bearer_word_names_a_secret(name: str) -> None:
    assert secret_name(name)


@pytest.mark.parametrize("name", ["PWD", "OLDPWD", "PATH", "GITHUB_PATH", "COMPASS", "PASSAGE", "PATTERN"])
def test_the_working_directory_and_words_that_only_hold_those_letters_are_not_secret(name: str) -> None:
    assert not secret_name(name)


def test_a_flag_that_names_a_secret_masks_its_value_and_a_url_built_in_args_or_env_masks_its_credentials() -> None:
    text = textwrap.dedent(
        """
        [[mcp.servers]]
        name = "api"
        command = "server-api"
        args = ["--token=${ONE}", "--api-key", "${TWO}", "--repo", "${REPO}", "--endpoint=https://x.example/?key=${THREE}"]
        env = { DATABASE_URL = "${DATABASE_URL}", MEMORY_FILE_PATH = "${MEMORY_FILE_PATH}" }
        """
    )
    env = {
        "ONE": "value-one-111",
        "TWO": "value-two-222",
        "REPO": "/srv/repo",
        "THREE": "value-three-333",
        "DATABASE_URL": "postgres://app:db-pass-444@db.internal/app",
        "MEMORY_FILE_PATH": PATH,
    }
    config = load_text(text, env=env)
    assert config.secrets == {"value-one-111", "value-two-222", "value-three-333", "db-pass-444"}


def test_a_short_text_masked_again_is_answered_without_another_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    redact = Redactor(["hunter2-secret"])
    scans: list[bytes] = []
    real = Redactor._spans
    monkeypatch.setattr(Redactor, "_spans", lambda self, data: scans.append(data) or real(self, data))
    first = redact("tools db query password=hunter2-secret")
    again = redact("tools db query password=hunter2-secret")
    assert first == again == "tools db query password=***"
    assert len(scans) == 1
    assert redact("tools db query") == "tools db query" and len(scans) == 2  # another text is scanned


def test_the_memo_of_masked_texts_is_bounded_and_keeps_no_long_text() -> None:
    from toolshell import redact as redact_module

    redact = Redactor(["hunter2-secret"])
    for i in range(redact_module.MEMO_SIZE * 2 + 3):
        assert redact(f"call {i} hunter2-secret") == f"call {i} ***"
    assert len(redact._memo) <= redact_module.MEMO_SIZE
    long = "x" * redact_module.MEMO_TEXT + " hunter2-secret"
    redact._memo.clear()
    assert redact(long).endswith(" ***") and redact._memo == {}
