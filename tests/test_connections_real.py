"""Real third-party MCP servers as subprocesses (npm server-everything / filesystem / memory, PyPI
mcp-server-time / mcp-server-git). Skipped, with the install command, when they are missing."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from _ci_support import requires
from _connections_support import SERVERS, Answers
from _net_support import free_port
from toolshell.config import ServerConfig
from toolshell.connections.base import CallOptions, SessionContext
from toolshell.connections.factory import make_connection

NODE_BIN = Path(__file__).parent / "node" / "node_modules" / ".bin"
EVERYTHING = NODE_BIN / "mcp-server-everything"
NPM_MISSING = "npm test servers are not installed; run `npm install --prefix tests/node`"

needs_everything = requires(EVERYTHING.exists() and shutil.which("node"), reason=NPM_MISSING)
pytestmark = [pytest.mark.real, pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def tools_and_version(config: ServerConfig, calls: list[tuple[str, dict[str, Any]]], **options: Any):  # type: ignore[no-untyped-def]
    """Open `config`, list its tools, make `calls`; returns (tool names, protocol version, results)."""
    conn = make_connection(config)
    try:
        names = [t.name for t in await conn.list_tools(SessionContext())]
        results = [await conn.call_tool(name, args, CallOptions(**options)) for name, args in calls]
        return names, conn.status().protocol_version, results
    finally:
        await conn.close()


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


LONG_RUN = ("trigger-long-running-operation", {"duration": 3, "steps": 6})
"""Progress every 0.5 s against an idle timeout of 1.5 s: refreshed, with room for a busy machine."""


@needs_everything
async def test_server_everything_over_stdio_reports_progress_and_returns_its_tiny_image() -> None:
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    config = ServerConfig(name="everything", command=str(EVERYTHING), args=["stdio"])
    # 0.2 s between progress reports, 0.6 s in all: it finishes only if progress refreshes the 0.5 s timeout.
    names, version, (long_run, image) = await tools_and_version(
        config, [LONG_RUN, ("get-tiny-image", {})], on_progress=on_progress, timeout_seconds=1.5
    )
    assert {"echo", "get-tiny-image", "trigger-long-running-operation"} <= set(names)
    assert version == "2025-11-25"
    assert text(long_run) == "Long running operation completed. Duration: 3 seconds, Steps: 6."
    assert progress == [(float(i), 6.0, None) for i in range(1, 7)]
    images = [b for b in image.content if isinstance(b, types.ImageContent)]
    assert [i.mime_type for i in images] == ["image/png"]
    assert base64.b64decode(images[0].data).startswith(b"\x89PNG\r\n\x1a\n")


@needs_everything
async def test_server_everything_asks_over_stdio_and_the_one_calling_session_answers() -> None:
    person = Answers(types.ElicitResult(action="accept", content={"name": "Ada", "check": True}))
    config = ServerConfig(name="everything", command=str(EVERYTHING), args=["stdio"])
    conn = make_connection(config)
    try:
        options = CallOptions(session=SessionContext(session_id="s1"), answerer=person)
        result = await conn.call_tool("trigger-elicitation-request", {}, options)
    finally:
        await conn.close()
    assert person.questions == [("everything", "Please provide inputs for the following fields:")]
    assert [b.text for b in result.content[:2] if isinstance(b, types.TextContent)] == [
        "✅ User provided the requested information!",
        "User inputs:\n- Name: Ada\n- Agreed to terms: true",
    ]


@asynccontextmanager
async def everything_over_http() -> AsyncIterator[str]:
    """server-everything's Streamable HTTP transport on 127.0.0.1 (forced by `servers/loopback.cjs`)."""
    port = free_port()
    command = ["node", "-r", str(SERVERS / "loopback.cjs"), str(EVERYTHING), "streamableHttp"]
    process = await anyio.open_process(
        command, env={**os.environ, "PORT": str(port)}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        said = b""
        with anyio.fail_after(15):
            while b"listening on port" not in said:
                said += await process.stderr.receive()  # type: ignore[union-attr]
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        with anyio.CancelScope(shield=True):
            await process.wait()
            await process.aclose()


@needs_everything
async def test_server_everything_over_streamable_http_reports_progress() -> None:
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with everything_over_http() as url:
        config = ServerConfig(name="everything", type="http", url=url)
        names, version, (long_run, echo) = await tools_and_version(
            config, [LONG_RUN, ("echo", {"message": "over http"})], on_progress=on_progress, timeout_seconds=1.5
        )
    assert "trigger-long-running-operation" in names
    assert version == "2025-11-25"
    assert text(long_run) == "Long running operation completed. Duration: 3 seconds, Steps: 6."
    assert progress == [float(i) for i in range(1, 7)]
    assert text(echo) == "Echo: over http"


@requires((NODE_BIN / "mcp-server-filesystem").exists(), reason=NPM_MISSING)
async def test_server_filesystem_reads_a_file_in_its_allowed_directory(tmp_path: Path) -> None:
    (tmp_path / "note.txt").write_text("hello file")
    config = ServerConfig(name="fs", command=str(NODE_BIN / "mcp-server-filesystem"), args=[str(tmp_path)])
    names, _, (read,) = await tools_and_version(config, [("read_text_file", {"path": str(tmp_path / "note.txt")})])
    assert "read_text_file" in names
    assert text(read) == "hello file"


@requires((NODE_BIN / "mcp-server-memory").exists(), reason=NPM_MISSING)
async def test_server_memory_keeps_what_it_was_told(tmp_path: Path) -> None:
    entity = {"name": "Ada", "entityType": "person", "observations": ["wrote programs"]}
    config = ServerConfig(
        name="memory",
        command=str(NODE_BIN / "mcp-server-memory"),
        env={"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")},
    )
    calls = [("create_entities", {"entities": [entity]}), ("read_graph", {})]
    _, _, (_, graph) = await tools_and_version(config, calls)
    assert graph.structured_content == {"entities": [entity], "relations": []}


@requires(shutil.which("mcp-server-time"), reason="run `pip install mcp-server-time`")
async def test_mcp_server_time_negotiates_2026_07_28_and_tells_the_time() -> None:
    config = ServerConfig(name="time", command=shutil.which("mcp-server-time") or "")
    names, version, (now,) = await tools_and_version(config, [("get_current_time", {"timezone": "UTC"})])
    assert names == ["get_current_time", "convert_time"]
    assert version == "2026-07-28"
    assert json.loads(text(now))["timezone"] == "UTC"


@requires(shutil.which("mcp-server-git") and shutil.which("git"), reason="run `pip install mcp-server-git` (needs git)")
async def test_mcp_server_git_reports_the_status_of_a_temp_repository(tmp_path: Path) -> None:
    await anyio.run_process(["git", "init", "-q", str(tmp_path)])
    (tmp_path / "a.txt").write_text("x")
    await anyio.run_process(["git", "-C", str(tmp_path), "add", "a.txt"])
    config = ServerConfig(
        name="git", command=shutil.which("mcp-server-git") or sys.executable, args=["--repository", str(tmp_path)]
    )
    names, version, (status,) = await tools_and_version(config, [("git_status", {"repo_path": str(tmp_path)})])
    assert {"git_status", "git_log", "git_diff"} <= set(names)
    assert version == "2026-07-28"
    assert "new file:   a.txt" in text(status)
