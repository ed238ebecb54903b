"""Long `bash` calls send `notifications/progress` in both eras (a nested call ended, output
written), so a client that resets its timeout on progress keeps waiting; a Tasks client's calls
send none (its long calls are tasks)."""

from __future__ import annotations

import pytest
from mcp import Client

from _github_server import make_github
from _tasks_support import TasksClient
from toolshell.config import Config
from toolshell.frontends.serve.server import build_server
from toolshell.host import Host

pytestmark = pytest.mark.anyio
SCRIPT = "echo first; tools github list-pulls repo=acme/api > /dev/null; echo second"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_bash_call_reports_each_nested_call_and_its_output_as_progress(mode: str) -> None:
    heard: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append((progress, message))

    async with Host.open(servers={"github": make_github()}) as host:
        async with Client(build_server(host, []), mode=mode) as client:  # type: ignore[arg-type]
            result = await client.call_tool("bash", {"script": SCRIPT}, progress_callback=on_progress)
    assert result.structured_content["stdout"] == "first\nsecond\n"
    messages = " | ".join(m or "" for _, m in heard)
    assert "tools github list-pulls: completed" in messages
    assert "of output" in messages and "first" not in messages, "progress says how much, never what"
    assert [p for p, _ in heard] == sorted(p for p, _ in heard) and len({p for p, _ in heard}) == len(heard)


async def test_a_tasks_client_gets_no_progress() -> None:
    heard: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append(message)

    config = Config.model_validate({"serve": {"tasks": {"after_seconds": 60}}})
    async with Host.open(config, servers={"github": make_github()}) as host:
        async with Client(build_server(host, []), extensions=[TasksClient()]) as client:
            await client.call_tool("bash", {"script": SCRIPT}, progress_callback=on_progress)
    assert heard == []
