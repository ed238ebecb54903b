"""Secrets expanded into a server's config never come back to a script, the timeline, diagnostics,
logs or an error (issue: trust, item 9), nor through any field of a server's status (issue:
secrets, item 12)."""

from __future__ import annotations

import base64
import json
import logging
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from _connections_support import serve_http
from toolshell.config import load_text
from toolshell.errors import ConfigError
from toolshell.frontends.web import web_app
from toolshell.host import Host
from toolshell.timeline.sinks import query

pytestmark = pytest.mark.anyio
TOKEN = "s3cr3t-token-value-42"
TOKEN_B64 = base64.b64encode(TOKEN.encode()).decode()
TOOLSHELL = Path(sys.executable).parent / "toolshell"  # the installed console script

SERVER = textwrap.dedent(
    """
    import base64, os, sys
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations
    from mcp.server.mcpserver.exceptions import ToolError
    token = os.environ["SERVER_TOKEN"]
    token_b64 = base64.b64encode(token.encode()).decode()
    if sys.argv[1] == "fail":
        print(f"auth failed with token {token} ({token_b64})", file=sys.stderr, flush=True)
        sys.exit(1)
    server = MCPServer("leaky", log_level="ERROR")

    # Names outside the MCP form: refused, and quoted in the status's notes.
    server.tool(name=f"leak {token}")(lambda: "x")
    server.tool(name=f"leak {token_b64}")(lambda: "x")

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def whoami() -> str:
        return f"I use {token}"

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def broken() -> str:
        raise ToolError(f"upstream refused {token}")

    server.run()
    """
)


def _config(tmp_path: Path, mode: str) -> str:
    script = tmp_path / "leaky.py"
    script.write_text(SERVER)
    return textwrap.dedent(
        f"""
        [[mcp.servers]]
        name = "leaky"
        command = {json.dumps(sys.executable)}
        args = [{json.dumps(str(script))}, "{mode}"]
        env = {{ SERVER_TOKEN = "${{MY_TOKEN}}" }}
        """
    )


async def test_a_tool_result_and_a_tool_error_never_show_the_secret(tmp_path: Path) -> None:
    config = load_text(_config(tmp_path, "ok"), env={"MY_TOKEN": TOKEN})
    async with Host.open(config, state_dir=tmp_path / "state") as host:
        result = await host.run("tools leaky whoami; tools leaky whoami | base64 -d 2>/dev/null; tools leaky broken")
        rows = query(host.store)
    assert result.stdout.startswith("I use ***\n")
    assert "refused ***" in result.stderr
    assert TOKEN not in json.dumps(result.to_json()) + json.dumps(rows)


async def test_a_start_error_its_stderr_and_the_runtime_list_never_show_the_secret(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = load_text(_config(tmp_path, "fail"), env={"MY_TOKEN": TOKEN})
    with caplog.at_level(logging.DEBUG):
        async with Host.open(config, state_dir=tmp_path / "state") as host:
            call = await host.run("tools leaky whoami")
            listed = await host.run("tools runtime mcp action=list")
            statuses = [s.to_json() for s in host.statuses()]
    assert json.loads(call.stderr)["error"]["code"] == "unavailable"
    shown = call.stderr + listed.stdout + json.dumps(statuses)
    assert "auth failed with token ***" in shown
    assert TOKEN not in shown
    assert TOKEN not in caplog.text


def test_a_config_error_quotes_the_text_as_written_not_the_expanded_secret() -> None:
    text = '[[mcp.servers]]\nname = "docs"\ntype = "http"\nurl = "${DOCS_URL}"\n'
    with pytest.raises(ConfigError) as caught:
        load_text(text, env={"DOCS_URL": "ftp://user:hunter2pass@example.com/mcp"})
    assert "hunter2pass" not in str(caught.value)
    assert "'ftp://user:***@example.com/mcp'" in str(caught.value), "the URL shows; its password does not"


class Refusing:
    """An HTTP MCP server that answers 401 to everything, quoting the bearer token it was sent
    (and its base64) in the `WWW-Authenticate` reason."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = dict(scope["headers"])
        bearer = headers.get(b"authorization", b"").partition(b" ")[2]
        reason = b"token " + bearer + b" revoked; base64 " + base64.b64encode(bearer)
        challenge = b'Bearer error="invalid_token", error_description="' + reason + b'"'
        await send({"type": "http.response.start", "status": 401, "headers": [(b"www-authenticate", challenge)]})
        await send({"type": "http.response.body", "body": b""})


def _status_config(tmp_path: Path, url: str) -> str:
    """A server that lists refused names (notes), one that fails (stderr), one that answers 401."""
    script = tmp_path / "leaky.py"
    script.write_text(SERVER)
    return textwrap.dedent(
        f"""
        [[mcp.servers]]
        name = "leaky"
        command = {json.dumps(sys.executable)}
        args = [{json.dumps(str(script))}, "ok"]
        env = {{ SERVER_TOKEN = "${{MY_TOKEN}}" }}

        [[mcp.servers]]
        name = "broken"
        command = {json.dumps(sys.executable)}
        args = [{json.dumps(str(script))}, "fail"]
        env = {{ SERVER_TOKEN = "${{MY_TOKEN}}" }}

        [[mcp.servers]]
        name = "remote"
        type = "http"
        url = "{url}"
        headers = {{ Authorization = "Bearer ${{API_TOKEN}}" }}
        """
    )


def _assert_masked(rows: list[dict[str, Any]], shown: str) -> None:
    by_name = {r["name"]: r for r in rows}
    assert (by_name["remote"]["state"], by_name["remote"]["auth_reason"]) == (
        "needs_auth",
        'invalid_token: "token *** revoked; base64 ***"',
    )
    assert by_name["leaky"]["notes"][0].endswith("[A-Za-z0-9_.-]{1,128}: 'leak ***', 'leak ***'")
    broken = by_name["broken"]
    assert (broken["state"], broken["stderr_tail"]) == ("failed", ["auth failed with token *** (***)"])
    assert TOKEN not in shown and TOKEN_B64 not in shown


async def test_toolshell_servers_and_its_json_never_show_a_secret_from_a_401_reason_notes_or_stderr(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "MY_TOKEN": TOKEN, "API_TOKEN": TOKEN}
    async with serve_http(Refusing()) as url:
        config = tmp_path / "toolshell.toml"
        config.write_text(_status_config(tmp_path, url))
        text, as_json = [
            await anyio.run_process([str(TOOLSHELL), "servers", "--config", str(config), *flag], env=env)
            for flag in ([], ["--json"])
        ]
    shown = text.stdout.decode()
    assert '    needs login: invalid_token: "token *** revoked; base64 ***"' in shown.splitlines()
    assert "    stderr| auth failed with token *** (***)" in shown.splitlines()
    assert TOKEN not in shown + text.stderr.decode() and TOKEN_B64 not in shown + text.stderr.decode()
    _assert_masked(json.loads(as_json.stdout), as_json.stdout.decode() + as_json.stderr.decode())


async def test_the_web_pages_server_list_never_shows_a_secret_from_a_401_reason_notes_or_stderr(tmp_path: Path) -> None:
    page_token = "page-token-0123456789"
    async with serve_http(Refusing()) as url:
        config = load_text(_status_config(tmp_path, url), env={"MY_TOKEN": TOKEN, "API_TOKEN": TOKEN})
        async with Host.open(config, state_dir=tmp_path / "state") as host:
            async with serve_http(web_app(host, page_token)) as page, httpx2.AsyncClient() as http:
                listed = await http.get(
                    page.removesuffix("/mcp") + "/api/servers", headers={"Authorization": f"Bearer {page_token}"}
                )
    assert listed.status_code == 200
    _assert_masked(listed.json(), listed.text)


async def test_config_validate_warns_of_a_missing_command_without_showing_the_secret_expanded_into_it(
    tmp_path: Path,
) -> None:
    config = tmp_path / "toolshell.toml"
    config.write_text(
        '[[mcp.servers]]\nname = "pathed"\ncommand = "/nonexistent/${MY_TOKEN}"\n\n'
        '[[mcp.servers]]\nname = "bare"\ncommand = "run-${MY_TOKEN}"\n'
    )
    env = {**os.environ, "MY_TOKEN": TOKEN, "TOOLSHELL_STATE_DIR": str(tmp_path / "state")}
    done = await anyio.run_process([str(TOOLSHELL), "config", "validate", str(config)], env=env, check=False)
    out = done.stdout.decode() + done.stderr.decode()
    assert done.returncode == 0, out
    assert 'mcp.servers[pathed].command: "/nonexistent/***" does not exist' in out
    assert 'mcp.servers[bare].command: "run-***" is not found on PATH' in out
    assert TOKEN not in out and TOKEN[:8] not in out
