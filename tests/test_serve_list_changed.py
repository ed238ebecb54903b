"""`serve` tells its clients when the tool list they saw changed (issue 16, item 5): a server that
was still starting when `tools/list` was answered settles, the client gets
`notifications/tools/list_changed`, and the next `tools/list` names its tool count."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from toolshell.config import load_text
from toolshell.frontends.serve.list_notifier import ListNotifier
from toolshell.frontends.serve.server import build_server
from toolshell.host import Host

pytestmark = pytest.mark.anyio

SLOW = textwrap.dedent(
    """
    import sys
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations
    gate = sys.argv[1]
    import pathlib, time
    deadline = time.monotonic() + 30
    while not pathlib.Path(gate).exists() and time.monotonic() < deadline:  # the test opens the gate
        time.sleep(0.05)
    server = MCPServer("slow", log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def ping() -> str:
        return "pong"

    server.run()
    """
)


async def test_a_client_that_listed_tools_while_a_server_started_hears_the_list_changed(tmp_path: Path) -> None:
    script, gate = tmp_path / "slow.py", tmp_path / "gate"
    script.write_text(SLOW)
    config = load_text(
        f'[[mcp.servers]]\nname = "slow"\ncommand = {json.dumps(sys.executable)}\n'
        f"args = [{json.dumps(str(script))}, {json.dumps(str(gate))}]\n"
    ).model_copy(update={"startup_wait_seconds": 0.0})
    notifier, heard = ListNotifier(), anyio.Event()

    async def on_message(message: Any) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            heard.set()

    async with Host.open(config, state_dir=tmp_path / "state", on_server_progress=notifier.progress) as host:
        server = build_server(host, [], notifier=notifier)
        async with Client(server, mode="legacy", message_handler=on_message) as client:
            before = (await client.list_tools()).tools[0].description or ""
            gate.touch()
            with anyio.fail_after(30):
                await heard.wait()
            after = (await client.list_tools()).tools[0].description or ""
    assert "slow (connecting)" in before
    assert "slow (1 tool)" in after and notifier.sent >= 1
