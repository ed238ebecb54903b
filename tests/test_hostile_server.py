"""A hostile stdio server against the host: garbage on stdout, huge answers, forged names and MIME types."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from toolshell.config import Config
from toolshell.connections.bounded_stdio import LineSplitter, Noise, _Reader
from toolshell.frontends.diagnostics import render_servers
from toolshell.host import Host

HOSTILE = str(Path(__file__).parent / "servers" / "hostile_server.py")
pytestmark = pytest.mark.anyio


def hostile(*modes: str, **server: Any) -> Config:
    entry = {"name": "evil", "command": sys.executable, "args": [HOSTILE, *modes], "timeout_seconds": 10, **server}
    return Config.model_validate({"mcp": {"servers": [entry]}, "approval": {"mode": "off"}, "include_builtins": False})


def status_of(host: Host, name: str = "evil") -> dict[str, Any]:
    return next(s.to_json() for s in host.statuses() if s.name == name)


async def test_garbage_before_every_answer_is_skipped_counted_and_calls_go_on() -> None:
    async with Host.open(hostile("garbage")) as host:
        session = host.session()
        result = await session.run("tools evil echo text=one; tools evil echo text=two")
        status = status_of(host)
    assert (result.exit_code, result.stdout, result.stderr) == (0, "one\ntwo\n", "")
    [note] = status["notes"]
    assert note.startswith("skipped stdout lines: ")
    counts = dict(part.split(" ", 1)[::-1] for part in note.removeprefix("skipped stdout lines: ").split(", "))
    # handshake + tools/list + two calls = at least 4 answers, each preceded by one of each kind
    assert {kind: int(n) >= 4 for kind, n in counts.items()} == {
        "not UTF-8": True,
        "not JSON-RPC": True,
        "answers to requests never sent": True,
    }
    assert "    note: skipped stdout lines: " in render_servers([status])


async def test_bad_lines_log_no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    async with Host.open(hostile("garbage")) as host:
        result = await host.session().run("tools evil echo text=hi")
    assert result.stdout == "hi\n"
    assert [r for r in caplog.records if r.exc_info] == []


async def test_an_answer_over_max_message_bytes_fails_that_call_and_the_server_stays_usable() -> None:
    async with Host.open(hostile(max_message_bytes=1_000_000)) as host:
        session = host.session()
        big = await session.run("tools evil big size=3000000")
        after = await session.run("tools evil echo text=still-here; tools evil big size=1000 | wc -c")
    assert big.exit_code == 1
    error = json.loads(big.stderr)["error"]
    assert error["code"] == "tool_error"
    assert "over max_message_bytes = 1,000,000" in error["message"]
    assert (after.exit_code, after.stdout.split()) == (0, ["still-here", "1001"])  # text plus its newline


async def test_an_oversized_answer_whose_id_comes_last_fails_its_call_too() -> None:
    async with Host.open(hostile("id-last", max_message_bytes=1_000_000)) as host:
        session = host.session()
        big = await session.run("tools evil big size=2000000")
        after = await session.run("tools evil echo text=ok")
    assert json.loads(big.stderr)["error"]["code"] == "tool_error"
    message = json.loads(big.stderr)["error"]["message"]
    assert re.search(r"its answer was 2,000,\d{3} bytes, over max_message_bytes = 1,000,000", message), message
    assert after.stdout == "ok\n"


def test_a_line_split_across_chunks_is_framed_once_and_memory_is_dropped_when_over_the_bound() -> None:
    splitter = LineSplitter(limit=10)
    frames = [*splitter.feed(b'{"a":'), *splitter.feed(b"1}\nxxxxxxx"), *splitter.feed(b"xxxxxxxx\n")]
    assert frames[0] == b'{"a":1}'
    assert [type(f).__name__ for f in frames[1:]] == ["_Oversized", "_Oversized"]
    assert frames[-1].size == 15 and frames[-1].done  # type: ignore[union-attr]


def test_an_oversized_line_for_no_request_is_only_counted() -> None:
    noise = Noise()
    reader = _Reader(noise, 10, 10)
    frames = list(LineSplitter(10).feed(b'{"jsonrpc":"2.0","id":5,"result":{"x":"yyyyyyyy"}}\n'))
    assert [reader.message(f) for f in frames] == [None, None]
    assert noise.notes() == ["skipped stdout lines: 1 over max_message_bytes"]


async def test_tools_with_names_outside_the_mcp_form_are_not_listed_and_servers_says_why() -> None:
    async with Host.open(hostile("badnames")) as host:
        session = host.session()
        listing = await session.run("tools evil --help")
        status = status_of(host)
    assert [line.split()[0] for line in listing.stdout.splitlines()[1:6]] == ["echo", "match", "big", "image", "clear"]
    assert "\x1b" not in listing.stdout and "drop" not in listing.stdout and "fake" not in listing.stdout
    [note] = status["notes"]
    assert note.startswith("4 tool(s) not listed: their names are not of the MCP form [A-Za-z0-9_.-]{1,128}: ")
    assert "'lookup\\x1b[8m_drop_prod\\x1b[28m'" in note
    assert status["tool_count"] == 5


async def test_terminal_controls_in_a_description_are_shown_escaped_in_help_and_search() -> None:
    async with Host.open(hostile()) as host:
        session = host.session()
        help_text = (await session.run("tools evil clear --help")).stdout
        found = (await session.run("tools search clears screen")).stdout
    for text in (help_text, found):
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "\\x1b[2J\\x1b]0;pwned\\x07Clears \\u202egnp.exe the screen." in help_text
    assert "tools evil clear" in found


async def test_a_forged_image_mime_type_is_saved_as_bin_and_shown_escaped() -> None:
    async with Host.open(hostile()) as host:
        session = host.session()
        result = await session.run("tools evil image > note.json; ls tool-images")
    assert result.exit_code == 0
    assert result.stdout == "evil-image-1.bin\n"
    assert result.stderr.count("\n") == 1, result.stderr  # one line: no forged error line after it
    assert result.stderr.startswith("tools: image saved to tool-images/evil-image-1.bin ('image/png\\n{")
