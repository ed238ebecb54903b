"""Upstream servers' tasks (SEP-2663): a `tools` call whose server answers with a task is polled to
its result at the server's pace, counts as progress, routes the task's questions to the session's
answerer, cancels the task when the script ends first; a server that only runs tasks works; a
server that does not offer them gets plain calls (docs/tasks.md, "Upstream tasks").

The server is `tests/servers/tasks_server.py`, a real subprocess on the SDK's server side; it logs
every request it gets, which is what the tests count.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from _connections_support import SERVERS, Answers, wait_until
from toolshell.config import Config, ServerConfig
from toolshell.connections.base import CallOptions
from toolshell.connections.factory import make_connection
from toolshell.errors import ToolshellError
from toolshell.host import Host

pytestmark = pytest.mark.anyio

TASKS_SERVER = str(SERVERS / "tasks_server.py")


def config(log: Path, *modes: str, timeout: float = 20, shell_seconds: float = 60, **server: Any) -> Config:
    entry = {"name": "tasks", "command": sys.executable, "args": [TASKS_SERVER, str(log), *modes], **server}
    return Config.model_validate(
        {
            "mcp": {"servers": [{**entry, "timeout_seconds": timeout}]},
            "approval": {"mode": "off"},
            "include_builtins": False,
            "shell": {"timeout_seconds": shell_seconds},
        }
    )


def events(log: Path, kind: str | None = None) -> list[dict[str, Any]]:
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    seen = [json.loads(line) for line in lines]
    return [e for e in seen if kind is None or e["event"] == kind]


async def test_a_tool_the_server_runs_as_a_task_is_polled_to_its_result_at_the_servers_pace(tmp_path: Path) -> None:
    log = tmp_path / "log"
    async with Host.open(config(log)) as host:
        result = await host.session().run("tools tasks slow seconds=1.5 poll_ms=300 | tr a-z A-Z")
    polls = events(log, "get")
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout == f"SLOW DONE AFTER {len(polls)} POLLS\n"
    assert events(log, "call") == [{"event": "call", "tool": "slow", "declared": True}]
    # 1.5 s at one poll per 300 ms is 5 polls (6 with the last, late one); a client that did
    # not wait as asked would poll dozens of times
    assert 2 <= len(polls) <= 7
    assert polls[-1]["status"] == "completed"


async def test_polling_a_task_that_outlives_the_idle_timeout_counts_as_progress(tmp_path: Path) -> None:
    log = tmp_path / "log"
    async with Host.open(config(log, timeout=2)) as host:
        result = await host.session().run("tools tasks slow seconds=5 poll_ms=300")
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout.startswith("slow done after ")
    assert events(log, "cancel") == []


async def test_a_tasks_question_goes_to_the_sessions_answerer_and_its_answer_back_with_tasks_update(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log"
    person = Answers(types.ElicitResult(action="accept", content={"name": "Ada"}))
    async with Host.open(config(log)) as host:
        result = await host.session(answerer=person).run("tools tasks ask")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "hello Ada\n", "")
    assert person.questions == [("tasks", "What is your name?")]  # once, though two polls showed it
    assert [e["status"] for e in events(log, "get")][-3:] == ["input_required", "input_required", "completed"]
    updates = events(log, "update")
    assert updates == [
        {"event": "update", "tool": "ask", "responses": {"q1": {"action": "accept", "content": {"name": "Ada"}}}}
    ]


async def test_a_tasks_question_with_nobody_to_answer_is_declined(tmp_path: Path) -> None:
    log = tmp_path / "log"
    async with Host.open(config(log)) as host:
        result = await host.session().run("tools tasks ask")
    assert (result.exit_code, result.stdout) == (0, "no name (decline)\n")
    assert [e["responses"] for e in events(log, "update")] == [{"q1": {"action": "decline"}}]


async def test_a_script_that_times_out_sends_tasks_cancel_for_the_task_it_waited_on(tmp_path: Path) -> None:
    log = tmp_path / "log"
    async with Host.open(config(log, shell_seconds=2)) as host:
        result = await host.session().run("tools tasks forever")
        await wait_until(lambda: events(log, "cancel") != [], limit=10)
    assert result.exit_code != 0
    assert "2 s limit" in result.stderr
    assert events(log, "cancel") == [{"event": "cancel", "tool": "forever"}]


async def test_a_cancelled_script_sends_tasks_cancel_for_the_task_it_waited_on(tmp_path: Path) -> None:
    log = tmp_path / "log"
    async with Host.open(config(log)) as host:
        session = host.session()
        async with anyio.create_task_group() as tg:
            tg.start_soon(session.run, "tools tasks forever")
            await wait_until(lambda: events(log, "get") != [], limit=20)
            tg.cancel_scope.cancel()
        await wait_until(lambda: events(log, "cancel") != [], limit=10)
    assert events(log, "cancel") == [{"event": "cancel", "tool": "forever"}]


async def test_polls_do_not_outlast_the_absolute_cap_and_a_task_cut_off_there_is_cancelled(tmp_path: Path) -> None:
    log = tmp_path / "log"
    entry = {"name": "tasks", "command": sys.executable, "args": [TASKS_SERVER, str(log)], "timeout_seconds": 20}
    conn = make_connection(ServerConfig.model_validate(entry))
    try:
        with pytest.raises(ToolshellError) as cut:  # idle 0.4 s, polls every 0.2 s: the 8 s cap ends it
            await conn.call_tool("forever", {}, CallOptions(timeout_seconds=0.4))
        await wait_until(lambda: events(log, "cancel") != [], limit=10)
    finally:
        await conn.close()
    assert cut.value.message == "server 'tasks' tool 'forever' ran past its absolute cap of 8s (20 × the idle timeout)"
    assert len(events(log, "get")) >= 8  # alive all along: each poll started the idle timeout over
    assert events(log, "cancel") == [{"event": "cancel", "tool": "forever"}]


async def test_a_task_that_fails_fails_the_call_with_the_servers_error(tmp_path: Path) -> None:
    log = tmp_path / "log"
    async with Host.open(config(log)) as host:
        result = await host.session().run("tools tasks fail")
    error = json.loads(result.stderr.splitlines()[-1])["error"]
    assert result.exit_code == 1
    assert "the job broke" in error["message"]
    assert events(log, "cancel") == []  # a finished task is not cancelled


@pytest.mark.parametrize(
    ("tool", "said"),
    [("sample", "Sampling not supported"), ("garble", "that is not an elicitation, sampling or roots request")],
)
async def test_a_task_question_toolshell_cannot_answer_fails_the_call_and_cancels_the_task(
    tmp_path: Path, tool: str, said: str
) -> None:
    log = tmp_path / "log"
    async with Host.open(config(log)) as host:
        result = await host.session(answerer=Answers()).run(f"tools tasks {tool}")
    error = json.loads(result.stderr.splitlines()[-1])["error"]
    assert (result.exit_code, error["code"]) == (1, "tool_error")
    assert said in error["message"]
    assert events(log, "cancel") == [{"event": "cancel", "tool": tool}]
    assert events(log, "update") == []


class Yes:
    """Answers every question with a name."""

    def __init__(self) -> None:
        self.asked = 0

    async def elicit(self, server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked += 1
        return types.ElicitResult(action="accept", content={"name": "Ada"})


async def test_a_task_that_keeps_asking_new_questions_is_cut_off_and_cancelled(tmp_path: Path) -> None:
    log = tmp_path / "log"
    person = Yes()
    async with Host.open(config(log)) as host:
        result = await host.session(answerer=person).run("tools tasks pester poll_ms=0")
    error = json.loads(result.stderr)["error"]
    assert "asked more than 64 questions in one task" in error["message"]
    assert person.asked == 64
    assert events(log, "cancel") == [{"event": "cancel", "tool": "pester"}]


async def test_a_server_that_only_runs_tools_as_tasks_and_says_so_gets_task_calls_at_once(tmp_path: Path) -> None:
    log = tmp_path / "log"
    async with Host.open(config(log, "require")) as host:
        result = await host.session().run("tools tasks slow seconds=0.3 poll_ms=100")
    assert result.stdout.startswith("slow done after ")
    assert events(log, "refused") == []


async def test_a_server_that_refuses_a_plain_call_with_32021_gets_it_and_later_calls_as_tasks(tmp_path: Path) -> None:
    log = tmp_path / "log"
    async with Host.open(config(log, "require", "quiet")) as host:
        result = await host.session().run("tools tasks slow seconds=0.3 poll_ms=100; tools tasks slow seconds=0")
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout.count("slow done after ") == 2
    calls = [(e["event"], e.get("declared")) for e in events(log) if e["event"] in ("call", "refused")]
    # the first call goes plain (the server did not advertise tasks), then again as a task; the
    # next declares tasks at once
    assert calls == [("call", False), ("refused", None), ("call", True), ("call", True)]


async def test_a_tool_that_runs_only_as_a_task_on_an_older_connection_says_why_it_cannot_run(tmp_path: Path) -> None:
    log = tmp_path / "log"
    async with Host.open(config(log, "require", protocol="2025-11-25")) as host:
        result = await host.session().run("tools tasks slow")
    error = json.loads(result.stderr)["error"]
    assert (result.exit_code, error["code"]) == (1, "tool_error")
    assert "runs this tool only as a task (the Tasks extension)" in error["message"]
    assert "on 2026-07-28 connections only" in error["message"]
    assert [e["declared"] for e in events(log, "call")] == [False]  # no second try: it could not be a task


async def test_a_task_sent_to_a_call_that_did_not_offer_tasks_is_not_followed(tmp_path: Path) -> None:
    log = tmp_path / "log"
    async with Host.open(config(log, "quiet", "rogue")) as host:
        result = await host.session().run("tools tasks slow seconds=0.2")
    error = json.loads(result.stderr)["error"]
    assert (result.exit_code, error["code"]) == (1, "tool_error")
    assert "answered 'slow' with a task, which this call did not offer" in error["message"]
    assert events(log, "get") == []


async def test_a_server_that_does_not_advertise_tasks_gets_plain_calls(tmp_path: Path) -> None:
    log = tmp_path / "log"
    async with Host.open(config(log, "quiet")) as host:
        result = await host.session().run("tools tasks declared; tools tasks slow seconds=0.2")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "plain\nslow done (plain)\n", "")
    assert [e["declared"] for e in events(log, "call")] == [False, False]
    assert events(log, "get") == []


async def test_an_advertising_server_sees_the_extension_on_calls_and_not_on_listings(tmp_path: Path) -> None:
    log = tmp_path / "log"
    async with Host.open(config(log)) as host:
        result = await host.session().run("tools tasks declared")
    assert result.stdout == "declared\n"
    assert [e["declared"] for e in events(log, "list")] == [False]


async def test_over_streamable_http_a_task_is_followed_with_its_id_in_mcp_name(tmp_path: Path) -> None:
    log = tmp_path / "log"
    proc = await anyio.open_process([sys.executable, TASKS_SERVER, str(log), "http"])
    try:
        await wait_until(lambda: events(log, "listening") != [], limit=20)
        url = f"http://127.0.0.1:{events(log, 'listening')[0]['port']}/mcp"
        person = Answers(types.ElicitResult(action="accept", content={"name": "Ada"}))
        async with Host.open(config(log, type="http", url=url, command=None, args=[])) as host:
            result = await host.session(answerer=person).run(
                "tools tasks ask; tools tasks slow seconds=0.5 poll_ms=100"
            )
    finally:
        proc.terminate()
        await proc.wait()
    # the server refuses `tasks/*` whose `Mcp-Name` is not the task id (-32020)
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout.startswith("hello Ada\nslow done after ")
    assert [e["tool"] for e in events(log, "update")] == ["ask"]


async def test_a_poll_interval_past_any_clock_is_taken_as_the_longest_and_the_task_is_followed(tmp_path: Path) -> None:
    log = tmp_path / "log"
    huge = "1" + "0" * 400  # 10**400 ms: as a float it overflows
    async with Host.open(config(log, timeout=2)) as host:
        result = await host.session().run(f"tools tasks slow seconds=1 poll_ms={huge}")
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout.startswith("slow done after ")


async def test_a_malformed_task_is_refused_and_cancelled_on_the_server(tmp_path: Path) -> None:
    log = tmp_path / "log"
    async with Host.open(config(log, "floatpoll")) as host:
        result = await host.session().run("tools tasks forever")
        await wait_until(lambda: events(log, "cancel") != [], limit=10)
    assert result.exit_code != 0
    assert "malformed task (pollIntervalMs is not valid); its task is cancelled" in result.stderr
    assert events(log, "cancel") == [{"event": "cancel", "tool": "forever"}]
