"""Regression tests: answers go to the run that asked, held scripts leave no grants behind, the
before-start check waits for servers still starting, stateless HTTP clients never share a shell,
a failed commit never wedges the store, and the prompt knows what a heredoc is."""

from __future__ import annotations

import sqlite3
import sys
from typing import Any

import anyio
import mcp_types as types
import pytest

from _github_server import make_github
from _net_support import free_port
from test_llm_and_elicitation import _asking
from toolshell.config import Config
from toolshell.frontends.interactive import _heredoc_word
from toolshell.host import Host
from toolshell.store import Store

pytestmark = pytest.mark.anyio


class _Says:
    def __init__(self, name: str) -> None:
        self.name = name
        self.asked = 0

    async def elicit(self, server: str, params: Any) -> types.ElicitResult:
        self.asked += 1
        return types.ElicitResult(action="accept", content={"name": self.name})


async def test_an_answerer_given_to_a_run_answers_that_run_only() -> None:
    ada, nobody = _Says("Ada"), _Says("Nobody")
    async with Host.open(servers={"greeter": _asking()}) as host:
        session = host.session(answerer=nobody)
        result = await session.run("tools greeter greet", answerer=ada)
        later = await session.run("tools greeter greet")
    assert (result.stdout, later.stdout) == ("hello Ada\n", "hello Nobody\n")
    assert (ada.asked, nobody.asked) == (1, 1)


async def test_a_held_script_leaves_no_one_off_grant_for_anyone_to_use() -> None:
    calls: list[Any] = []
    answers = iter(["once", "deny"])

    async def approver(entry: Any, arguments: dict[str, Any], risk: Any) -> str:
        return next(answers)

    config = Config.model_validate({"approval": {"inline": True}})
    async with Host.open(config, servers={"github": make_github(calls)}) as host:
        session = host.session()
        session.approver = approver
        held = await session.run("tools github delete-branch branch=a; tools github delete-branch branch=b")
        other = await host.session().run("tools github delete-branch branch=a")
    assert held.tools["stopped"]["approval"] == "denied"
    assert other.tools["stopped"]["before_start"] is True, "the 'once' given for the held script was voided"
    assert calls == []


async def test_the_before_start_check_waits_for_a_server_that_is_still_starting(tmp_path) -> None:
    server = tmp_path / "slow_server.py"
    server.write_text(
        "import time\nfrom mcp.server.mcpserver import MCPServer\ntime.sleep(1.5)\n"
        "s = MCPServer('slow')\n@s.tool()\ndef echo(text: str) -> str:\n    return text\ns.run()\n"
    )
    slow = {"name": "slow", "command": sys.executable, "args": [str(server)]}
    config = Config.model_validate(
        {"mcp": {"servers": [slow]}, "startup_wait_seconds": 0.2, "approval": {"require": ["slow:echo"]}}
    )
    async with Host.open(config) as host:
        result = await host.run("echo started; tools slow echo text=hi")
    assert result.stdout == ""
    assert result.tools["stopped"]["before_start"] is True


def test_a_failed_commit_never_leaves_the_store_inside_a_transaction(tmp_path) -> None:
    store = Store(tmp_path / "s.db")
    store.ensure(
        "CREATE TABLE IF NOT EXISTS p (id INTEGER PRIMARY KEY);"
        "CREATE TABLE IF NOT EXISTS c (p INTEGER REFERENCES p(id) DEFERRABLE INITIALLY DEFERRED);"
    )
    store.execute("PRAGMA foreign_keys=ON")
    with pytest.raises(sqlite3.IntegrityError):
        store.executemany("INSERT INTO c (p) VALUES (?)", [[42]])  # fails only at COMMIT
    store.executemany("INSERT INTO p (id) VALUES (?)", [[1]])
    store.close()
    assert [r["id"] for r in Store(tmp_path / "s.db").query("SELECT id FROM p")] == [1]


@pytest.mark.parametrize(
    ("line", "word"),
    [
        ("cat <<EOF", "EOF"),
        ("tools plan <<'EOF'", "EOF"),
        ("cat <<-X", "X"),
        ("echo $((1<<2))", None),
        ("cat <<< hi", None),
    ],
)
def test_only_a_real_heredoc_keeps_the_prompt_reading(line: str, word: str | None) -> None:
    assert _heredoc_word(line) == word


async def test_stateless_http_clients_never_share_a_shell() -> None:
    from mcp import Client

    from toolshell.frontends.serve.auth import NO_AUTH
    from toolshell.frontends.serve.server import _serve_http, build_server

    port = free_port()
    async with Host.open() as host, anyio.create_task_group() as tg:
        tg.start_soon(_serve_http, build_server(host, []), "127.0.0.1", port, NO_AUTH)
        url = f"http://127.0.0.1:{port}/mcp"
        with anyio.fail_after(20):
            while True:
                try:
                    async with Client(url) as a:
                        await a.call_tool("bash", {"script": "echo secret > f; X=1"})
                    break
                except Exception:  # noqa: BLE001 - the server is still starting
                    await anyio.sleep(0.05)
            async with Client(url) as b:
                seen = await b.call_tool("bash", {"script": "cat f 2>/dev/null || echo none; echo x=$X"})
        tg.cancel_scope.cancel()
    assert seen.structured_content["stdout"] == "none\nx=\n"
