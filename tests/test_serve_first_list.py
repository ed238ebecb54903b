"""A freshly started `toolshell serve` (stdio, a real process) driven by the SDK's real client, the
way Claude Code, Codex or a CI job starts it (issue 32, items 1 and 2): the first `tools/list`
waits for the startup servers (`[serve] list_wait_seconds`), so the `bash` description lists their
tools; a server that failed says why; one later than the wait comes with `list_changed`; and a
`bash` result is plain text for the model, the whole object as `structuredContent`, which the
client checks against the tool's output schema."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.anyio
SRC = str(Path(__file__).resolve().parent.parent / "src")

# A server that starts only once the test opens its gate (a file): slow on purpose, without sleeps.
GATED = textwrap.dedent(
    """
    import pathlib, sys, time
    gate = pathlib.Path(sys.argv[1])
    deadline = time.monotonic() + 60
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    from mcp.server.mcpserver import MCPServer
    server = MCPServer("late", log_level="WARNING")

    @server.tool()
    def ping(word: str) -> str:
        return "pong " + word

    server.run()
    """
)


def _serve(tmp_path: Path, servers: str, serve: str = "") -> StdioServerParameters:
    config = tmp_path / "toolshell.toml"
    config.write_text(f"include_builtins = false\n\n[serve]\n{serve}\n{servers}")
    return StdioServerParameters(
        command=sys.executable,  # `toolshell serve`, from this checkout
        args=["-P", "-c", "from toolshell.frontends.cli import main; main()", "serve", "--config", str(config)],
        env={**os.environ, "PYTHONPATH": SRC, "TOOLSHELL_STATE_DIR": str(tmp_path / "state")},
        cwd=str(tmp_path),
    )


def _gated(tmp_path: Path) -> tuple[str, Path]:
    script, gate = tmp_path / "late.py", tmp_path / "gate"
    script.write_text(GATED)
    entry = f'[[mcp.servers]]\nname = "late"\ncommand = {json.dumps(sys.executable)}\n'
    return entry + f"args = [{json.dumps(str(script))}, {json.dumps(str(gate))}]\n", gate


def _bash(tools: list[Any]) -> str:
    return next(t.description or "" for t in tools if t.name == "bash")


async def test_the_first_tools_list_of_a_fresh_serve_lists_the_tools_of_a_server_still_starting(
    tmp_path: Path,
) -> None:
    entry, gate = _gated(tmp_path)
    with anyio.fail_after(90):
        async with Client(_serve(tmp_path, entry, "list_wait_seconds = 60")) as client:
            gate.touch()  # the server starts now, after `initialize` was answered: the list waits for it
            description = _bash((await client.list_tools()).tools)
    assert "late (1 tool):\n ping word=" in description, description


async def test_a_server_that_failed_says_why_in_the_first_description(tmp_path: Path) -> None:
    entry = f'[[mcp.servers]]\nname = "broken"\ncommand = {json.dumps(sys.executable)}\n'
    entry += 'args = ["-c", "import sys; sys.exit(3)"]\n'
    with anyio.fail_after(90):
        async with Client(_serve(tmp_path, entry, "list_wait_seconds = 60")) as client:
            description = _bash((await client.list_tools()).tools)
    assert "broken (failed: " in description, description


async def test_a_server_later_than_the_wait_comes_with_list_changed_and_its_tools_next_time(tmp_path: Path) -> None:
    entry, gate = _gated(tmp_path)
    heard = anyio.Event()

    async def on_message(message: Any) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            heard.set()

    with anyio.fail_after(90):
        async with Client(
            _serve(tmp_path, entry, "list_wait_seconds = 0"), mode="legacy", message_handler=on_message
        ) as client:
            before = _bash((await client.list_tools()).tools)
            gate.touch()
            await heard.wait()
            after = _bash((await client.list_tools()).tools)
    assert "late (connecting)" in before
    assert "late (1 tool):\n ping word=" in after


async def test_a_bash_result_is_plain_text_for_the_model_and_the_whole_object_for_code(tmp_path: Path) -> None:
    entry, gate = _gated(tmp_path)
    gate.touch()
    script = 'echo pong a; printf "two\\nlines \\"q\\"\\n"; echo oops >&2; exit 4'
    with anyio.fail_after(90):
        async with Client(_serve(tmp_path, entry, "list_wait_seconds = 60")) as client:
            # The SDK client checks structuredContent against bash's outputSchema: it raises if it fails.
            failed = await client.call_tool("bash", {"script": script})
            quiet = await client.call_tool("bash", {"script": "true"})
    assert [c.text for c in failed.content] == ['pong a\ntwo\nlines "q"\n[exit 4]\n[stderr]\noops']  # type: ignore[union-attr]
    assert failed.structured_content == {
        "exit_code": 4,
        "success": False,
        "stdout": 'pong a\ntwo\nlines "q"\n',
        "stderr": "oops\n",
        "shell": failed.structured_content["shell"],  # type: ignore[index]
    }
    assert failed.is_error and str(failed.structured_content["shell"]).startswith("sh_")  # type: ignore[index]
    assert [c.text for c in quiet.content] == ["(no output)"], "the stdio client keeps its shell: no handle"  # type: ignore[union-attr]
