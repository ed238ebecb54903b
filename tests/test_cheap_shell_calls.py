"""Cheap shell calls: what is reused between shell calls, and that reuse never changes what a shell
call sees (a changed server, a `tools/list_changed`, a runtime switch, a role, a private list).

Each server here counts the `tools/list` requests it receives: that is how the reuse is observed."""

from __future__ import annotations

from typing import Any, Literal

import anyio
import mcp_types as types
import pytest
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import ToolAnnotations

from toolshell.config import Config
from toolshell.connections.remembered import RememberedTools
from toolshell.host import Host
from toolshell.policy import plan as plan_mod
from toolshell.policy.plan import scan

pytestmark = pytest.mark.anyio


class Counting(MCPServer):
    """A server whose tool list can change (`change` adds one and says so), counting the
    `tools/list` requests it gets."""

    def __init__(self, names: list[str], scope: Literal["public", "private"] = "private") -> None:
        super().__init__("counting", log_level="WARNING")
        self.scope = scope
        self.lists = 0
        for name in names:
            self._add(name)

    def _add(self, name: str) -> None:
        async def tool(ctx: Context) -> str:
            if name == "change":
                self._add("added")
                await ctx.notify_tools_changed()
            return name

        self.add_tool(tool, name=name, description=f"The {name} tool.", annotations=ToolAnnotations(readOnlyHint=True))

    def server(self) -> Counting:
        return self

    async def _handle_list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        self.lists += 1
        return types.ListToolsResult(tools=await self.list_tools(), cache_scope=self.scope)


def _tool_names(result: Any) -> list[str]:
    return [line.split()[0] for line in result.stdout.splitlines() if line.startswith("  ")]


async def test_a_script_that_calls_no_tool_asks_no_server_for_its_list() -> None:
    counting = Counting(["ping"])
    async with Host.open(servers={"ops": counting.server()}) as host:
        before = counting.lists
        results = [await host.run("true"), await host.run("echo hi")]
        session = host.session()
        results.append(await session.run("x=$((1+2)); echo $x"))
        assert counting.lists == before
        called = await session.run("tools ops ping")
    assert [(r.exit_code, r.stdout) for r in results] == [(0, ""), (0, "hi\n"), (0, "3\n")]
    assert called.stdout == "ping\n"
    assert counting.lists == before + 1, "the first `tools` call lists the tools"


async def test_a_tools_call_the_scan_cannot_see_still_gets_the_catalog() -> None:
    counting = Counting(["ping"])
    async with Host.open(servers={"ops": counting.server()}) as host:
        result = await host.run('cmd=tools; eval "$cmd ops ping"')
    assert (result.exit_code, result.stdout) == (0, "ping\n")


async def test_a_sessions_catalog_is_reused_until_its_server_says_its_list_changed() -> None:
    counting = Counting(["ping", "change"], scope="public")
    async with Host.open(servers={"ops": counting.server()}) as host:
        changed = anyio.Event()
        host.manager.on_tools_changed = lambda server: changed.set()
        session = host.session()
        await session.run("tools ops ping")
        builds = host.catalogs.builds
        lists = counting.lists
        second = await session.run("tools ops ping; tools ops --help")
        assert (host.catalogs.builds, counting.lists) == (builds, lists), "nothing changed: reused"
        await session.run("tools ops change")
        with anyio.fail_after(5):
            await changed.wait()
        after = await session.run("tools ops added; tools ops --help")
    assert "added" not in _tool_names(second)
    assert after.stdout.startswith("added\n")
    assert "added" in _tool_names(after)


async def test_a_private_list_is_fetched_once_per_session_and_never_shared() -> None:
    counting = Counting(["ping"], scope="private")
    async with Host.open(servers={"ops": counting.server()}) as host:
        one, two = host.session(), host.session()
        await one.run("tools ops ping")
        await one.run("tools ops ping")
        after_one = counting.lists
        await two.run("tools ops ping")
        await two.run("tools ops ping")
    assert counting.lists == after_one + 1, "the second session asks for its own list, once"


async def test_a_server_switched_off_and_on_at_run_time_shows_on_the_next_shell_call() -> None:
    counting = Counting(["ping"], scope="public")
    async with Host.open(servers={"ops": counting.server()}) as host:
        session = host.session()
        await session.run("tools ops ping")
        host.runtime.set_enabled(session.id, "ops", False)
        off = await session.run("tools ops ping")
        host.runtime.set_enabled(session.id, "ops", True)
        on = await session.run("tools ops ping")
    assert (off.exit_code, off.stdout) == (1, ""), off
    assert (on.exit_code, on.stdout) == (0, "ping\n")


async def test_a_role_change_of_the_session_gives_the_roles_catalog_on_the_next_shell_call() -> None:
    config = Config.model_validate({"roles": [{"name": "reader", "mcp": {"server_refs": ["other"]}}]})
    counting, other = Counting(["ping"], scope="public"), Counting(["pong"], scope="public")
    async with Host.open(config, servers={"ops": counting.server(), "other": other.server()}) as host:
        session = host.session()
        before = await session.run("tools ops ping")
        session.role = "reader"
        after = await session.run("tools ops ping")
        pong = await session.run("tools other pong")
    assert (before.exit_code, before.stdout) == (0, "ping\n")
    assert after.exit_code == 1, after
    assert pong.stdout == "pong\n"


async def test_a_server_that_starts_during_a_session_shows_on_its_next_shell_call() -> None:
    config = Config.model_validate({"mcp": {"servers": [{"name": "late", "type": "builtin", "load": "on_demand"}]}})
    late = Counting(["hello"], scope="public")
    async with Host.open(config, servers={"late": late.server()}) as host:
        session = host.session()
        first = await session.run("tools --help")
        await host.load_server("late")  # started by someone else: the session's catalog must not stay stale
        second = await session.run("tools --help")
    assert "not loaded" in first.stdout
    assert "not loaded" not in second.stdout and "1 tool" in second.stdout, second.stdout


async def test_a_run_shell_handed_to_the_next_run_keeps_nothing_of_the_last_one() -> None:
    probe = 'pwd; ls -A; echo "v=${SECRET-unset}"; type f 2>&1 | head -1; alias; trap -p; echo "$-"; tools ops ping'
    counting = Counting(["ping"], scope="public")
    async with Host.open(servers={"ops": counting.server()}) as host:
        fresh = await host.session().run(probe)
        await host.run("echo s > notes; export SECRET=1; f() { :; }; alias ll=ls; trap 'echo bye' EXIT; set -u; cd /")
        reused_before = host.shells.reused
        handed = await host.run(probe)
        assert host.shells.reused == reused_before + 1
    assert handed.stdout == fresh.stdout
    assert handed.stdout.endswith("ping\n")


async def test_a_handed_on_shell_shows_a_shell_env_variable_as_it_is_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("API_REGION", "eu")
    config = Config.model_validate({"shell": {"env": ["API_REGION"]}})
    async with Host.open(config) as host:
        assert (await host.run("echo $API_REGION")).stdout == "eu\n"
        monkeypatch.setenv("API_REGION", "us")
        assert (await host.run("echo $API_REGION")).stdout == "us\n"
        assert (await host.session().run("echo $API_REGION")).stdout == "us\n"


def test_the_scan_of_a_script_is_kept_and_each_caller_gets_its_own_copy() -> None:
    script = "tools ops ping text=a | tools ops pong"
    first = scan(script)
    first.calls[0].argv.append("mutated")
    first.calls.clear()
    again = scan(script)
    other = scan("tools ops ping text=b")
    assert script in plan_mod._scans
    assert [c.argv for c in again.calls] == [["ops", "ping", "text=a"], ["ops", "pong"]]
    assert [c.argv for c in other.calls] == [["ops", "ping", "text=b"]]
    assert again == plan_mod._scan(script)


def test_the_scan_cache_is_bounded() -> None:
    for i in range(plan_mod.SCAN_CACHE_SIZE + 10):
        scan(f"tools ops ping n={i}")
    long = "echo " + "x" * plan_mod.SCAN_CACHE_MAX_CHARS
    scan(long)
    assert len(plan_mod._scans) == plan_mod.SCAN_CACHE_SIZE
    assert long not in plan_mod._scans


class FailsFirstListing(Counting):
    """Answers its first `tools/list` with an error, then lists its tools."""

    async def _handle_list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        if self.lists == 0:
            self.lists += 1
            raise MCPError(-32603, "not ready yet")
        return await super()._handle_list_tools(ctx, params)


async def test_a_listing_that_failed_is_asked_again_on_the_next_shell_call() -> None:
    flaky = FailsFirstListing(["ping"], scope="public")
    async with Host.open(servers={"ops": flaky}) as host:
        session = host.session()
        first = await session.run("tools --help")
        second = await session.run("tools --help")
    assert "  ops           0 tools (failed)\n" in first.stdout, first.stdout
    assert "  ops           1 tool\n" in second.stdout, second.stdout
    assert flaky.lists == 2


async def test_a_list_another_process_remembers_shows_on_the_next_shell_call_of_a_session() -> None:
    config = Config.model_validate({"mcp": {"servers": [{"name": "late", "type": "builtin", "load": "on_demand"}]}})
    async with Host.open(config, servers={"late": Counting(["hello"])}) as host:
        [server] = [s for s in host.config.mcp.servers if s.name == "late"]
        other_process = RememberedTools(host.store, host.redact)  # a worker sharing the store
        session = host.session()
        other_process.remember(server, [types.Tool(name="one", input_schema={"type": "object"})], None)
        first = await session.run("tools --help")
        builds = host.catalogs.builds
        same = await session.run("tools --help")
        assert host.catalogs.builds == builds, "nothing changed: reused"
        two = [types.Tool(name=n, input_schema={"type": "object"}) for n in ("one", "two")]
        other_process.remember(server, two, None)
        second = await session.run("tools --help")
    assert "late" in first.stdout and "1 tool)" in first.stdout, first.stdout
    assert same.stdout == first.stdout
    assert "2 tools)" in second.stdout, second.stdout


class _HeldLister(MCPServer):
    """Its next `tools/list` reads the list on arrival, then waits until released."""

    def __init__(self) -> None:
        super().__init__("held", log_level="WARNING")
        self.hold: anyio.Event | None = None
        self.entered = anyio.Event()
        for name in ("ping", "change", "touch"):
            self._add(name)

    def _add(self, name: str) -> None:
        async def tool(ctx: Context) -> str:
            if name == "change":
                self._add("added")
            if name in ("change", "touch"):
                await ctx.notify_tools_changed()
            return name

        self.add_tool(tool, name=name, description=f"The {name} tool.", annotations=ToolAnnotations(readOnlyHint=True))

    async def _handle_list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        tools = await self.list_tools()  # the list as the request arrives
        if (hold := self.hold) is not None:
            self.hold = None
            self.entered.set()
            await hold.wait()
        return types.ListToolsResult(tools=tools, cache_scope="public")


async def test_a_listing_overtaken_by_a_list_change_is_never_reused_as_the_newer_list() -> None:
    server = _HeldLister()
    async with Host.open(servers={"ops": server}) as host:
        changed = [anyio.Event()]
        host.manager.on_tools_changed = lambda _name: changed[0].set()
        slow, other = host.session(), host.session()
        await other.run("tools ops touch")
        with anyio.fail_after(10):
            await changed[0].wait()
        changed[0], release = anyio.Event(), anyio.Event()
        server.hold = release
        async with anyio.create_task_group() as tg:
            tg.start_soon(slow.run, "tools ops --help")  # its listing reads the old list, then waits
            with anyio.fail_after(10):
                await server.entered.wait()
            await other.run("tools ops change")  # adds `added`, says the list changed
            with anyio.fail_after(10):
                await changed[0].wait()
            assert (await other.run("tools ops added")).stdout == "added\n"  # the newer list is stored
            release.set()
        after = await slow.run("tools ops added")
        assert (after.exit_code, after.stdout) == (0, "added\n"), after.stderr


def test_the_same_list_stored_again_keeps_its_stamp_and_a_changed_one_gets_a_new_one() -> None:
    from toolshell.connections.tool_cache import ToolCache

    def tool(name: str) -> types.Tool:
        return types.Tool(name=name, input_schema={"type": "object"})

    cache = ToolCache()
    first = cache.put([tool("a")], private=False, session_id="s1", generation=cache.generation)
    stamp = cache.stamp("s1")
    again = cache.put([tool("a")], private=False, session_id="s2", generation=cache.generation)
    assert cache.stamp("s2") == stamp and again[0] is first[0], "two sessions listing at once: one list"
    cache.put([tool("a"), tool("b")], private=False, session_id="s1", generation=cache.generation)
    assert cache.stamp("s1") != stamp
