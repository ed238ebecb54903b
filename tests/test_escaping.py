"""One escaping rule (`toolshell.safe_text`) for every surface a person reads: the terminal, the web
page, and the approval form `toolshell serve` sends to its upstream client. Hidden characters —
controls, bidi controls and marks, zero-width characters, U+2028/U+2029, tags — are spelled out."""

from __future__ import annotations

import ast
import unicodedata
from pathlib import Path
from typing import Annotated, Any

import httpx2
import mcp_types as types
import pytest
from click.testing import CliRunner
from mcp import Client
from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver import Elicit, MCPServer, Resolve
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

import toolshell.safe_text
from _github_server import make_github
from toolshell.frontends.cli import main as cli_main
from toolshell.frontends.serve.server import build_server
from toolshell.frontends.serve.upstream import approval_form
from toolshell.frontends.web import web_app
from toolshell.host import Host
from toolshell.policy.approvals import Approvals
from toolshell.policy.risk import Risk
from toolshell.registry.entry import ToolEntry
from toolshell.safe_text import HIDDEN, escape, escape_lines, is_safe, ranges_text
from toolshell.store import Store

pytestmark = pytest.mark.anyio

HOSTILE = "fix\u200bx\u202egnp.exe\u2028main"  # zero-width space, right-to-left override, line separator
SHOWN = "fix\\u200bx\\u202egnp.exe\\u2028main"
INVISIBLE = {"\u200b", "\u202e", "\u2028"}
HIDDEN_CODES = {c for first, last in HIDDEN for c in range(first, last + 1)}


# --- the rule --------------------------------------------------------------------------------------


def test_the_rule_covers_every_control_format_separator_and_surrogate_character_python_knows() -> None:
    categories = {"Cc", "Cf", "Zl", "Zp", "Cs"}
    missing = [f"U+{c:04X}" for c in range(0x110000) if unicodedata.category(chr(c)) in categories]
    missing = [c for c in missing if int(c[2:], 16) not in HIDDEN_CODES]
    assert missing == [], f"add these to safe_text.HIDDEN (Unicode {unicodedata.unidata_version})"


def test_the_characters_the_rule_names_are_spelled_as_python_spells_them() -> None:
    text = (
        "\x00\x1b\x7f\x85\x9f"  # C0, DEL, C1
        "\u202a\u202e\u2066\u2069\u200e\u200f\u061c"  # bidi embeddings, overrides, isolates, marks
        "\u200b\u200c\u200d\u2060\u2064\ufeff"  # zero-width characters
        "\u2028\u2029\u00ad\U000e0041\U000e0100\ud800"  # separators, soft hyphen, a tag, VS17, a lone surrogate
    )
    assert escape(text) == (
        "\\x00\\x1b\\x7f\\x85\\x9f"
        "\\u202a\\u202e\\u2066\\u2069\\u200e\\u200f\\u061c"
        "\\u200b\\u200c\\u200d\\u2060\\u2064\\ufeff"
        "\\u2028\\u2029\\xad\\U000e0041\\U000e0100\\ud800"
    )
    assert escape(text).encode("ascii"), "what the rule leaves can always be written"
    assert not is_safe(HOSTILE) and is_safe("plain text, naïve café, 日本語")


def test_escape_lines_keeps_newlines_and_tabs_and_escape_spells_them() -> None:
    assert escape_lines("a\tb\nc\u2028d\re") == "a\tb\nc\\u2028d\\x0de"
    assert escape("a\tb\nc") == "a\\x09b\\x0ac"


def test_emoji_keep_their_presentation_selector_and_ordinary_text_is_unchanged() -> None:
    text = "⚠️ déjà vu — ✓ 100% ❤️ Ελληνικά עברית العربية"
    assert escape(text) == text


def test_the_rule_is_a_translate_table_not_a_python_regular_expression() -> None:
    for module in (toolshell.safe_text, toolshell.frontends.web.http, toolshell.frontends.web.api):
        tree = ast.parse(Path(str(module.__file__)).read_text(encoding="utf-8"))
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom) for a in n.names}
        modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert "re" not in imported | modules, module.__name__


# --- the web page ------------------------------------------------------------------------------------


async def test_the_page_carries_the_python_rule_so_its_escaper_has_no_set_of_its_own() -> None:
    async with Host.open() as host:
        transport = httpx2.ASGITransport(app=web_app(host, "t" * 24))
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8766") as client:
            page = (await client.get("/")).text
            script = (await client.get("/static/app.js")).text
    assert f'<meta name="toolshell-hidden" content="{ranges_text()}">' in page
    assert ranges_text().startswith("0-1f,7f-9f,") and "200b-200f" in ranges_text() and "e0000-e0fff" in ranges_text()
    assert 'meta[name="toolshell-hidden"]' in script
    assert "[\\u" not in script and "[\\x" not in script, "the page's script lists no characters itself"


# --- the terminal --------------------------------------------------------------------------------------


def test_the_approvals_listing_shows_zero_width_bidi_and_line_separators_escaped(tmp_path: Path) -> None:
    store = Store(tmp_path / "toolshell.db")
    Approvals(store).request(ToolEntry("github", "delete-branch"), {"branch": HOSTILE}, "s1", "destructive")
    store.close()
    listed = CliRunner().invoke(cli_main, ["approvals", "list", "--state-dir", str(tmp_path)])
    assert listed.exit_code == 0, listed.output
    assert not INVISIBLE & set(listed.stdout)
    assert f'tools github delete-branch  {{"branch": "{SHOWN}"}}  (destructive)' in listed.stdout


async def test_a_tool_description_with_hidden_characters_is_shown_escaped_in_help() -> None:
    server = MCPServer("notes", log_level="WARNING")

    def drop() -> str:
        return "dropped"

    server.add_tool(drop, name="drop", description=f"Reads only.\u200b\u2028{HOSTILE}")
    async with Host.open(servers={"notes": server}) as host:
        shown = (await host.session().run("tools notes drop --help")).stdout
    assert not INVISIBLE & set(shown)
    assert f"Reads only.\\u200b\\u2028{SHOWN}" in shown


# --- the approval form sent upstream ----------------------------------------------------------------


SCRIPT = f"tools github delete-branch branch='{HOSTILE}'"


async def test_the_approval_form_an_older_client_gets_shows_the_input_escaped() -> None:
    asked: list[types.ElicitRequestParams] = []

    async def deny(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"answer": "deny"})

    calls: list[Any] = []
    async with Host.open(servers={"github": make_github(calls)}) as host:
        async with Client(build_server(host, []), mode="legacy", elicitation_callback=deny) as client:
            result = await client.call_tool("bash", {"script": SCRIPT})
    [form] = asked
    assert not INVISIBLE & set(form.message)
    assert f'tools github delete-branch with input {{"branch": "{SHOWN}"}}.' in form.message
    assert result.structured_content["tools"]["stopped"]["approval"] == "denied" and calls == []


async def test_the_approval_round_a_2026_client_gets_shows_the_input_escaped() -> None:
    async def never(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        raise AssertionError("a 2026-07-28 client is asked in a round, not by elicitation/create")

    async with Host.open(servers={"github": make_github()}) as host:
        async with Client(build_server(host, []), elicitation_callback=never) as client:
            first = await client.session.call_tool("bash", {"script": SCRIPT}, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult)
    [request] = (first.input_requests or {}).values()
    assert isinstance(request, types.ElicitRequest)
    assert not INVISIBLE & set(request.params.message)
    assert f'{{"branch": "{SHOWN}"}}' in request.params.message


def test_the_approval_form_escapes_a_hostile_name_and_risk_text_too() -> None:
    risk = Risk("needs_approval", "destruc\u200btive", f"it {HOSTILE}")
    message = approval_form(ToolEntry("git\u202ehub", f"delete{HOSTILE}"), {"k\u2028": HOSTILE}, risk).message
    assert not INVISIBLE & set(message)
    assert f"run tools git\\u202ehub delete{SHOWN} with input" in message
    assert f'{{"k\\u2028": "{SHOWN}"}}' in message and "(destruc\\u200btive)" in message and f"it {SHOWN}" in message


class _Answer(BaseModel):
    name: str = Field(title=f"Name {HOSTILE}", description=f"Your {HOSTILE}")


def _ask() -> Elicit[_Answer]:
    return Elicit(f"Confirm {HOSTILE}", _Answer)


def _asker() -> MCPServer:
    server = MCPServer("asker", log_level="WARNING")

    async def greet(answer: Annotated[ElicitationResult[_Answer], Resolve(_ask)]) -> str:
        return f"hello {answer.data.name}" if answer.action == "accept" else f"no answer ({answer.action})"

    server.add_tool(greet, name="greet", annotations=ToolAnnotations(readOnlyHint=True))
    return server


async def test_a_servers_question_reaches_the_upstream_client_with_its_text_escaped_and_its_answer_intact() -> None:
    asked: list[types.ElicitRequestParams] = []

    async def answer(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async with Host.open(servers={"asker": _asker()}) as host:
        async with Client(build_server(host, []), mode="legacy", elicitation_callback=answer) as client:
            result = await client.call_tool("bash", {"script": "tools asker greet"})
    [form] = asked
    assert isinstance(form, types.ElicitRequestFormParams)
    field = form.requested_schema["properties"]["name"]
    assert form.message == f"[asker] Confirm {SHOWN}"
    assert (field["title"], field["description"], field["type"]) == (f"Name {SHOWN}", f"Your {SHOWN}", "string")
    assert result.structured_content["stdout"] == "hello Ada\n"
