"""DESIGN §4, end to end: `tools plan` in a script, help of a lazy server,
images after `cd`, `unavailable` at the shell, fold-alike servers, flat names from a script."""

from __future__ import annotations

import json
from typing import Any

import pytest

from _connections_support import stdio_config
from _github_server import make_github
from test_shell_session import PNG, _images
from toolshell.config import Config
from toolshell.host import Host

pytestmark = pytest.mark.anyio

LAZY = Config.model_validate({"mcp": {"servers": [{"name": "github", "type": "builtin", "load": "on_demand"}]}})


def _error(stderr: str) -> dict[str, Any]:
    [line] = [ln for ln in stderr.splitlines() if ln.startswith('{"error"')]
    return json.loads(line)["error"]


async def test_tools_plan_in_a_script_prints_the_plan_of_the_script_on_its_stdin_and_runs_nothing() -> None:
    calls: list[Any] = []
    script = "tools plan <<'EOF'\ntools github list-pulls repo=a/b\ntools github delete-branch branch=x\nEOF\n"
    async with Host.open(servers={"github": make_github(calls)}) as host:
        result = await host.run(script)
    assert (result.exit_code, result.stderr, result.tools) == (0, "", None)
    assert json.loads(result.stdout) == {
        "calls": [
            {"tool": "tools github list-pulls", "input": {"repo": "a/b"}, "risk": "read_only", "where": "script"},
            {
                "tool": "tools github delete-branch",
                "input": {"branch": "x"},
                "risk": "needs_approval",
                "why": "destructive",
                "where": "script",
            },
        ],
        "complete": True,
    }
    assert calls == []


async def test_help_of_an_on_demand_server_loads_it_in_the_same_shell_call() -> None:
    async with Host.open(LAZY, servers={"github": make_github()}) as host:
        session = host.session()
        before = await session.run("tools --help | grep github")
        helped = await session.run("tools github --help")
        after = await session.run("tools --help | grep github")
    assert "(not loaded)" in before.stdout
    assert helped.exit_code == 0, helped.stderr
    assert helped.stdout.startswith("tools github <tool>: 6 tools\n")
    assert "  delete-branch  branch=<string>  [destructive] Delete a branch.\n" in helped.stdout
    assert "6 tools" in after.stdout


async def test_an_image_is_saved_under_tool_images_of_the_current_directory_after_cd() -> None:
    async with Host.open(servers={"pics": _images()}) as host:
        session = host.session()
        result = await session.run(
            "mkdir -p /tmp/work && cd /tmp/work && tools pics snapshot >/dev/null; ls tool-images"
        )
        data = session.bash.fs().read_file("/tmp/work/tool-images/pics-snapshot-1.png")
        home = await session.run("ls /home/user/tool-images 2>/dev/null | wc -l")
    assert result.stdout == "pics-snapshot-1.png\n"
    assert "tool-images/pics-snapshot-1.png" in result.stderr
    assert data == PNG
    assert home.stdout.strip() == "0"


async def test_a_server_that_cannot_be_launched_is_unavailable_and_not_retryable_at_the_shell() -> None:
    config = Config.model_validate(
        {"mcp": {"servers": [{"name": "broken", "type": "stdio", "command": "/nonexistent/x"}]}}
    )
    async with Host.open(config) as host:
        result = await host.run("tools broken anything; echo next")
    err = _error(result.stderr)
    assert (err["code"], err["retryable"]) == ("unavailable", False)
    assert err["message"].startswith("server 'broken' cannot be launched: ")
    assert err["message"].endswith("; check its `command` (and `cwd`) in the config")
    assert result.stdout == "next\n", "an unavailable server fails only its own call"


async def test_a_server_that_crashes_mid_call_is_unavailable_and_retryable_at_the_shell() -> None:
    config = Config.model_validate(
        {"mcp": {"servers": [stdio_config("crashy").model_dump()]}, "approval": {"mode": "off"}}
    )
    async with Host.open(config) as host:
        result = await host.run("tools crashy crash")
    assert _error(result.stderr) == {
        "code": "unavailable",
        "message": "server 'crashy' closed the connection while calling 'crash'; "
        "its last words on stderr: 'fatal: the crash tool was called'",
        "retryable": True,
    }
    assert result.exit_code == 1


async def test_servers_whose_names_fold_alike_the_first_configured_wins_and_tools_help_says_so() -> None:
    first: list[Any] = []
    second: list[Any] = []
    async with Host.open(servers={"my-git": make_github(first), "my_git": make_github(second)}) as host:
        session = host.session()
        helped = await session.run("tools --help")
        called = await session.run("tools my_git list-pulls repo=a/b | jq length")
    assert called.stdout == "3\n"
    assert (len(first), second) == (1, [])
    assert helped.stdout.endswith(
        "Notes:\n  servers 'my-git' and 'my_git' have the same name once hyphens, underscores and case are "
        "ignored; `tools my-git` is 'my-git' (configured first) and the tools of 'my_git' cannot be called; "
        "rename one of them.\n"
    )


async def test_the_flat_mcp_name_calls_the_tool_from_a_script() -> None:
    calls: list[Any] = []
    async with Host.open(servers={"github": make_github(calls)}) as host:
        result = await host.run("tools mcp_github__list-pulls repo=a/b | jq length")
    assert (result.stdout, result.stderr) == ("3\n", "")
    assert calls == [("list-pulls", {"repo": "a/b", "state": "open"})]
