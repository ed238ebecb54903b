"""LLM tool definitions for Python agent builders; elicitation routed to the calling session's answerer."""

from __future__ import annotations

import json
from typing import Annotated, Any

import anyio
import mcp_types as types
import pytest
from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver import Elicit, MCPServer, Resolve
from mcp_types import ToolAnnotations
from pydantic import BaseModel

from toolshell.config import Config
from toolshell.frontends.llm import run_tool_call, tool_definitions
from toolshell.host import Host

pytestmark = pytest.mark.anyio


async def test_tool_definitions_come_in_anthropic_and_openai_shapes_with_keep_visible_tools() -> None:
    config = Config.model_validate({"tools_in_shell": {"keep_visible": ["mcp_text_metrics__text_length"]}})
    async with Host.open(config) as host:
        anthropic = await tool_definitions(host, "anthropic")
        openai = await tool_definitions(host, "openai")
        session = host.session()
        bash = await run_tool_call(session, "bash", {"script": "tools text-metrics text-length text=ab"})
        direct = await run_tool_call(session, "mcp_text_metrics__text_length", {"text": "abc"})
        unknown = json.loads(await run_tool_call(session, "mcp_github__list_pulls", {}))
    assert [d["name"] for d in anthropic] == ["bash", "mcp_text_metrics__text_length"]
    assert anthropic[0]["input_schema"]["required"] == ["script"]
    assert [d["function"]["name"] for d in openai] == ["bash", "mcp_text_metrics__text_length"]
    assert openai[1]["function"]["parameters"]["properties"]["text"]["type"] == "string"
    assert bash.startswith("2\n[hint] ") and "[shell" not in bash, "a session keeps its shell: no handle in the text"
    assert direct == "3\n"
    assert unknown["error"]["code"] == "unknown_command"


class Name(BaseModel):
    name: str


def _ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


def _asking() -> MCPServer:
    """Asks through the SDK's resolver: an input_required round on 2026-07-28, a request before."""
    server = MCPServer("greeter", log_level="WARNING")

    async def greet(answer: Annotated[ElicitationResult[Name], Resolve(_ask_name)]) -> str:
        return f"hello {answer.data.name}" if answer.action == "accept" else f"no answer ({answer.action})"

    server.add_tool(
        greet, name="greet", description="Greet the person.", annotations=ToolAnnotations(readOnlyHint=True)
    )
    return server


class Person:
    def __init__(self, reply: types.ElicitResult | None) -> None:
        self.reply = reply
        self.asked: list[str] = []
        self.waiting = anyio.Event()

    async def elicit(self, server: str, params: Any) -> types.ElicitResult:
        self.asked.append(f"{server}: {params.message}")
        self.waiting.set()
        if self.reply is None:
            await anyio.sleep_forever()
        return self.reply


async def test_a_servers_question_goes_to_the_sessions_answerer_and_its_answer_reaches_the_tool() -> None:
    person = Person(types.ElicitResult(action="accept", content={"name": "Ada"}))
    async with Host.open(servers={"greeter": _asking()}) as host:
        result = await host.session(answerer=person).run("tools greeter greet")
    assert result.stdout == "hello Ada\n"
    assert person.asked == ["greeter: What is your name?"]


async def test_a_session_with_nobody_to_answer_is_not_offered_elicitation_so_the_call_says_why() -> None:
    async with Host.open(servers={"greeter": _asking()}) as host:
        result = await host.session().run("tools greeter greet")
    err = json.loads(result.stderr)["error"]
    assert (err["code"], err["retryable"]) == ("tool_error", False)
    assert "no one answers for this session" in err["message"]


async def test_closing_the_session_cancels_its_open_question() -> None:
    person = Person(None)
    async with Host.open(servers={"greeter": _asking()}) as host:
        session = host.session(answerer=person)
        outcome: dict[str, Any] = {}
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                outcome["result"] = await session.run("tools greeter greet")

            tg.start_soon(run)
            with anyio.fail_after(5):
                await person.waiting.wait()
            session.close()
    assert outcome["result"].stdout == "no answer (cancel)\n"
