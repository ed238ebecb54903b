"""A server's questions go to the answerer of the session whose call asked; nobody → decline."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Annotated

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientRequestContext
from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from pydantic import BaseModel

from _connections_support import Answers, builtin_config, serve_http, wait_until
from toolshell.config import ServerConfig
from toolshell.connections.base import CallOptions, ConnState, SessionContext
from toolshell.connections.elicitation import CURRENT_CALL, ElicitationRouter, InFlightCall
from toolshell.connections.factory import make_connection
from toolshell.connections.timer import CallTimer
from toolshell.errors import ToolshellError

ONE = SessionContext(session_id="s1")
TWO = SessionContext(session_id="s2")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Name(BaseModel):
    name: str


def ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


RELEASES: dict[str, anyio.Event] = {}


def asking_server() -> MCPServer:
    """`greet` asks through the SDK's resolver (input_required rounds on 2026-07-28, a request before)."""
    server = MCPServer("asking", log_level="WARNING")

    @server.tool()
    async def greet(who: Annotated[ElicitationResult[Name], Resolve(ask_name)]) -> str:
        return f"hello {who.data.name}" if who.action == "accept" else f"no name ({who.action})"

    @server.tool()
    async def wait_for(release: str) -> str:
        await RELEASES[release].wait()
        return "released"

    @server.tool()
    async def offers(ctx: Context) -> str:
        """Which capabilities this request offered: elicitation or not."""
        caps = ctx.client_capabilities
        return "elicitation" if caps is not None and caps.elicitation is not None else "none"

    @server.tool()
    async def greet_legacy(ctx: Context) -> str:
        who = await ctx.elicit("What is your name?", Name)
        return f"hello {who.data.name}" if who.action == "accept" else f"no name ({who.action})"

    return server


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


MODES = [("auto", "greet"), ("legacy", "greet"), ("legacy", "greet_legacy")]


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "tool"), MODES)
async def test_the_calling_sessions_answerer_answers_and_the_timers_wait_for_it(mode: str, tool: str) -> None:
    conn = make_connection(builtin_config(timeout_seconds=0.2), asking_server, mode=mode)
    # The person takes 0.5 s, longer than the 0.2 s idle timeout: the question pauses the timers.
    person = Answers(types.ElicitResult(action="accept", content={"name": "Ada"}), delay=0.5)
    try:
        result = await conn.call_tool(tool, {}, CallOptions(session=ONE, answerer=person))
    finally:
        await conn.close()
    assert text(result) == "hello Ada"
    assert person.questions == [("b", "What is your name?")]


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "tool"), [m for m in MODES if m[0] == "legacy"])
async def test_on_a_handshake_connection_a_session_without_an_answerer_declines(mode: str, tool: str) -> None:
    conn = make_connection(builtin_config(), asking_server, mode=mode)
    try:
        result = await conn.call_tool(tool, {}, CallOptions(session=ONE))
    finally:
        await conn.close()
    assert text(result) == "no name (decline)"


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "expected"), [("auto", ["none", "elicitation"]), ("legacy", ["elicitation"] * 2)])
async def test_per_request_capabilities_offer_elicitation_only_to_a_call_with_an_answerer(
    mode: str, expected: list[str]
) -> None:
    conn = make_connection(builtin_config(), asking_server, mode=mode)
    person = Answers()
    try:
        # A handshake speaks for the whole shared connection, so it offers elicitation to every call.
        seen = [text(await conn.call_tool("offers", {}, CallOptions(session=ONE, answerer=a))) for a in (None, person)]
    finally:
        await conn.close()
    assert seen == expected


@pytest.mark.anyio
async def test_a_2026_server_that_must_ask_tells_a_session_without_an_answerer_what_to_do() -> None:
    conn = make_connection(builtin_config(), asking_server)
    try:
        with pytest.raises(ToolshellError) as caught:
            await conn.call_tool("greet", {}, CallOptions(session=ONE))
        assert conn.status().state is ConnState.READY
    finally:
        await conn.close()
    assert caught.value.to_json()["error"] == {
        "code": "tool_error",
        "message": "server 'b' needs someone to answer its questions while calling 'greet', and no one answers "
        "for this session (a trigger or other run without a person); call it from an interactive session",
        "retryable": False,
    }


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "tool"), MODES)
async def test_closing_the_session_cancels_its_open_question(mode: str, tool: str) -> None:
    conn = make_connection(builtin_config(), asking_server, mode=mode)
    person = Answers(block=True)
    results: list[str] = []

    async def call() -> None:
        results.append(text(await conn.call_tool(tool, {}, CallOptions(session=ONE, answerer=person))))

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            with anyio.fail_after(5):
                await person.asked.wait()
            assert conn.cancel_session("s2") == 0
            assert conn.cancel_session("s1") == 1
    finally:
        await conn.close()
    assert results == ["no name (cancel)"]


@pytest.mark.anyio
@pytest.mark.parametrize("transport", ["in-process", "http"])
async def test_a_question_sent_on_its_calls_stream_reaches_that_call_while_other_sessions_call_too(
    transport: str,
) -> None:
    release = RELEASES.setdefault(transport, anyio.Event())
    ada = Answers(types.ElicitResult(action="accept", content={"name": "Ada"}))
    bob = Answers(types.ElicitResult(action="accept", content={"name": "Bob"}))
    async with AsyncExitStack() as stack:
        if transport == "http":
            url = await stack.enter_async_context(serve_http(asking_server().streamable_http_app()))
            conn = make_connection(ServerConfig(name="b", type="http", url=url), mode="legacy")
        else:
            conn = make_connection(builtin_config(), asking_server, mode="legacy")
        stack.push_async_callback(conn.close)
        async with anyio.create_task_group() as tg:
            # Session s2 has a call in flight, so only the question's own stream can say whose it is.
            tg.start_soon(conn.call_tool, "wait_for", {"release": transport}, CallOptions(session=TWO, answerer=bob))
            await wait_until(lambda: len(conn.router.in_flight()) == 1)
            result = await conn.call_tool("greet_legacy", {}, CallOptions(session=ONE, answerer=ada))
            release.set()
    assert text(result) == "hello Ada"
    assert (len(ada.questions), len(bob.questions)) == (1, 0)


async def _ask(router: ElicitationRouter, results: list[types.ElicitResult | types.ErrorData]) -> None:
    """A question with no call in its context, as a stdio server's `elicitation/create` arrives.
    Run it as its own task: it clears the current call in that task's context only."""
    CURRENT_CALL.set(None)
    params = types.ElicitRequestFormParams(message="Sure?", requested_schema={"type": "object", "properties": {}})
    ctx = ClientRequestContext(session=None, request_id=1)  # type: ignore[arg-type]
    results.append(await router.callback(ctx, params))


async def _ask_from_the_reader(router: ElicitationRouter) -> types.ElicitResult | types.ErrorData:
    results: list[types.ElicitResult | types.ErrorData] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_ask, router, results)
    return results[0]


def _call(session: SessionContext, answerer: Answers | None) -> InFlightCall:
    return InFlightCall(session=session, answerer=answerer, timer=CallTimer(30), tool="t")


@pytest.mark.anyio
async def test_an_unattributed_question_goes_to_the_one_session_with_calls_in_flight() -> None:
    router = ElicitationRouter("srv")
    person = Answers(types.ElicitResult(action="accept", content={}))
    first, second = _call(ONE, person), _call(ONE, person)
    with router.track(first), router.track(second):
        result = await _ask_from_the_reader(router)
    assert result == types.ElicitResult(action="accept", content={})
    assert person.questions == [("srv", "Sure?")]


@pytest.mark.anyio
async def test_an_unattributed_question_is_declined_when_calls_of_two_sessions_are_in_flight() -> None:
    router = ElicitationRouter("srv")
    person = Answers(types.ElicitResult(action="accept", content={}))
    with router.track(_call(ONE, person)), router.track(_call(TWO, person)):
        result = await _ask_from_the_reader(router)
    assert result == types.ElicitResult(action="decline")
    assert person.questions == []


@pytest.mark.anyio
async def test_an_open_question_pauses_its_calls_timers() -> None:
    router = ElicitationRouter("srv")
    person = Answers(block=True)
    call = _call(ONE, person)
    with router.track(call):
        async with anyio.create_task_group() as tg:
            tg.start_soon(_ask, router, [])
            with anyio.fail_after(5):
                await person.asked.wait()
            assert call.timer.paused
            assert router.cancel_session("s1") == 1
    assert not call.timer.paused
    assert router.open_questions() == 0
