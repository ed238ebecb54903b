"""Whole results inside the shell, a bounded answer for the model (issue 10, parts 1 and 2).

Client and server in one process: an in-process MCP server returns results of any size; the
scripts pipe them, and the shell call's own output is capped with the whole saved in the shell.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from toolshell.config import Config
from toolshell.host import Host

pytestmark = pytest.mark.anyio

READ_ONLY = ToolAnnotations(readOnlyHint=True)
FIVE_MB = 5_000_000
FILE = re.compile(r"/home/user/tool-output/[0-9a-f]+\.(?:stdout|stderr)")


def _big() -> MCPServer:
    server = MCPServer("big")

    def rows(n: int, limit: int = 0, cursor: str = "") -> str:
        """`n` JSON rows of about 50 bytes each, as one text block."""
        return json.dumps([{"id": i, "name": f"row-{i:08d}", "pad": "x" * 16} for i in range(n)])

    def text(bytes: int) -> str:
        """`bytes` bytes of numbered lines."""
        line = "0123456789" * 9 + "\n"
        return (line * (bytes // len(line) + 1))[:bytes]

    server.add_tool(rows, name="rows", description="Rows.", structured_output=False, annotations=READ_ONLY)
    server.add_tool(text, name="text", description="Text.", structured_output=False, annotations=READ_ONLY)
    return server


def _open(**tools_in_shell: Any) -> Any:
    return Host.open(Config.model_validate({"tools_in_shell": tools_in_shell}), servers={"big": _big()})


async def test_a_5_mb_json_result_reaches_jq_whole_inside_the_shell() -> None:
    async with _open() as host:
        result = await host.run("tools big rows n=100000 | wc -c; tools big rows n=100000 | jq length")
    size, count = result.stdout.split()
    assert int(size) > FIVE_MB
    assert count == "100000"
    assert result.exit_code == 0


async def test_a_5_mb_output_comes_back_within_the_cap_ending_with_the_exit_status_and_naming_its_file() -> None:
    async with _open() as host:
        session = host.session()
        result = await session.run(f"tools big text bytes={FIVE_MB}; echo rc=$?")
        path = FILE.search(result.stdout)
        assert path is not None
        again = await session.run(f"wc -c < {path.group()}; tail -n 1 {path.group()}")
    cap = host.config.tools_in_shell.max_output_bytes
    assert len(result.stdout.encode()) <= cap
    assert result.stdout.startswith("0123456789")
    assert result.stdout.endswith("rc=0\n")
    marker = next(line for line in result.stdout.splitlines() if line.startswith("[output cut:"))
    assert re.fullmatch(r"\[output cut: [\d,]+ bytes dropped \([\d,]+ lines\); the whole output is in \S+\]", marker)
    assert path.group().endswith(".stdout")
    assert again.stdout.split("\n")[:2] == [str(FIVE_MB + len("\nrc=0\n")), "rc=0"]  # `tools` ends a result with \n


async def test_the_head_and_the_tail_split_the_cap_40_60() -> None:
    async with _open(max_output_bytes=10_000) as host:
        result = await host.run("for i in $(seq 1 5000); do echo line-$i; done")
    head, _, tail = result.stdout.partition("[output cut:")
    tail = tail.partition("\n")[2]
    assert head.startswith("line-1\n") and tail.endswith("line-5000\n")
    assert 3_500 <= len(head) <= 4_000 and 5_500 <= len(tail) <= 6_000


async def test_a_single_json_document_past_the_cap_comes_back_as_valid_json() -> None:
    async with _open() as host:
        session = host.session()
        result = await session.run("tools big rows n=20000")
        path = FILE.search(result.stderr)
        assert path is not None
        whole = await session.run(f"jq length {path.group()}")
    assert len(result.stdout.encode()) <= host.config.tools_in_shell.max_output_bytes
    value = json.loads(result.stdout)
    assert isinstance(value, list)
    assert value[0] == {"id": 0, "name": "row-00000000", "pad": "x" * 16}
    assert re.fullmatch(r"… [\d,]+ more items", value[-1])
    assert "cut so it stays valid JSON" in result.stderr
    assert whole.stdout == "20000\n"


async def test_stderr_past_the_cap_is_cut_the_same_way_and_saved_beside_stdout() -> None:
    async with _open(max_output_bytes=2_000) as host:
        session = host.session()
        result = await session.run("for i in $(seq 1 2000); do echo err-$i >&2; done; echo done")
        path = FILE.search(result.stderr)
        assert path is not None
        again = await session.run(f"wc -l < {path.group()}")
    assert result.stdout == "done\n"
    assert len(result.stderr.encode()) <= 2_000
    assert result.stderr.startswith("err-1\n") and result.stderr.endswith("err-2000\n")
    assert path.group().endswith(".stderr")
    assert again.stdout == "2000\n"


async def test_a_result_past_max_result_bytes_is_a_tool_error_naming_the_paging_arguments_and_the_next_call_works() -> (
    None
):
    async with _open(max_result_bytes=65_536) as host:
        session = host.session()
        result = await session.run("tools big rows n=5000 | wc -c; echo rc=${PIPESTATUS[0]}")
        after = await session.run("tools big rows n=2 | jq length")
    error = json.loads(result.stderr.splitlines()[0])["error"]
    assert error["code"] == "tool_error"
    assert "past the shell's limit of 65,536 bytes" in error["message"]
    assert "ask the server for less with cursor, limit" in error["message"]
    assert result.stdout == "0\nrc=1\n"
    assert after.stdout == "2\n"


async def test_output_files_are_bounded_per_session_oldest_removed_first() -> None:
    async with _open(max_output_bytes=1_000, output_files_max_bytes=1_048_576) as host:
        session = host.session()
        paths = []
        for _ in range(4):
            result = await session.run("tools big text bytes=400000")
            found = FILE.search(result.stdout)
            assert found is not None
            paths.append(found.group())
        listing = await session.run("ls /home/user/tool-output")
        size = await session.run("cat /home/user/tool-output/* | wc -c")
    assert listing.stdout.split() == sorted(p.rsplit("/", 1)[1] for p in paths[2:])  # the two newest
    assert int(size.stdout) <= 1_048_576


async def test_output_past_what_the_shell_keeps_says_the_file_holds_only_its_first_part() -> None:
    async with _open() as host:
        session = host.session()
        result = await session.run("tools big text bytes=12000000; echo rc=$?")
        path = FILE.search(result.stdout)
        assert path is not None
        size = await session.run(f"wc -c < {path.group()}")
    assert len(result.stdout.encode()) <= host.config.tools_in_shell.max_output_bytes
    assert "; only its first 10,000,000 bytes were kept; they are in /home/user/tool-output/" in result.stdout
    assert size.stdout == "10000000\n"


async def test_files_smaller_than_the_output_say_how_much_they_hold() -> None:
    async with _open(max_output_bytes=1_000, output_files_max_bytes=1_048_576) as host:
        result = await host.run("tools big text bytes=600000")
    assert "only its first 524,288 bytes were kept; they are in /home/user/tool-output/" in result.stdout


async def test_the_default_guard_trips_before_the_sandbox_would_abort_the_script() -> None:
    async with _open() as host:
        result = await host.run("tools big text bytes=31000000 | wc -c; echo after")
    assert json.loads(result.stderr.splitlines()[0])["error"]["code"] == "tool_error"
    assert "past the shell's limit of 30,000,000 bytes" in result.stderr
    assert result.stdout == "0\nafter\n"


async def test_the_json_cut_note_and_a_long_stderr_stay_within_the_cap_together() -> None:
    async with _open(max_output_bytes=2_000) as host:
        result = await host.run("for i in $(seq 1 2000); do echo err-$i >&2; done; tools big rows n=2000")
    assert isinstance(json.loads(result.stdout), list)
    assert len(result.stdout.encode()) <= 2_000 and len(result.stderr.encode()) <= 2_000
    stdout_file = FILE.findall(result.stderr)[-1]
    assert stdout_file.endswith(".stdout")
    assert result.stderr.endswith(f"cut so it stays valid JSON; the whole output is in {stdout_file}]\n")
