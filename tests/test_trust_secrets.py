"""Secrets expanded into a server's config never come back to a script, the timeline, diagnostics,
logs or an error (issue: trust, item 9)."""

from __future__ import annotations

import json
import logging
import sys
import textwrap
from pathlib import Path

import pytest

from toolshell.config import load_text
from toolshell.errors import ConfigError
from toolshell.host import Host
from toolshell.timeline.sinks import query

pytestmark = pytest.mark.anyio
TOKEN = "s3cr3t-token-value-42"

SERVER = textwrap.dedent(
    """
    import os, sys
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations
    from mcp.server.mcpserver.exceptions import ToolError
    token = os.environ["SERVER_TOKEN"]
    if sys.argv[1] == "fail":
        print(f"auth failed with token {token}", file=sys.stderr, flush=True)
        sys.exit(1)
    server = MCPServer("leaky", log_level="WARNING")

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
    assert "${DOCS_URL}" in str(caught.value)
