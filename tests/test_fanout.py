"""Fan-out (issue 10, part 3): `tools a & tools b & wait` runs calls concurrently, a server's
`max_concurrent_calls` makes the rest wait their turn, and the call budget stays exact."""

from __future__ import annotations

import anyio
import pytest
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from toolshell.config import Config
from toolshell.host import Host

pytestmark = pytest.mark.anyio
READ_ONLY = ToolAnnotations(readOnlyHint=True)


class Counter:
    """A server that counts the calls in flight; each call waits until `together` are in flight."""

    def __init__(self, together: int) -> None:
        self.together = together
        self.in_flight = 0
        self.peak = 0
        self.calls = 0
        self.full = anyio.Event()

    def server(self) -> MCPServer:
        server = MCPServer("count")

        async def work(i: int) -> str:
            self.calls += 1
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            if self.in_flight >= self.together:
                self.full.set()
            with anyio.fail_after(10):
                await self.full.wait()
            for _ in range(20):  # let any other call that is allowed to start do so
                await anyio.lowlevel.checkpoint()
            self.in_flight -= 1
            return f"done-{i}"

        server.add_tool(work, name="work", description="Work.", structured_output=False, annotations=READ_ONLY)
        return server


def _config(**server: object) -> Config:
    return Config.model_validate({"mcp": {"servers": [{"name": "count", "type": "builtin", **server}]}})


async def test_calls_sent_with_ampersand_are_in_flight_together() -> None:
    counter = Counter(together=6)
    async with Host.open(_config(), servers={"count": counter.server()}) as host:
        result = await host.run("for i in 1 2 3 4 5 6; do tools count work i=$i & done; wait")
    assert sorted(result.stdout.split()) == [f"done-{i}" for i in range(1, 7)]
    assert counter.peak == 6


async def test_max_concurrent_calls_caps_the_calls_in_flight_to_one_server_and_the_rest_wait_their_turn() -> None:
    counter = Counter(together=2)
    async with Host.open(_config(max_concurrent_calls=2), servers={"count": counter.server()}) as host:
        result = await host.run("for i in $(seq 1 8); do tools count work i=$i & done; wait; echo rc=$?")
    assert sorted(result.stdout.split()) == sorted([f"done-{i}" for i in range(1, 9)] + ["rc=0"])
    assert counter.calls == 8
    assert counter.peak == 2


async def test_the_call_budget_counts_concurrent_calls_exactly() -> None:
    counter = Counter(together=1)
    config = _config()
    config.tools_in_shell.call_limit = 5
    async with Host.open(config, servers={"count": counter.server()}) as host:
        result = await host.run("for i in $(seq 1 9); do tools count work i=$i & done; wait")
    assert counter.calls == 5  # the five within the budget, sent together; none past it
    assert result.exit_code == 1
    assert result.tools is not None and result.tools["read_only_calls"] == 5
    assert result.tools["stopped"]["reason"] == "call_limit"
    assert '"code":"call_limit"' in result.stderr


async def test_the_documented_fan_out_form_writes_each_result_to_its_own_file() -> None:
    counter = Counter(together=2)
    async with Host.open(_config(), servers={"count": counter.server()}) as host:
        result = await host.run(
            "tools count work i=1 > a.json & tools count work i=2 > b.json & wait; cat a.json b.json"
        )
    assert result.stdout == "done-1\ndone-2\n"
    assert counter.peak == 2
