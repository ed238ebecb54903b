"""`toolshell serve`: an MCP server with one `bash` tool (plus keep_visible tools), in process and over HTTP."""

from __future__ import annotations

import json

import anyio
import httpx2
import pytest
from mcp import Client

from _net_support import free_port, wait_until_serving
from toolshell.config import Config
from toolshell.frontends.serve.auth import NO_AUTH
from toolshell.frontends.serve.server import _serve_http, build_server
from toolshell.host import Host

pytestmark = pytest.mark.anyio


async def test_the_agent_sees_one_bash_tool_the_model_reading_plain_text_and_code_the_run_json() -> None:
    async with Host.open() as host, Client(build_server(host, [])) as client:
        tools = await client.list_tools()
        result = await client.call_tool("bash", {"script": "tools text-metrics text-length text=hello"})
    assert [t.name for t in tools.tools] == ["bash"]
    assert "tools --help" in (tools.tools[0].description or "")
    body = result.structured_content
    assert body == {
        "exit_code": 0,
        "success": True,
        "stdout": "5\n",
        "stderr": "",
        "hints": ["text_metrics: Use text_length when you need a Unicode scalar count of supplied text."],
        "shell": body["shell"],
    }
    assert body["shell"].startswith("sh_") and result.structured_content == body
    # The model reads stdout as it is, then only what is not the default: the stdio client keeps its
    # shell, so the handle is in the object only.
    hint = "[hint] text_metrics: Use text_length when you need a Unicode scalar count of supplied text."
    assert [c.text for c in result.content] == [f"5\n{hint}"]


async def test_keep_visible_tools_stay_direct_and_callable_from_the_shell_too() -> None:
    config = Config.model_validate({"tools_in_shell": {"keep_visible": ["mcp_text_metrics__text_length"]}})
    async with Host.open(config) as host:
        visible = [e for e in await host.list_tools() if e.flat_name in config.tools_in_shell.keep_visible]
        async with Client(build_server(host, visible)) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            direct = await client.call_tool("mcp_text_metrics__text_length", {"text": "abc"})
            shell = await client.call_tool("bash", {"script": "tools text-metrics text-length text=abc"})
    assert names == ["bash", "mcp_text_metrics__text_length"]
    assert direct.content[0].text == "3"
    assert shell.structured_content["stdout"] == "3\n"


async def test_a_failing_script_is_an_error_result_with_the_json() -> None:
    async with Host.open() as host, Client(build_server(host, [])) as client:
        result = await client.call_tool("bash", {"script": "tools nope"})
    body = result.structured_content
    assert result.is_error is True
    assert json.loads(body["stderr"])["error"]["code"] == "unknown_command"


async def test_http_serving_binds_loopback_and_rejects_a_foreign_host_header() -> None:
    port = free_port()
    async with Host.open() as host, anyio.create_task_group() as tg:
        tg.start_soon(_serve_http, build_server(host, []), "127.0.0.1", port, NO_AUTH)
        url = f"http://127.0.0.1:{port}/mcp"
        await wait_until_serving(url)
        async with httpx2.AsyncClient() as http:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
            headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
            evil = await http.post(url, json=body, headers={**headers, "Host": "evil.example"})
            origin = await http.post(url, json=body, headers={**headers, "Origin": "http://evil.example"})
        async with Client(url) as client:
            names = [t.name for t in (await client.list_tools()).tools]
        tg.cancel_scope.cancel()
    # Exactly these: a request with no session is answered 400, so accepting 400 would pass with
    # the DNS-rebinding protection switched off.
    assert (evil.status_code, evil.text) == (421, "Invalid Host header")
    assert (origin.status_code, origin.text) == (403, "Invalid Origin header")
    assert names == ["bash"]


async def test_a_servers_question_during_a_script_goes_to_the_upstream_client_that_declared_elicitation() -> None:
    import mcp_types as types

    from test_llm_and_elicitation import _asking

    asked: list[str] = []

    async def answer(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Grace"})

    async with Host.open(servers={"greeter": _asking()}) as host:
        server = build_server(host, [])
        async with Client(server, mode="legacy", elicitation_callback=answer) as client:
            result = await client.call_tool("bash", {"script": "tools greeter greet"})
        async with Client(server, mode="legacy") as client:
            declined = await client.call_tool("bash", {"script": "tools greeter greet"})
    assert result.structured_content["stdout"] == "hello Grace\n"
    assert asked == ["[greeter] What is your name?"]
    assert declined.structured_content["stdout"] == "no answer (decline)\n"


async def test_toolshell_serve_over_stdio_is_a_working_mcp_server(tmp_path) -> None:
    import shutil
    import sys

    from mcp import StdioServerParameters

    exe = shutil.which("toolshell") or str(__import__("pathlib").Path(sys.executable).parent / "toolshell")
    params = StdioServerParameters(command=exe, args=["serve", "--state-dir", str(tmp_path)])
    with anyio.fail_after(60):
        async with Client(params) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            result = await client.call_tool("bash", {"script": "tools text-metrics text-length text=héllo"})
    assert names == ["bash"]
    assert result.structured_content["stdout"] == "5\n"


def test_serve_refuses_a_non_loopback_address_without_allow_remote() -> None:
    from click.testing import CliRunner

    from toolshell.frontends.cli import main

    result = CliRunner().invoke(main, ["serve", "--http", "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "would let other machines run scripts with your tools" in result.output
    assert "--allow-remote" in result.output and "no authentication" not in result.output


async def test_one_upstream_client_keeps_one_shell_across_bash_calls() -> None:
    async with Host.open() as host, Client(build_server(host, [])) as client:
        await client.call_tool("bash", {"script": "x=1; echo hi > f; cd /tmp"})
        again = await client.call_tool("bash", {"script": "echo x=$x; pwd; cat /home/user/f"})
    assert again.structured_content["stdout"] == "x=1\n/tmp\nhi\n"


async def test_http_serving_also_serves_the_web_page_under_ui_with_its_token(
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = free_port()
    async with Host.open() as host, anyio.create_task_group() as tg:
        tg.start_soon(_serve_http, build_server(host, []), "127.0.0.1", port, NO_AUTH, None, host)
        await wait_until_serving(f"http://127.0.0.1:{port}/mcp")
        async with httpx2.AsyncClient() as http:
            said = capsys.readouterr().err.split("the web page is on ")[1].strip()
            secret = (host.state_dir / "web-token").read_text().strip()
            without = await http.get(f"http://127.0.0.1:{port}/ui/api/approvals")
            page = await http.get(f"http://127.0.0.1:{port}/ui/")
            api = await http.get(f"http://127.0.0.1:{port}/ui/api/approvals", headers={"X-Toolshell-Token": secret})
        tg.cancel_scope.cancel()
    assert said.startswith(f"http://127.0.0.1:{port}/ui/ (the token is in {host.state_dir / 'web-token'}")
    assert secret not in said, "the log line never carries the page token"
    assert without.status_code == 401
    assert page.status_code == 200 and "<html" in page.text.lower()
    assert api.status_code == 200 and api.json() == []
