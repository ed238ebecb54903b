"""The first hour of calls: a denied call says who denied it, identical requests are one request,
stale requests expire (issue "The first hour", items 3 and 7)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from click.testing import CliRunner
from mcp.server.lowlevel import Server

from _github_server import make_github
from test_serve_loop import DELETE_AT_RUN_TIME, Person, served
from toolshell.config import Config
from toolshell.errors import ToolshellError
from toolshell.frontends.cli import main
from toolshell.host import Host
from toolshell.policy.approvals import Approvals
from toolshell.registry.entry import ToolEntry
from toolshell.store.sqlite import Store
from toolshell.timeline.sinks import query

pytestmark = pytest.mark.anyio
DELETE = ToolEntry("github", "delete-branch", annotations={"destructiveHint": True})


def _error(stderr: str) -> dict[str, Any]:
    return dict(json.loads(stderr.strip().splitlines()[-1])["error"])


def _denied_by(stderr: str, who: str) -> None:
    error = _error(stderr)
    assert error["code"] == "denied", error
    assert f"denied by {who}" in error["message"]
    assert "approvals grant" not in stderr


# --- item 3: a denied call is `denied`, naming who denied it -------------------------------------


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.parametrize("reply", [{"action": "accept", "content": {"answer": "deny"}}, {"action": "decline"}])
@pytest.mark.parametrize("script", [DELETE_AT_RUN_TIME, "tools github delete-branch branch=x"])
async def test_a_call_the_person_denies_through_the_client_fails_denied_naming_them_without_a_grant_hint(
    tmp_path: Path, mode: str, reply: dict[str, Any], script: str
) -> None:
    person = Person(types.ElicitResult.model_validate(reply))
    async with served(tmp_path, "http", mode, person) as client:
        result = await client.call_tool("bash", {"script": script})
    body = result.structured_content
    _denied_by(body["stderr"], "the person through the MCP client")
    assert body["tools"]["stopped"]["approval"] == "denied"
    assert body["tools"]["stopped"]["reason"] == "denied"


@pytest.mark.parametrize("where", ["before_start", "at_run_time"])
async def test_a_call_the_person_at_the_terminal_denies_fails_denied_in_both_holds(where: str) -> None:
    # lazy: the terminal's approver is what `toolshell shell` installs
    from toolshell.calls.approval import NamedApprover

    async def no(entry: Any, arguments: dict[str, Any], risk: Any) -> str:
        return "deny"

    script = "tools github delete-branch branch=x" if where == "before_start" else DELETE_AT_RUN_TIME
    config = Config.model_validate({"approval": {"inline": True}})
    async with Host.open(config, servers={"github": make_github([])}) as host:
        session = host.session()
        session.approver = NamedApprover(no, "the person at the terminal")
        result = await session.run(script)
        [request] = host.store.query("SELECT status, decided_by FROM approval_requests")
    _denied_by(result.stderr, "the person at the terminal")
    assert result.tools["stopped"]["reason"] == "denied"
    assert (request["status"], request["decided_by"]) == ("denied", "the person at the terminal")


async def test_a_call_waiting_on_the_store_names_the_command_that_denied_it(tmp_path: Path) -> None:
    config = Config.model_validate({"approval": {"wait_for": "store", "wait_seconds": 30}})
    async with Host.open(config, state_dir=tmp_path, servers={"github": make_github([])}) as host:
        other = Approvals(Store(tmp_path / "toolshell.db"))  # another process's view of the same state
        outcome: dict[str, Any] = {}

        async def run() -> None:
            outcome["result"] = await host.session().run(DELETE_AT_RUN_TIME)

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            with anyio.fail_after(20):
                while not (pending := other.list_pending()):  # noqa: ASYNC110  (another process writes it)
                    await anyio.sleep(0.05)
            other.deny(pending[0].id, by="a person with `toolshell approvals deny`")
    _denied_by(outcome["result"].stderr, "a person with `toolshell approvals deny`")


def test_answering_a_denied_request_again_says_who_denied_it(tmp_path: Path) -> None:
    state = tmp_path / "state"
    approvals = Approvals(Store(_state_db(state)))
    rid = approvals.request(DELETE, {"branch": "x"}, "s1", "destructive").id
    runner = CliRunner()
    assert runner.invoke(main, ["approvals", "deny", rid, "--state-dir", str(state)]).exit_code == 0
    again = runner.invoke(main, ["approvals", "grant", rid, "--state-dir", str(state)])
    assert again.exit_code == 1
    assert "already answered (denied by a person with `toolshell approvals deny`)" in again.output


def _state_db(state: Path) -> Path:
    state.mkdir(mode=0o700, exist_ok=True)
    return state / "toolshell.db"


# --- item 7: one pending request per identical call; stale ones expire ---------------------------


async def test_the_same_script_run_twice_leaves_one_pending_request(tmp_path: Path) -> None:
    async with Host.open(Config(), state_dir=tmp_path, servers={"github": make_github([])}) as host:
        first = await host.session().run(DELETE_AT_RUN_TIME)
        second = await host.session().run(DELETE_AT_RUN_TIME)
        pending = host.policy.approvals.list_pending()
    assert [r.command for r in pending] == ["tools github delete-branch"]
    assert first.tools["stopped"]["request_id"] == second.tools["stopped"]["request_id"] == pending[0].id


def test_a_request_nobody_answers_expires_leaves_the_pending_list_and_says_so_when_answered() -> None:
    store = Store()
    approvals = Approvals(store, expire_seconds=60)
    old = approvals.request(DELETE, {"branch": "x"}, "s1", "destructive")
    store.execute("UPDATE approval_requests SET created_at=? WHERE id=?", (time.time() - 61, old.id))
    assert approvals.list_pending() == []
    assert [r.id for r in approvals.list_expired()] == [old.id]
    assert approvals.get(old.id).status == "expired"
    with pytest.raises(Exception, match=r"expired: nobody answered it within 60 s"):
        approvals.grant(old.id)
    fresh = approvals.request(DELETE, {"branch": "x"}, "s1", "destructive")
    assert fresh.id != old.id and fresh.status == "pending"


def test_approvals_list_shows_expired_requests_as_expired(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = Store(_state_db(state))
    approvals = Approvals(store)
    old = approvals.request(DELETE, {"branch": "x"}, "s1", "destructive")
    store.execute("UPDATE approval_requests SET created_at=? WHERE id=?", (time.time() - 901, old.id))
    runner = CliRunner()
    listed = runner.invoke(main, ["approvals", "list", "--expired", "--json", "--state-dir", str(state)])
    assert listed.exit_code == 0, listed.output
    assert [(r["id"], r["status"]) for r in json.loads(listed.output)] == [(old.id, "expired")]
    assert json.loads(runner.invoke(main, ["approvals", "list", "--json", "--state-dir", str(state)]).output) == []


# --- item 8: the timeline records what a call was given, whatever its outcome --------------------


async def test_the_timeline_records_what_a_failed_call_was_given_for_every_outcome() -> None:
    script = (
        "tools github get-pull repo=a/b number=seven || true\n"  # invalid_input: the schema wants a number
        "tools github get-pull repo=a/b stray || true\n"  # invalid_input: a stray word
        "tools nosuch thing x=1 api_token=hunter2 || true\n"  # unknown_command
        "tools github get-pull repo=a/b number=1 || true\n"  # tool_error
    )
    async with Host.open(servers={"github": make_github()}) as host:
        session = host.session()
        await session.run(script)
        [row] = query(host.store, session_id=session.id)
    calls = row["calls"] if "calls" in row else row["nested_calls"]
    assert [(c["command"], c["error_code"], json.loads(c["input_preview"])) for c in calls] == [
        ("tools github get-pull", "invalid_input", {"repo": "a/b", "number": "seven"}),
        ("tools github get-pull", "invalid_input", {"repo": "a/b", "_words": ["stray"]}),
        ("tools nosuch thing", "unknown_command", {"x": "1", "api_token": "***"}),
        ("tools github get-pull", "tool_error", {"repo": "a/b", "number": 1}),
    ]


async def test_the_timeline_preview_of_a_huge_failed_call_is_bounded() -> None:
    async with Host.open(servers={"github": make_github()}) as host:
        session = host.session()
        await session.run("tools nosuch tool " + "x" * 100_000 + " || true")
        [row] = query(host.store, session_id=session.id)
    [call] = row["calls"] if "calls" in row else row["nested_calls"]
    assert call["command"] == "tools nosuch tool"
    assert len(call["input_preview"]) <= 120 and call["input_preview"].endswith("…")


# --- item 5: an argument the schema does not name is a warning, or invalid_input when closed ------


def _git(log: list[dict[str, Any]]) -> Server[Any]:
    read_only = types.ToolAnnotations(readOnlyHint=True)
    props = {"repo_path": {"type": "string"}, "max_count": {"type": "integer"}}

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name="git_log", annotations=read_only, input_schema={"type": "object", "properties": props}),
                types.Tool(
                    name="git_show",
                    annotations=read_only,
                    input_schema={"type": "object", "properties": props, "additionalProperties": False},
                ),
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        log.append(dict(params.arguments or {}))
        return types.CallToolResult(content=[types.TextContent(type="text", text="commits")])

    return Server("git", on_list_tools=list_tools, on_call_tool=call_tool)


async def test_a_misspelt_argument_warns_with_the_nearest_property_and_the_call_still_runs() -> None:
    log: list[dict[str, Any]] = []
    async with Host.open(servers={"git": _git(log)}) as host:
        result = await host.run("tools git git-log repo_path=/r max_cont=1")
    assert (result.exit_code, result.stdout) == (0, "commits\n")
    assert "tools git git-log has no argument 'max_cont' (did you mean max_count?)" in result.stderr
    assert log == [{"repo_path": "/r", "max_cont": 1}]


async def test_a_misspelt_argument_to_a_closed_schema_is_invalid_input_and_nothing_is_sent() -> None:
    log: list[dict[str, Any]] = []
    async with Host.open(servers={"git": _git(log)}) as host:
        result = await host.run("tools git git-show repo_path=/r max_cont=1")
    assert _error(result.stderr)["code"] == "invalid_input"
    assert log == []


async def test_arguments_the_schema_names_give_no_warning() -> None:
    async with Host.open(servers={"git": _git([])}) as host:
        result = await host.run("tools git git-log repo_path=/r --max-count 2")
    assert (result.exit_code, result.stderr) == (0, "")


ROLES = """
[[mcp.servers]]
name = "counter"
type = "builtin"
module = "_builtin_support:mcp_server"
auto_bind = ["reviewer"]

[[roles]]
name = "developer"
mcp = { server_refs = ["counter"] }
"""


def test_run_with_a_misspelt_role_exits_2_with_the_nearest_role(tmp_path: Path) -> None:
    config = tmp_path / "toolshell.toml"
    config.write_text(ROLES)
    runner = CliRunner()
    args = ["run", "--config", str(config), "--state-dir", str(tmp_path / "state"), "-c", "true"]
    result = runner.invoke(main, [*args, "--role", "develper"])
    assert result.exit_code == 2, result.output
    error = _error(result.output)
    assert error["code"] == "invalid_input"
    assert error["message"].startswith("unknown role 'develper'; did you mean developer")  # nearest first
    assert runner.invoke(main, [*args, "--role", "reviewer"]).exit_code == 0  # an auto_bind tag is a role too


async def test_a_session_with_an_unknown_role_is_refused_by_the_python_api() -> None:
    async with Host.open(Config()) as host:
        with pytest.raises(ToolshellError) as refused:
            host.session(role="admin")
    assert refused.value.code == "invalid_input"
    assert "unknown role 'admin'" in refused.value.message


# --- item 10: revoke takes the forms listings print, and says when nothing matched ---------------


@pytest.mark.parametrize(
    "named",
    [
        ["tools fs write-file"],
        ["fs", "write_file"],
        ["mcp_fs__write_file"],
        ["fs:write_file"],
        ["always  tools fs write-file  (server fs: npx server-filesystem)"],
    ],
)
def test_revoke_takes_the_forms_the_listings_and_web_api_print(tmp_path: Path, named: list[str]) -> None:
    state = tmp_path / "state"
    approvals = Approvals(Store(_state_db(state)))
    write = ToolEntry("fs", "write_file", server_id="fs-id")
    approvals.grant(approvals.request(write, {"path": "/a"}, "s1", "destructive").id, always=True)
    result = CliRunner().invoke(main, ["approvals", "revoke", *named, "--state-dir", str(state)])
    assert (result.exit_code, result.stdout) == (0, "revoked 1 grant of tools fs write-file\n")
    assert approvals.list_grants() == []


def test_revoke_that_matches_nothing_exits_1_with_the_nearest_grants(tmp_path: Path) -> None:
    state = tmp_path / "state"
    approvals = Approvals(Store(_state_db(state)))
    write = ToolEntry("fs", "write_file", server_id="fs-id")
    approvals.grant(approvals.request(write, {"path": "/a"}, "s1", "destructive").id, always=True)
    result = CliRunner().invoke(main, ["approvals", "revoke", "tools fs write-fil", "--state-dir", str(state)])
    assert result.exit_code == 1
    assert "no grant in force for tools fs write-fil; did you mean tools fs write-file?" in result.output
    assert len(approvals.list_grants()) == 1


# --- item 10: pure computation reads as read-only, and `toolshell servers` says what was rated ---

MATH = """
[[mcp.servers]]
name = "math"
type = "builtin"
module = "_unlabeled_math:server"
"""


async def test_an_unlabeled_add_of_two_integers_runs_without_asking_while_a_real_change_still_asks() -> None:
    # lazy: the test server is imported as the config names it
    from _unlabeled_math import server

    async with Host.open(Config(), servers={"math": server}) as host:
        added = await host.run("tools math add a=2 b=3")
        noted = await host.run("tools math add-note text=hi")
    assert (added.exit_code, added.stdout, added.tools) == (0, "5\n", None)
    assert noted.tools["stopped"]["reason"] == "needs_approval"


def test_servers_lists_which_tools_were_rated_how_and_why_in_text_and_json(tmp_path: Path) -> None:
    config = tmp_path / "toolshell.toml"
    config.write_text(MATH)
    args = ["servers", "--config", str(config), "--state-dir", str(tmp_path / "state")]
    as_json = CliRunner().invoke(main, [*args, "--json"])
    assert as_json.exit_code == 0, as_json.output
    [row] = [r for r in json.loads(as_json.stdout) if r["name"] == "math"]
    assert [(t["tool"], t["rating"]) for t in row["rated"]] == [("add", "read_only"), ("add_note", "changes")]
    assert "pure computation" in row["rated"][0]["why"]
    assert row["rated"][1]["why"] == "its name has the change verb 'add'"
    assert "readOnlyHint" in row["rated"][1]["annotate"]
    text = CliRunner().invoke(main, args).stdout
    assert "    rated add: read_only (pure computation" in text
    assert "    rated add_note: changes (its name has the change verb 'add'); declare readOnlyHint" in text


# --- the web page: who denied, and expired requests leave it -------------------------------------

TOKEN = "test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def test_a_call_denied_on_the_web_page_names_the_page_and_an_expired_request_leaves_it() -> None:
    # lazy: the page's app and client, only for this test
    import httpx2

    from toolshell.frontends.web import web_app

    config = Config.model_validate({"approval": {"wait_for": "store", "wait_seconds": 30}})
    outcome: dict[str, Any] = {}
    async with Host.open(config, servers={"github": make_github()}) as host:
        transport = httpx2.ASGITransport(app=web_app(host, TOKEN))
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8766") as page:

            async def run() -> None:
                outcome["result"] = await host.session().run(DELETE_AT_RUN_TIME)

            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                with anyio.fail_after(20):
                    while not (shown := (await page.get("/api/approvals", headers=AUTH)).json()):  # noqa: ASYNC110
                        await anyio.sleep(0.05)  # the page polls the same way
                await page.post(f"/api/approvals/{shown[0]['id']}", headers=AUTH, json={"answer": "deny"})
            _denied_by(outcome["result"].stderr, "the person on the web page")

            stale = host.policy.approvals.request(DELETE, {"branch": "old"}, "s9", "destructive")
            host.store.execute("UPDATE approval_requests SET created_at=? WHERE id=?", (time.time() - 31, stale.id))
            assert (await page.get("/api/approvals", headers=AUTH)).json() == []
            late = await page.post(f"/api/approvals/{stale.id}", headers=AUTH, json={"answer": "once"})
    assert late.status_code == 409 and "expired unanswered" in late.json()["error"]["message"]


async def test_a_person_who_denies_a_shared_request_is_not_overruled_by_a_yes_given_to_it_first() -> None:
    # lazy: the terminal's approver is what `toolshell shell` installs
    from toolshell.calls.approval import NamedApprover

    calls: list[Any] = []
    config = Config.model_validate({"approval": {"inline": True}})
    async with Host.open(config, servers={"github": make_github(calls)}) as host:
        approvals = host.policy.approvals

        async def another_session_says_yes_first(entry: Any, arguments: dict[str, Any], risk: Any) -> str:
            [shared] = approvals.list_pending()
            approvals.grant(shared.id, by="the person through the MCP client")  # another session's person
            return "deny"

        session = host.session()
        session.approver = NamedApprover(another_session_says_yes_first, "the person at the terminal")
        result = await session.run(DELETE_AT_RUN_TIME)
        [entry] = [e for e in (await host.catalog()).entries if e.name == "delete-branch"]
        left_for_the_other = approvals.has_once(entry, {"branch": "x"})
    _denied_by(result.stderr, "the person at the terminal")
    assert calls == [] and left_for_the_other
