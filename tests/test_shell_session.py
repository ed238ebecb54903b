"""Sessions: the sandbox, a persistent virtual filesystem, output caps, images, hints, lazy servers."""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver import MCPServer
from mcp_types import ImageContent, TextContent, ToolAnnotations

from _github_server import make_github
from toolshell.config import Config
from toolshell.host import Host
from toolshell.timeline.sinks import query

pytestmark = pytest.mark.anyio

READ_ONLY = ToolAnnotations(readOnlyHint=True)
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def _images() -> MCPServer:
    server = MCPServer("pics")

    def snapshot() -> list[Any]:
        return [
            TextContent(type="text", text="one image"),
            ImageContent(type="image", data=base64.b64encode(PNG).decode(), mime_type="image/png"),
        ]

    server.add_tool(
        snapshot, name="snapshot", description="Take a picture.", structured_output=False, annotations=READ_ONLY
    )
    return server


async def test_a_file_written_in_one_run_is_there_in_the_next_run_of_the_same_session() -> None:
    async with Host.open() as host:
        session = host.session()
        await session.run("echo remembered > notes.txt; pwd > where.txt")
        again = await session.run("cat notes.txt where.txt")
        other = await host.session().run("cat notes.txt 2>/dev/null || echo absent")
    assert again.stdout == "remembered\n/home/user\n"
    assert other.stdout == "absent\n"


async def test_the_shell_sees_no_host_files_and_no_host_environment(tmp_path, monkeypatch) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host data")
    monkeypatch.setenv("TOOLSHELL_TEST_SECRET", "s3cret")
    async with Host.open() as host:
        result = await host.run(
            f'cat {secret} 2>&1; echo "env=${{TOOLSHELL_TEST_SECRET:-unset}}"; ls /work 2>&1 | head -1'
        )
    assert "host data" not in result.stdout
    assert "env=unset" in result.stdout
    assert "s3cret" not in result.stdout


async def test_named_environment_variables_and_mounts_are_granted_only_by_config(tmp_path, monkeypatch) -> None:
    (tmp_path / "data.txt").write_text("mounted\n")
    monkeypatch.setenv("TOOLSHELL_TEST_VISIBLE", "yes")
    config = Config.model_validate(
        {"shell": {"env": ["TOOLSHELL_TEST_VISIBLE"], "mounts": [{"host": str(tmp_path), "path": "/data"}]}}
    )
    async with Host.open(config) as host:
        result = await host.run(
            "echo $TOOLSHELL_TEST_VISIBLE; cat /data/data.txt; echo x > /data/new.txt 2>/dev/null || echo read-only"
        )
    assert result.stdout == "yes\nmounted\nread-only\n"
    assert not (tmp_path / "new.txt").exists()


async def test_output_past_the_cap_is_cut_with_a_marker() -> None:
    config = Config.model_validate({"tools_in_shell": {"max_output_bytes": 2000}})
    async with Host.open(config) as host:
        result = await host.run("for i in $(seq 1 1000); do echo line-$i; done")
    assert result.stdout.startswith("line-1\n")
    assert len(result.stdout.encode()) < 2200
    assert "[output cut:" in result.stdout and "bytes dropped" in result.stdout


async def test_an_image_result_is_written_under_tool_images_and_named_on_stderr() -> None:
    async with Host.open(servers={"pics": _images()}) as host:
        session = host.session()
        result = await session.run("tools pics snapshot; ls tool-images")
        data = session.bash.fs().read_file("/home/user/tool-images/pics-snapshot-1.png")
    assert result.stdout.splitlines()[-1] == "pics-snapshot-1.png"
    assert "tool-images/pics-snapshot-1.png" in result.stderr
    assert data == PNG


async def test_hints_pushed_by_tools_come_back_beside_the_result_once() -> None:
    async with Host.open() as host:
        session = host.session()
        first = await session.run("tools text-metrics text-length text=hello; tools text_metrics text_length text=abc")
        second = await session.run("echo no tools")
    assert first.stdout == "5\n3\n"
    assert first.hints == ["text_metrics: Use text_length when you need a Unicode scalar count of supplied text."]
    assert second.hints == []
    assert "hints" in first.to_json() and "hints" not in second.to_json()


async def test_a_server_disabled_for_the_session_is_gone_from_the_next_shell_call() -> None:
    async with Host.open(servers={"github": make_github()}) as host:
        session = host.session()
        disable = await session.run("tools runtime mcp action=disable server=github")
        gone = await session.run("tools github list-pulls repo=a/b 2>&1 | jq -r .error.message")
        other = await host.session().run("tools github list-pulls repo=a/b | jq length")
    assert disable.exit_code == 0, disable.stderr
    assert gone.stdout == (
        "server 'github' is disabled for this session; `tools runtime mcp action=enable server=github` "
        "turns it on again\n"
    )
    assert other.stdout == "3\n", "disabling is per session"


async def test_an_on_demand_server_is_not_loaded_until_a_command_names_it() -> None:
    config = Config.model_validate({"mcp": {"servers": [{"name": "github", "type": "builtin", "load": "on_demand"}]}})
    async with Host.open(config, servers={"github": make_github()}) as host:
        session = host.session()
        listing = await session.run("tools --help | grep github")
        assert "(not loaded)" in listing.stdout
        called = await session.run("tools github list-pulls repo=a/b | jq length")
        after = await session.run("tools --help | grep github")
    assert called.stdout == "3\n"
    assert "6 tools" in after.stdout


async def test_tools_search_loads_a_lazy_server_that_matches() -> None:
    config = Config.model_validate({"mcp": {"servers": [{"name": "github", "type": "builtin", "load": "on_demand"}]}})
    async with Host.open(config, servers={"github": make_github()}) as host:
        result = await host.run("tools search github pull")
    assert "tools github list-pulls" in result.stdout


async def test_every_tools_call_is_recorded_in_the_timeline_under_its_shell_call() -> None:
    async with Host.open(servers={"github": make_github()}) as host:
        session = host.session()
        await session.run(
            "tools github list-pulls repo=a/b >/dev/null; tools github get-pull repo=a/b number=1 || true"
        )
        rows = query(host.store, session_id=session.id)
    [shell_call] = rows
    nested = shell_call["calls"] if "calls" in shell_call else shell_call["nested_calls"]
    assert [(c["command"], c["outcome"]) for c in nested] == [
        ("tools github list-pulls", "completed"),
        ("tools github get-pull", "failed"),
    ]
    assert json.loads(nested[0]["input_preview"]) == {"repo": "a/b"}


async def test_the_bash_result_json_has_the_agent_facing_shape() -> None:
    async with Host.open() as host:
        result = await host.run("echo hi; echo oops >&2; exit 3")
    assert result.to_json() == {"exit_code": 3, "success": False, "stdout": "hi\n", "stderr": "oops\n"}


def test_no_test_leaks_the_users_state_dir() -> None:
    assert os.environ["TOOLSHELL_STATE_DIR"].endswith("state")


async def test_a_script_past_the_shell_time_limit_stops_and_says_which_setting_to_raise() -> None:
    from mcp_types import ToolAnnotations

    server = MCPServer("slow")
    ended = anyio.Event()

    async def nap(seconds: float) -> str:
        try:
            await anyio.sleep(seconds)
        finally:
            ended.set()
        return "woke"

    server.add_tool(nap, name="nap", annotations=ToolAnnotations(readOnlyHint=True))
    config = Config.model_validate({"shell": {"timeout_seconds": 0.5}})
    async with Host.open(config, servers={"slow": server}) as host:
        session = host.session()
        result = await session.run("echo before; tools slow nap seconds=30; echo after")
        with anyio.fail_after(5):
            await ended.wait()
        again = await session.run("echo next")
    assert result.stdout == "before\n" and result.exit_code != 0
    assert "raise [shell] timeout_seconds" in result.stderr
    assert again.stdout == "next\n"


async def test_shell_calls_of_one_session_run_one_at_a_time() -> None:
    async with Host.open() as host:
        session = host.session()
        results: list[Any] = []

        async def run(n: int) -> None:
            results.append(await session.run(f"echo {n} > f; cat f"))

        async with anyio.create_task_group() as tg:
            for n in range(5):
                tg.start_soon(run, n)
    assert sorted(r.stdout for r in results) == [f"{n}\n" for n in range(5)]
