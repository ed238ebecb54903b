"""What a `tools` call computes once and reuses (issue 16 §4), and why each reuse is still the same call.

- The session context a server is sent is made once per server in a shell call, and made anew
  as soon as what it depends on changes (the context epoch, a `shell` unlock), mid-script too.
- A flat object schema gets a plain-Python check beside its jsonschema validator: its verdict is
  jsonschema's on every input, and a schema changed by `tools/list_changed` gets its own.
- An entry's `command` is computed once, and a changed entry has its own.
- A tool's output-schema validator is taken from the SDK's cache without its per-call imports;
  a changed listed schema still gets a new one.
- A `tools` command's words are looked up once in its catalog, not twice; another catalog asks anew.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import anyio
import mcp_types as types
import pytest
from hypothesis import strategies as st
from mcp.server import Server
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

from _connections_support import builtin_config
from toolshell.config import Config
from toolshell.connections.base import CallOptions, SessionContext
from toolshell.connections.factory import make_connection
from toolshell.errors import ToolshellError
from toolshell.host import Host
from toolshell.registry import ToolEntry
from toolshell.session import Session

READ = ToolAnnotations(readOnlyHint=True)


# --- the session context, per server per shell call ---------------------------------------------


def _octofs(forget: list[Session]) -> MCPServer:
    """`whoami` reports the context it was sent; `forget` makes the calling session lose its results."""
    server = MCPServer("octofs", log_level="WARNING")

    async def whoami(ctx: Context) -> dict[str, Any]:
        session = (ctx.request_context.meta or {}).get("io.toolshell/session", {})
        return {"shell": session.get("shell"), "context_epoch": session.get("context_epoch")}

    def lose() -> str:
        return str(forget[0].new_context_epoch())

    server.add_tool(whoami, name="whoami", description="Report the session context.", annotations=READ)
    server.add_tool(lose, name="forget", description="Lose the results.", annotations=READ)
    server.add_tool(lambda: "ran", name="shell", description="Run a command.", annotations=READ)
    return server


def _octofs_config(tools: list[str]) -> Config:
    server = {"name": "octofs", "type": "builtin", "tools": tools, "runtime_unlock": True}
    return Config.model_validate({"mcp": {"servers": [server]}})


@pytest.mark.anyio
async def test_a_new_context_epoch_mid_script_reaches_the_next_call_of_the_same_shell_call() -> None:
    sessions: list[Session] = []
    async with Host.open(_octofs_config([]), servers={"octofs": _octofs(sessions)}) as host:
        session = host.session()
        sessions.append(session)
        result = await session.run(
            "for i in 1 2; do tools octofs whoami | jq -c .context_epoch; done; tools octofs forget; "
            "tools octofs whoami | jq -c .context_epoch"
        )
    assert result.stdout == "0\n0\n1\n1\n", result.stderr


@pytest.mark.anyio
async def test_a_shell_unlock_mid_script_reaches_the_next_call_of_the_same_shell_call() -> None:
    async with Host.open(_octofs_config(["whoami"]), servers={"octofs": _octofs([])}) as host:
        result = await host.session().run(
            "tools octofs whoami | jq -c .shell; "
            "tools runtime mcp action=enable server=octofs tool=shell >/dev/null; "
            "tools octofs whoami | jq -c .shell"
        )
    assert result.stdout == "false\ntrue\n", result.stderr


# --- the quick schema check --------------------------------------------------------------------

FLAT = {
    "type": "object",
    "title": "echoArguments",
    "properties": {"text": {"type": "string", "title": "Text"}, "n": {"type": ["integer", "null"], "default": None}},
    "required": ["text"],
}


_types = st.sampled_from(["string", "integer", "number", "boolean", "null", "object", "array"])
_property = st.one_of(
    st.just(True),
    st.builds(lambda t: {"type": t}, _types),
    st.builds(lambda ts: {"type": ts, "title": "T"}, st.lists(_types, min_size=1, max_size=3, unique=True)),
)
_flat_schema = st.builds(
    lambda props, required, extra: {
        "type": "object",
        "properties": props,
        "required": [r for r in required if r in props] if props else [],
        **({} if extra is None else {"additionalProperties": extra}),
    },
    st.dictionaries(st.sampled_from(["a", "b", "c"]), _property, max_size=3),
    st.lists(st.sampled_from(["a", "b", "c"]), max_size=3, unique=True),
    st.one_of(st.none(), st.booleans()),
)
_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.just(1.0), st.text(max_size=3)
)
_value = st.recursive(_scalar, lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=2), inner))
_input = st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), _value, max_size=4)


def _changing() -> tuple[MCPServer, list[bool]]:
    """`pick(n)` takes an integer until `change` makes it take a string (and says tools/list_changed)."""
    server = MCPServer("changing", log_level="WARNING")
    changed: list[bool] = []

    def pick_int(n: int) -> str:
        return f"int {n}"

    def pick_str(n: str) -> str:
        return f"str {n}"

    async def change(ctx: Context) -> str:
        server.remove_tool("pick")
        server.add_tool(pick_str, name="pick", description="Pick.", annotations=READ)
        changed.append(True)
        if ctx.protocol_version == "2025-11-25":
            await ctx.request_context.session.send_tool_list_changed()
        else:
            await ctx.notify_tools_changed()  # 2026-07-28: through the subscriptions/listen stream
        return "changed"

    server.add_tool(pick_int, name="pick", description="Pick.", annotations=READ)
    server.add_tool(change, name="change", description="Change pick.", annotations=READ)
    return server, changed


@pytest.mark.anyio
async def test_a_schema_changed_by_tools_list_changed_is_checked_by_its_own_validator() -> None:
    server, changed = _changing()
    config = Config.model_validate({"mcp": {"servers": [{"name": "changing", "type": "builtin"}]}})
    async with Host.open(config, servers={"changing": server}) as host:
        session = host.session()
        before = await session.run("tools changing pick n=abc")
        conn = host.connections.manager.connection("changing")
        assert conn is not None and conn.on_tools_changed is not None
        heard, drop = anyio.Event(), conn.on_tools_changed
        conn.on_tools_changed = lambda name: (drop(name), heard.set())
        await session.run("tools changing change")
        with anyio.fail_after(10):
            await heard.wait()
        after = await session.run("tools changing pick n=abc")
    assert changed == [True]
    assert json.loads(before.stderr)["error"]["code"] == "invalid_input", before
    assert (after.exit_code, after.stdout) == (0, "str abc\n"), after.stderr


# --- the entry's command -------------------------------------------------------------------------


def test_an_entrys_command_is_made_once_and_a_changed_entry_has_its_own() -> None:
    entry = ToolEntry("git_hub", "list_pulls")
    assert entry.command == "tools git-hub list-pulls"
    assert entry.command is entry.command
    renamed = dataclasses.replace(entry, name="get_pull")
    assert (renamed.command, entry.command) == ("tools git-hub get-pull", "tools git-hub list-pulls")
    assert renamed == dataclasses.replace(renamed) and hash(renamed) == hash(("git_hub", "get_pull"))


# --- the output schema's validator, kept by the SDK per tool ------------------------------------


def _reshaping() -> Server[Any]:
    """`count` returns `{"n": 1}`; its output schema says `n` is an integer until `reshape` makes it
    a string (and says tools/list_changed)."""
    shapes = {"n": {"type": "integer"}}

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        schema = {"type": "object", "properties": dict(shapes), "required": ["n"]}
        count = types.Tool(name="count", input_schema={"type": "object"}, output_schema=schema)
        return types.ListToolsResult(tools=[count, types.Tool(name="reshape", input_schema={"type": "object"})])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == "reshape":
            shapes["n"] = {"type": "string"}
            await ctx.session.send_tool_list_changed()
            return types.CallToolResult(content=[types.TextContent(type="text", text="reshaped")])
        return types.CallToolResult(content=[types.TextContent(type="text", text="1")], structured_content={"n": 1})

    return Server("reshaping", on_list_tools=list_tools, on_call_tool=call_tool)


@pytest.mark.anyio
async def test_a_result_is_checked_against_the_output_schema_of_the_latest_list() -> None:
    conn = make_connection(builtin_config("reshaping"), _reshaping, mode="legacy")
    changed = anyio.Event()
    conn.on_tools_changed = lambda server: changed.set()
    one = SessionContext(session_id="s1")
    try:
        await conn.list_tools(one)
        first = await conn.call_tool("count", {}, CallOptions(session=one))
        again = await conn.call_tool("count", {}, CallOptions(session=one))  # the validator made for the first
        await conn.call_tool("reshape", {}, CallOptions(session=one))
        with anyio.fail_after(10):
            await changed.wait()
        await conn.list_tools(one)
        with pytest.raises(ToolshellError) as refused:
            await conn.call_tool("count", {}, CallOptions(session=one))
    finally:
        await conn.close()
    assert (first.structured_content, again.structured_content) == ({"n": 1}, {"n": 1})
    assert "1 is not of type 'string'" in refused.value.message, refused.value.message


# --- the lookup, once per command -------------------------------------------------------------


@pytest.mark.anyio
async def test_a_tools_command_looks_its_words_up_once_in_its_catalog(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolshell.registry.catalog import Catalog

    looked: list[tuple[str, ...]] = []
    real = Catalog.lookup

    def counted(self: Catalog, words: Any) -> Any:
        looked.append(tuple(words))
        return real(self, words)

    async with Host.open(Config.model_validate({}), state_dir=tmp_path) as host:
        await host.run("tools text-metrics text-length text=warm")
        monkeypatch.setattr(Catalog, "lookup", counted)
        result = await host.run("for i in 1 2 3; do tools text-metrics text-length text=x$i; done")
    assert result.stdout == "2\n2\n2\n", result
    calls = [words for words in looked if len(words) == 3]  # the script's before-start scan looks up two words
    assert calls == [("text-metrics", "text-length", f"text=x{i}") for i in (1, 2, 3)], looked
