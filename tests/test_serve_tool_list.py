"""`serve`'s `tools/list` is built once per catalog and kept until a server, its tools or the config
change, and the SDK gets `bash`'s input schema without listing (issue 31: the SDK asked for the
list on every 2026-07-28 `tools/call`, and each answer cost a new shell and a catalog build)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp_types import Implementation

from test_serve_list_changed import SLOW
from toolshell.config import Config, load_text
from toolshell.connections.base import ConnState
from toolshell.frontends.serve.bash_tool import BASH_SCHEMA
from toolshell.frontends.serve.server import build_server
from toolshell.frontends.serve.tool_list import ToolList
from toolshell.host import Host

pytestmark = pytest.mark.anyio


async def test_the_list_is_built_once_while_nothing_changed_and_again_when_a_server_settles(tmp_path: Path) -> None:
    script, gate = tmp_path / "slow.py", tmp_path / "gate"
    script.write_text(SLOW)
    config = load_text(
        f'[[mcp.servers]]\nname = "slow"\ncommand = {json.dumps(sys.executable)}\n'
        f"args = [{json.dumps(str(script))}, {json.dumps(str(gate))}]\n"
    ).model_copy(update={"startup_wait_seconds": 0.0})
    ready = anyio.Event()

    async def progress(server: str, state: ConnState) -> None:
        if server == "slow" and state == ConnState.READY:
            ready.set()

    async with Host.open(config, state_dir=tmp_path / "state", on_server_progress=progress) as host:
        listing = ToolList(host, {})
        before = [await listing.answer(None, None) for _ in range(3)]  # type: ignore[arg-type]  # no notifier
        await host.session().run("echo a shell call changes no server")
        before.append(await listing.answer(None, None))  # type: ignore[arg-type]
        built = listing.builds
        gate.touch()
        with anyio.fail_after(30):
            await ready.wait()
        after = await listing.answer(None, None)  # type: ignore[arg-type]
    assert built == 1 and all(b is before[0] for b in before)
    assert "slow (connecting)" in (before[0].tools[0].description or "")
    assert listing.builds == 2 and "slow (1 tool)" in (after.tools[0].description or "")


async def test_bash_and_keep_visible_schemas_are_given_without_listing() -> None:
    config = Config.model_validate({"tools_in_shell": {"keep_visible": ["mcp_text_metrics__text_length"]}})
    async with Host.open(config) as host:
        visible = await host.visible_tools()
        server = build_server(host, visible)
        lookup = server.get_tool_input_schema
        assert lookup is not None
        assert lookup("bash") is BASH_SCHEMA
        assert lookup("mcp_text_metrics__text_length") == visible[0].input_schema
        assert lookup("nope") is None


async def test_a_listing_reuses_its_answer_until_the_catalog_changes() -> None:
    async with Host.open() as host:
        listing = ToolList(host, {})
        first = await listing.answer(None, None)  # type: ignore[arg-type]  # no notifier: ctx unused
        again = await listing.answer(None, None)  # type: ignore[arg-type]
        assert again is first and listing.builds == 1
        host.catalogs._kept.clear()  # as a changed server does: the catalog is built anew
        rebuilt = await listing.answer(None, None)  # type: ignore[arg-type]
    assert rebuilt is not first and listing.builds == 2
    assert rebuilt.tools[0].description == first.tools[0].description


async def test_a_client_that_shows_its_model_the_structure_gets_the_text_alone() -> None:
    """Codex hands its model `structuredContent` in place of `content` (benchmarks/README.md): for it
    `bash` declares no output schema and sends no structure, so its model reads the text too."""
    codex = Implementation(name="codex-mcp-client", version="0.171.0")
    async with Host.open() as host:
        server = build_server(host, [])
        async with Client(server, mode="legacy", client_info=codex) as client:
            [bash] = (await client.list_tools()).tools
            result = await client.call_tool("bash", {"script": "echo hi; exit 2"})
        async with Client(server, mode="legacy") as other:
            [plain] = (await other.list_tools()).tools
            kept = await other.call_tool("bash", {"script": "echo hi"})
    assert bash.output_schema is None and result.structured_content is None
    assert [c.text for c in result.content] == ["hi\n[exit 2]"]  # type: ignore[union-attr]
    assert plain.output_schema is not None and kept.structured_content is not None, "other clients keep both"
