"""`tools search` says which servers it could not search and how to include them (issue 30 §12):
an `on_demand` server never listed has tools no search sees, and "No tools match" alone would
send the model away from the one server that has them."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.server.mcpserver import MCPServer

from toolshell.command.helptext import search_text
from toolshell.config import Config
from toolshell.host import Host
from toolshell.registry.entry import ServerInfo

pytestmark = pytest.mark.anyio


def _git() -> MCPServer:
    server = MCPServer("git", log_level="WARNING")

    async def git_log(count: int = 10) -> str:
        return "abc123 first commit"

    server.add_tool(git_log, name="git_log", description="Show the commit log.")
    return server


def _notes() -> MCPServer:
    server = MCPServer("notes", log_level="WARNING")

    async def read_note(name: str) -> str:
        return "a note"

    server.add_tool(read_note, name="read_note", description="Read a note about the log.")
    return server


async def test_a_search_names_the_on_demand_server_it_could_not_search_and_the_way_to_include_it(
    tmp_path: Path,
) -> None:
    config = Config.model_validate(
        {
            "mcp": {
                "servers": [
                    {"name": "git", "type": "builtin", "load": "on_demand"},
                    {"name": "notes", "type": "builtin"},
                ]
            }
        }
    )
    async with Host.open(config, servers={"git": _git(), "notes": _notes()}, state_dir=tmp_path) as host:
        before = await host.run("tools search commit")
        partial = await host.run("tools search commit log")
        after = await host.run("tools git --help >/dev/null; tools search commit log")
    note = (
        "Not searched, their tools are not listed yet: git (not loaded). "
        "Run `tools git --help` to list a server's tools (or see why it cannot), then search again.\n"
    )
    assert before.stdout == "No tools match. Try other or fewer words, or tools --help for the full list.\n" + note
    assert partial.stdout.startswith("tools notes read-note") and partial.stdout.endswith(note), "hits, yet partial"
    assert after.stdout.startswith("tools git git-log") and "Not searched" not in after.stdout


def test_a_search_names_each_server_not_ready_with_its_state_and_says_nothing_when_all_were_searched() -> None:
    servers = [
        ServerInfo("jira_cloud", loaded=True, tool_count=0, state="failed"),
        ServerInfo("slack", loaded=True, tool_count=0, state="needs_auth"),
    ]
    assert search_text([], servers).splitlines()[1] == (
        "Not searched, their tools are not listed yet: jira-cloud (failed), slack (needs login). "
        "Run `tools jira-cloud --help` to list a server's tools (or see why it cannot), then search again."
    )
    assert search_text([]) == "No tools match. Try other or fewer words, or tools --help for the full list.\n"
