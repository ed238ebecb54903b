"""A direct call (a `keep_visible` tool under serve, `Host.call_tool`, an LLM adapter's direct tool) gets
the shell's rules: secrets redacted, guards and policy applied, and a timeline row (issue 14, item 6)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from toolshell.config import load_text
from toolshell.errors import ToolshellError
from toolshell.frontends.llm import run_tool_call
from toolshell.frontends.serve.server import build_server
from toolshell.host import Host
from toolshell.timeline.sinks import query

pytestmark = pytest.mark.anyio
TOKEN = "s3cr3t-direct-token-77"

SERVER = textwrap.dedent(
    """
    import os
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations
    from mcp.server.mcpserver.exceptions import ToolError
    token = os.environ["SERVER_TOKEN"]
    server = MCPServer("leaky", log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def whoami(note: str = "") -> str:
        return f"I use {token} {note}"

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def broken() -> str:
        raise ToolError(f"upstream refused {token}")

    @server.tool(annotations=ToolAnnotations(destructiveHint=True))
    def wipe() -> str:
        return "wiped"

    server.run()
    """
)


def _config(tmp_path: Path) -> Any:
    script = tmp_path / "leaky.py"
    script.write_text(SERVER)
    text = textwrap.dedent(
        f"""
        [tools_in_shell]
        keep_visible = ["mcp_leaky__whoami", "mcp_leaky__broken", "mcp_leaky__wipe"]

        [[guard]]
        tool = "leaky:whoami"
        input = "forbidden"
        message = "no forbidden notes"

        [[mcp.servers]]
        name = "leaky"
        command = {json.dumps(sys.executable)}
        args = [{json.dumps(str(script))}]
        env = {{ SERVER_TOKEN = "${{MY_TOKEN}}" }}
        """
    )
    return load_text(text, env={"MY_TOKEN": TOKEN})


async def test_a_keep_visible_call_under_serve_is_redacted_guarded_and_in_the_timeline(tmp_path: Path) -> None:
    async with Host.open(_config(tmp_path), state_dir=tmp_path / "state") as host:
        visible = await host.visible_tools()
        async with Client(build_server(host, visible)) as client:
            ok = await client.call_tool("mcp_leaky__whoami", {})
            failed = await client.call_tool("mcp_leaky__broken", {})
            guarded = await client.call_tool("mcp_leaky__whoami", {"note": "forbidden"})
            held = await client.call_tool("mcp_leaky__wipe", {})
            through_bash = await client.call_tool("bash", {"script": "tools leaky whoami"})
        rows = query(host.store)
        pending = host.policy.approvals.list_pending()
    shown = json.dumps([r.model_dump(mode="json") for r in (ok, failed, guarded, held, through_bash)])
    assert TOKEN not in shown + json.dumps(rows)
    assert ok.content[0].text.startswith("I use *** ")
    assert "refused ***" in failed.content[0].text and failed.is_error
    assert guarded.is_error and "no forbidden notes" in guarded.content[0].text
    assert held.is_error and json.loads(held.content[0].text)["error"]["code"] == "needs_approval"
    assert [p.command for p in pending] == ["tools leaky wipe"], "the held call waits for a person"
    direct = [r for r in rows if r["script_preview"].startswith("tools leaky") and r["source"] == "agent"]
    outcomes = sorted((c["command"], c["outcome"], c["error_code"]) for r in direct for c in r["calls"])
    assert outcomes == [
        ("tools leaky broken", "failed", "tool_error"),
        ("tools leaky whoami", "completed", None),
        ("tools leaky whoami", "completed", None),
        ("tools leaky whoami", "refused", "denied"),
        ("tools leaky wipe", "stopped_for_approval", "needs_approval"),
    ]


async def test_host_call_tool_and_the_llm_adapter_redact_like_the_shell(tmp_path: Path) -> None:
    async with Host.open(_config(tmp_path), state_dir=tmp_path / "state") as host:
        direct = await host.call_tool("leaky", "whoami", {"note": "x"})
        with pytest.raises(ToolshellError) as refused:
            await host.call_tool("leaky", "whoami", {"note": "forbidden"})
        session = host.session()
        adapter = await run_tool_call(session, "mcp_leaky__whoami", {})
        adapter_error = await run_tool_call(session, "mcp_leaky__broken", {})
        rows = query(host.store)
    assert direct.content[0].text == "I use *** x"
    assert refused.value.code == "denied"
    assert adapter.startswith("I use ***") and "refused ***" in adapter_error
    assert TOKEN not in adapter + adapter_error + json.dumps(rows)
    assert len([c for r in rows for c in r["calls"]]) == 4, "every direct call has its timeline row"


async def test_a_script_or_a_direct_input_with_a_lone_surrogate_is_invalid_input_not_an_internal_error(
    tmp_path: Path,
) -> None:
    async with Host.open(_config(tmp_path), state_dir=tmp_path / "state") as host:
        async with Client(build_server(host, await host.visible_tools())) as client:
            script = await client.call_tool("bash", {"script": "echo \udcff"})
            direct = await client.call_tool("mcp_leaky__whoami", {"note": "\udcff"})
            after = await client.call_tool("bash", {"script": "echo still here"})
    assert json.loads(script.structured_content["stderr"])["error"]["code"] == "invalid_input"
    assert "not UTF-8 text" in script.content[0].text
    assert direct.is_error and json.loads(direct.content[0].text)["error"]["code"] == "invalid_input"
    assert after.structured_content["stdout"] == "still here\n"
