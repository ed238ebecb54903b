"""A hostile stdio server that tries to stall or break the host: giant tool lists, a JSON-RPC error
that looks like a closed connection, a schema whose checking takes exponential time."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from _hostile_serve_support import bash_into, serving_hostile
from _net_support import wait_until_serving
from toolshell.command.schema_text import schema_lines
from toolshell.config import Config
from toolshell.frontends.diagnostics import render_servers
from toolshell.host import Host

HOSTILE = str(Path(__file__).parent / "servers" / "hostile_server.py")
pytestmark = pytest.mark.anyio


def hostile(*modes: str, **server: Any) -> Config:
    entry = {"name": "evil", "command": sys.executable, "args": [HOSTILE, *modes], "timeout_seconds": 20, **server}
    return Config.model_validate({"mcp": {"servers": [entry]}, "approval": {"mode": "off"}, "include_builtins": False})


def status_of(host: Host) -> dict[str, Any]:
    return next(s.to_json() for s in host.statuses() if s.name == "evil")


def error_of(stderr: str) -> dict[str, Any]:
    error: dict[str, Any] = json.loads(stderr)["error"]
    return error


# --- a schema whose checking takes exponential time --------------------------------------------


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[str]:
    """`toolshell serve --http` in its own process, with a hostile server whose `deep` tool has a
    17-level doubling schema; yields its URL."""
    with serving_hostile(tmp_path, [HOSTILE, "deep=17"]) as url:
        yield url


async def test_a_wrong_input_to_an_exponential_schema_is_answered_and_another_session_meanwhile_completes(
    serving: str,
) -> None:
    out: dict[str, Any] = {}
    with anyio.fail_after(30):  # a safety net only: checking this input in full takes minutes
        await wait_until_serving(serving, 30)
        async with anyio.create_task_group() as tg:
            other = anyio.Event()
            tg.start_soon(bash_into, serving, "tools evil echo text=meanwhile", out, "other", other)
            await other.wait()  # the other session is connected before the hostile call starts
            tg.start_soon(bash_into, serving, "tools evil deep x=5", out, "deep")
    assert (out["deep"]["exit_code"], out["deep"]["stdout"]) == (0, "called deep\n")  # the server judges it
    assert out["other"]["stdout"] == "meanwhile\n"


async def test_servers_says_which_schema_is_checked_only_for_type_object() -> None:
    async with Host.open(hostile("deep=12")) as host:
        session = host.session()
        wrong = await session.run("tools evil deep x=5")
        fine = await session.run("tools evil echo text=42")
        status = status_of(host)
    assert (wrong.exit_code, wrong.stdout, fine.stdout) == (0, "called deep\n", "42\n")
    assert status["notes"] == [
        "tool deep: its input schema takes more than 5,000 steps to check (nested anyOf/oneOf/allOf or $refs "
        "that multiply); its input is checked only for type object, and the server judges the rest"
    ]
    assert "    note: tool deep: its input schema takes more than 5,000 steps" in render_servers([status])


async def test_a_result_against_an_exponential_output_schema_is_passed_on_unchecked() -> None:
    async with Host.open(hostile("deepout=14")) as host:
        result = await host.session().run("tools evil deepout")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "unchecked\n", "")


async def test_help_for_an_exponential_schema_follows_none_of_its_refs() -> None:
    async with Host.open(hostile("deep=20")) as host:
        shown = await host.session().run("tools evil deep --help")
    assert shown.stdout.splitlines()[2:4] == ["Input:", "  x  any"]


def test_help_for_a_schema_that_refers_to_itself_ends() -> None:
    assert schema_lines({"properties": {"x": {"anyOf": [{"$ref": "#/properties/x"}]}}}) == ["  x  any"]


# --- giant tool lists -------------------------------------------------------------------------


async def test_a_listing_past_max_tools_keeps_the_cap_stops_paginating_and_servers_says_how_to_raise_it() -> None:
    async with Host.open(hostile("many=40", "page=10", max_tools=12)) as host:
        session = host.session()
        kept = await session.run("tools evil t6 && tools evil echo text=hi")
        dropped = await session.run("tools evil t30")
        status = status_of(host)
    assert (kept.exit_code, kept.stdout) == (0, "called t6\nhi\n")
    assert error_of(dropped.stderr)["code"] == "unknown_command"
    assert status["tool_count"] == 12
    assert status["notes"] == [
        "it lists more tools than max_tools = 12: the first 12 are kept, 8 more were dropped and its later "
        "pages were not read; raise max_tools for this server in the config to keep more"
    ]
    assert [line for line in status["stderr_tail"] if line.startswith("listed")] == [
        "listed tools 0-9",
        "listed tools 10-19",
    ]
    assert "    note: it lists more tools than max_tools = 12" in render_servers([status])


async def test_by_default_a_server_keeps_ten_thousand_tools() -> None:
    async with Host.open(hostile("many=10010")) as host:
        listing = await host.session().run("tools evil t9999 && tools evil t10000")
        status = status_of(host)
    assert (listing.stdout, error_of(listing.stderr)["code"]) == ("called t9999\n", "unknown_command")
    assert status["tool_count"] == 10_000
    assert status["notes"] == [
        "it lists more tools than max_tools = 10,000: the first 10,000 are kept, 15 more were dropped; "
        "raise max_tools for this server in the config to keep more"
    ]


async def test_a_listing_within_max_tools_has_no_note() -> None:
    async with Host.open(hostile("many=7", "page=4", max_tools=12)) as host:
        await host.session().run("tools evil echo text=hi")
        status = status_of(host)
    assert (status["tool_count"], "notes" in status) == (12, False)


def test_max_tools_is_set_per_server_and_must_be_a_positive_count() -> None:
    assert [s.max_tools for s in hostile(max_tools=5).mcp.servers] == [5]
    with pytest.raises(ValueError, match="max_tools\n  Input should be greater than or equal to 1"):
        hostile(max_tools=0)


# --- a JSON-RPC error -32000 is the server's error, not a lost connection -------------------------


async def test_a_server_error_coded_like_a_closed_stream_fails_only_its_call_and_the_server_stays_up() -> None:
    async with Host.open(hostile("err32000")) as host:
        session, other = host.session(), host.session()
        out: dict[str, Any] = {}

        async def held() -> None:
            out["slow"] = await other.run("tools evil slow")

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(held)
                # The server answers `fail` only while it holds `slow`: the error lands with a call in flight.
                out["fail"] = await session.run("tools evil fail")
                out["release"] = await session.run("tools evil release")
        status = status_of(host)
    error = error_of(out["fail"].stderr)
    assert (error["code"], error["retryable"]) == ("tool_error", False)
    assert error["message"] == "server 'evil' failed while calling 'fail': the backend is down (code -32000)"
    assert (out["slow"].exit_code, out["slow"].stdout) == (0, "slow done\n")
    assert out["release"].stdout == "released\n"
    assert (status["state"], status["restarts"], status["last_error"]) == ("ready", 0, None)


async def test_a_server_that_exits_mid_call_still_counts_as_gone_and_is_restarted_on_a_later_call() -> None:
    async with Host.open(hostile("err32000")) as host:
        session = host.session()
        crash = await session.run("tools evil crash")
        status = status_of(host)
    error = error_of(crash.stderr)
    assert (error["code"], error["retryable"]) == ("unavailable", True)
    assert status["state"] == "failed"
