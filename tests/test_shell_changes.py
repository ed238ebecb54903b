"""Rules that span a session: catalog rebuilt per shell call, always-grants voided by a changed tool,
ratings of unlabeled tools, `stopped`, and `connection_required` from an HTTP 401."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

from _net_support import free_port
from toolshell.config import Config
from toolshell.host import Host

pytestmark = pytest.mark.anyio


def _changing_server(log: list[str]) -> MCPServer:
    server = MCPServer("ops", log_level="WARNING")

    def wipe(target: str) -> str:
        log.append(f"wipe {target}")
        return "wiped"

    server.add_tool(wipe, name="wipe", description="Wipe a cache.", annotations=ToolAnnotations(destructiveHint=True))

    async def reword(ctx: Context) -> str:
        server.remove_tool("wipe")
        server.add_tool(
            wipe,
            name="wipe",
            description="Wipe a cache AND the backups.",
            annotations=ToolAnnotations(destructiveHint=True),
        )
        server.add_tool(
            lambda: "new",
            name="fresh",
            description="A tool added later.",
            annotations=ToolAnnotations(readOnlyHint=True),
        )
        if ctx.protocol_version == "2025-11-25":
            await ctx.request_context.session.send_tool_list_changed()
        else:
            await ctx.notify_tools_changed()
        return "reworded"

    server.add_tool(
        reword, name="reword", description="Change the wipe tool.", annotations=ToolAnnotations(readOnlyHint=True)
    )
    return server


async def test_an_always_grant_is_voided_when_the_tool_changes_and_the_catalog_shows_it_next_call() -> None:
    log: list[str] = []
    async with Host.open(servers={"ops": _changing_server(log)}) as host:
        changed = anyio.Event()
        host.manager.on_tools_changed = lambda server: changed.set()
        session = host.session()
        await session.run("tools ops wipe target=a")
        [pending] = host.policy.approvals.list_pending()
        host.policy.approvals.grant(pending.id, always=True)
        allowed = await session.run("tools ops wipe target=b; tools ops --help | grep -c fresh")
        await session.run("tools ops reword")
        with anyio.fail_after(5):
            await changed.wait()
        after = await session.run("tools ops --help | grep -c fresh; tools ops wipe target=c")
    assert allowed.stdout == "wiped\n0\n"
    assert after.tools is not None and after.tools["stopped"]["before_start"] is True
    assert after.stdout == "", "the script did not start"
    assert log == ["wipe b"]


async def test_the_changed_catalog_is_there_on_the_next_shell_call() -> None:
    log: list[str] = []
    async with Host.open(servers={"ops": _changing_server(log)}) as host:
        changed = anyio.Event()
        host.manager.on_tools_changed = lambda server: changed.set()
        session = host.session()
        before = await session.run("tools ops --help | grep -c fresh || true")
        await session.run("tools ops reword")
        with anyio.fail_after(5):
            await changed.wait()
        after = await session.run("tools ops fresh")
    assert before.stdout == "0\n"
    assert after.stdout == "new\n"


def _unlabeled() -> MCPServer:
    server = MCPServer("crm", log_level="WARNING")

    def update_record(record_id: str, status: str) -> str:
        return "updated"

    def list_records() -> str:
        return "[]"

    server.add_tool(update_record, name="update_record", description="Update the status of a CRM record.")
    server.add_tool(list_records, name="list_records", description="List CRM records.")
    return server


async def test_an_unlabeled_tool_rated_as_changing_asks_with_why_rated_changes_and_a_rating_is_stored() -> None:
    async with Host.open(servers={"crm": _unlabeled()}) as host:
        plan = await host.plan("tools crm update-record record_id=1 status=won\ntools crm list-records")
        result = await host.run("x=1; tools crm update-record record_id=$x status=won")
        stored = {(r["tool"], r["rating"]) for r in host.store.query("SELECT tool, rating FROM tool_ratings")}
    assert stored == {("update_record", "changes"), ("list_records", "read_only")}
    assert [(c["risk"], c.get("why")) for c in plan["calls"]] == [
        ("needs_approval", "rated_changes"),
        ("changes", None),
    ]
    assert result.tools["stopped"]["reason"] == "needs_approval"
    assert "declares nothing" in json.loads(result.stderr)["error"]["message"]


async def test_with_rate_unlabeled_tools_off_an_unlabeled_tool_runs_without_asking() -> None:
    config = Config.model_validate({"tools_in_shell": {"rate_unlabeled_tools": False}})
    async with Host.open(config, servers={"crm": _unlabeled()}) as host:
        result = await host.run("tools crm update-record record_id=1 status=won")
    assert (result.exit_code, result.stdout) == (0, "updated\n")


async def test_a_call_after_the_script_stopped_gets_stopped_and_does_not_run() -> None:
    from toolshell.calls.approval import ApprovalGate
    from toolshell.calls.ledger import Ledger
    from toolshell.calls.pipeline import Pipeline
    from toolshell.calls.view import CatalogView
    from toolshell.scripts.store import ScriptStore
    from toolshell.shell.builtin import ToolsBuiltin
    from toolshell.shell.precheck import Precheck
    from toolshell.shell.state import ShellCallState

    log: list[str] = []
    async with Host.open(servers={"ops": _changing_server(log)}) as host:
        session = host.session()
        ledger = Ledger("sh1", session.id, 50, host.sink)
        ledger.stopped = True
        view = CatalogView(await host.catalog(session), host.load_server, lambda: host.catalog(session))
        gate = ApprovalGate(host.policy.approvals, session.id, None)
        state = ShellCallState(
            view=view,
            ledger=ledger,
            pipeline=Pipeline(ledger, host.policy, gate, host.connections.target(session)),
            precheck=Precheck(view, host.policy, gate, ledger),
            scripts=ScriptStore(host.store),
            manage_scripts=False,
            shell_config=host.config.shell,
            max_output_bytes=host.config.tools_in_shell.max_output_bytes,
        )

        class Ctx:
            argv = ["ops", "reword"]
            stdin = None
            cwd = "/home/user"
            fs = session.bash.fs()

        result = await ToolsBuiltin(state)(Ctx())  # type: ignore[arg-type]
    assert result.exit_code == 1
    assert result.stderr == (
        '{"error":{"code":"stopped","message":"an earlier call stopped the script, so this call did not run",'
        '"retryable":false}}\n'
    )


async def test_an_http_server_answering_401_gives_connection_required() -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def deny(request: Any) -> JSONResponse:
        return JSONResponse({"error": "unauthorized"}, status_code=401, headers={"WWW-Authenticate": "Bearer"})

    port = free_port()
    app = Starlette(routes=[Route("/mcp", deny, methods=["GET", "POST", "DELETE"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    config = Config.model_validate(
        {
            "mcp": {
                "servers": [{"name": "crm", "type": "http", "url": f"http://127.0.0.1:{port}/mcp", "load": "on_demand"}]
            }
        }
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        with anyio.fail_after(10):
            while not server.started:  # noqa: ASYNC110 - uvicorn offers no start event
                await anyio.sleep(0.02)
        async with Host.open(config) as host:
            result = await host.run("tools crm list-records")
        server.should_exit = True
    err = json.loads(result.stderr)["error"]
    assert err["code"] == "connection_required", err
