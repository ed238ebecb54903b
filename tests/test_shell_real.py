"""The `tools` command against real third-party servers run as subprocesses."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anyio
import pytest

from _ci_support import requires, skip_or_fail
from toolshell.config import Config
from toolshell.host import Host

EVERYTHING = Path(__file__).parent / "node" / "node_modules" / ".bin" / "mcp-server-everything"
pytestmark = [
    pytest.mark.real,
    pytest.mark.anyio,
    requires(EVERYTHING.exists() and shutil.which("node"), reason="run `npm install --prefix tests/node`"),
]


def _everything(timeout: float = 30) -> Config:
    return Config.model_validate(
        {
            "mcp": {
                "servers": [
                    {"name": "everything", "command": str(EVERYTHING), "args": ["stdio"], "timeout_seconds": timeout}
                ]
            },
            "approval": {"mode": "off"},
        }
    )


async def test_get_tiny_image_writes_a_png_under_tool_images_and_names_it_on_stderr() -> None:
    async with Host.open(_everything()) as host:
        session = host.session()
        result = await session.run("tools everything get-tiny-image > out.txt; ls tool-images")
        png = session.bash.fs().read_file("/home/user/tool-images/everything-get-tiny-image-1.png")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "everything-get-tiny-image-1.png\n"
    assert "tool-images/everything-get-tiny-image-1.png" in result.stderr
    assert png.startswith(b"\x89PNG\r\n\x1a\n")


async def test_get_structured_content_prints_json() -> None:
    async with Host.open(_everything()) as host:
        result = await host.run("tools everything get-structured-content location='New York' | jq -c 'keys'")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == sorted(json.loads(result.stdout))
    assert "temperature" in result.stdout


async def test_a_long_operation_with_30_progress_steps_outlives_the_idle_timeout() -> None:
    # 30 steps over 3 s, one every 0.1 s; the idle timeout is 1 s, so only progress keeps the call alive.
    async with Host.open(_everything(timeout=1)) as host:
        result = await host.run("tools everything trigger-long-running-operation duration=3 steps=30")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "Long running operation completed. Duration: 3 seconds, Steps: 30.\n"


async def test_git_and_time_servers_answer_from_a_script(tmp_path: Path) -> None:
    if not (shutil.which("mcp-server-git") and shutil.which("mcp-server-time")):
        skip_or_fail("pip install mcp-server-git mcp-server-time")
    repo = tmp_path / "repo"
    repo.mkdir()
    await anyio.run_process(["git", "init", "-q", str(repo)])
    (repo / "a.txt").write_text("hello\n")
    config = Config.model_validate(
        {
            "mcp": {
                "servers": [
                    {"name": "git", "command": "mcp-server-git", "args": ["--repository", str(repo)]},
                    {"name": "time", "command": "mcp-server-time", "args": ["--local-timezone", "UTC"]},
                ]
            }
        }
    )
    async with Host.open(config) as host:
        result = await host.run(
            f"tools git git-status repo_path={repo} | grep -c a.txt;"
            " tools time get-current-time timezone=UTC | jq -r .timezone"
        )
    assert result.stdout == "1\nUTC\n", result.stderr
