"""Small things a new user meets on the first day: `approvals --json`, a typo in `stats`, and
`plan` rating a listing as a read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from toolshell.config import Config
from toolshell.frontends.cli import main
from toolshell.host import Host
from toolshell.policy.approvals import Approvals
from toolshell.policy.rating import read_action
from toolshell.registry.entry import ToolEntry
from toolshell.store import Store

DELETE = ToolEntry("github", "delete-branch", "Delete a branch.", annotations={"destructiveHint": True})
CLOSED = {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": False}
ACTIONS = {"type": "object", "properties": {"action": {"type": "string", "enum": ["list", "enable", "disable"]}}}


def test_approvals_alone_takes_json_like_approvals_list(tmp_path: Path) -> None:
    store = Store(tmp_path / "toolshell.db")
    try:
        request_id = Approvals(store).request(DELETE, {"branch": "x"}, "s", "destructive", "may delete").id
    finally:
        store.close()
    alone = CliRunner().invoke(main, ["approvals", "--json", "--state-dir", str(tmp_path)])
    listed = CliRunner().invoke(main, ["approvals", "list", "--json", "--state-dir", str(tmp_path)])
    assert alone.exit_code == 0, alone.output
    assert [r["id"] for r in json.loads(alone.stdout)] == [request_id]
    assert alone.stdout == listed.stdout


def test_approvals_json_before_a_subcommand_says_where_to_write_it(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["approvals", "--json", "grants", "--state-dir", str(tmp_path)])
    assert result.exit_code == 2 and "toolshell approvals grants --json" in result.output


@pytest.mark.anyio
async def test_a_mistyped_tool_makes_no_stats_row(tmp_path: Path) -> None:
    server = MCPServer("octo", log_level="WARNING")
    server.add_tool(lambda: "hi", name="echo", description="Echo.", annotations=ToolAnnotations(readOnlyHint=True))
    config = Config.model_validate({"mcp": {"servers": [{"name": "octo", "type": "builtin"}]}})
    async with Host.open(config, servers={"octo": server}, state_dir=tmp_path) as host:
        ran = await host.run("tools octo ehco; tools octo echo; tools ocot echo; true")
    assert '"unknown_command"' in ran.stderr
    stats = CliRunner().invoke(main, ["stats", "--json", "--state-dir", str(tmp_path)])
    rows = [(r["server"], r["tool"], r["calls"]) for r in json.loads(stats.stdout)["rows"]]
    assert rows == [("octo", "echo", 1)]


def test_a_listing_action_of_a_closed_world_tool_only_reads() -> None:
    mcp = ToolEntry("runtime", "mcp", input_schema=ACTIONS, annotations=CLOSED)
    assert read_action(mcp, {"action": "list"}) == "list"
    assert read_action(mcp, {"action": "disable", "server": "git"}) is None
    assert read_action(mcp, {"action": "show"}) is None  # not one of its actions
    open_world = ToolEntry("x", "mcp", input_schema=ACTIONS, annotations={"destructiveHint": False})
    untrusted = ToolEntry("x", "mcp", input_schema=ACTIONS, annotations=CLOSED, trusted=False)
    assert read_action(open_world, {"action": "list"}) is None and read_action(untrusted, {"action": "list"}) is None


def test_plan_rates_runtime_mcp_action_list_as_a_read_and_a_switch_as_a_change(tmp_path: Path) -> None:
    script = "tools runtime mcp action=list\ntools runtime mcp action=disable server=text-metrics\n"
    for mode in ("normal", "strict"):
        config = tmp_path / f"{mode}.toml"
        config.write_text(f'[approval]\nmode = "{mode}"\n')
        shown = CliRunner().invoke(main, ["plan", "--config", str(config)], input=script)
        assert shown.exit_code == 0, shown.output
        risks = [c["risk"] for c in json.loads(shown.stdout)["calls"]]
        assert risks == ["read_only", "changes" if mode == "normal" else "needs_approval"], mode
