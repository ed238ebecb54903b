"""Yield and wait (clients without Tasks): a `bash` call still running after `[serve]
yield_seconds` returns its output so far and its shell; the next call on that shell collects the
rest first; while the shell is busy nothing new runs; every piece of output comes once."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client

from toolshell.config import Config
from toolshell.frontends.serve.server import build_server
from toolshell.host import Host

pytestmark = pytest.mark.anyio
YIELDING = Config.model_validate({"serve": {"yield_seconds": 1}})
LONG = "echo one; sleep 4; echo two; echo oops >&2; exit 3"


async def _bash(client: Client, script: str, shell: str | None = None) -> dict[str, Any]:
    arguments = {"script": script} | ({"shell": shell} if shell else {})
    result = await client.call_tool("bash", arguments)
    assert not result.is_error, result
    body = result.structured_content
    assert isinstance(body, dict)
    return body


async def test_a_long_call_yields_its_output_so_far_and_the_next_call_on_its_shell_collects_the_rest() -> None:
    async with Host.open(YIELDING) as host:
        async with Client(build_server(host, [])) as client:
            first = await _bash(client, LONG)
            shell = first["shell"]
            bodies = []
            with anyio.fail_after(60):
                while "earlier" not in (body := await _bash(client, "echo mine", shell)) or body["earlier"].get(
                    "running"
                ):
                    bodies.append(body)
            bodies.append(body)
    assert (first["running"], first["exit_code"], first["stdout"]) == (True, -1, "one\n")
    assert "call bash again with this `shell`" in first["note"].lower()
    busy = bodies[:-1]
    assert all(b["earlier"]["running"] and "did not run" in b["note"] for b in busy if "earlier" in b)
    assert all("mine" not in b.get("stdout", "") for b in busy), "nothing new runs while the shell is busy"
    pieces = [first["stdout"]] + [b["earlier"]["stdout"] for b in bodies if "earlier" in b]
    assert "".join(pieces) == "one\ntwo\n", "every byte, each once"
    last = body["earlier"]
    assert (last["exit_code"], last["success"], last["stderr"]) == (3, False, "oops\n")
    assert body["stdout"] == "mine\n" and body["exit_code"] == 0


async def test_a_call_that_ends_before_yield_seconds_is_answered_whole() -> None:
    async with Host.open(YIELDING) as host:
        async with Client(build_server(host, [])) as client:
            body = await _bash(client, "echo quick")
            after = await _bash(client, "echo next", body["shell"])
    assert body["stdout"] == "quick\n" and "running" not in body and "earlier" not in after
