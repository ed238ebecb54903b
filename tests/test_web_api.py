"""`toolshell web`'s protection and JSON API, driven in-process over httpx2's ASGI transport, over a
real `Host` with the in-process GitHub stand-in."""

from __future__ import annotations

import re
import shlex
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from click.testing import CliRunner
from starlette.applications import Starlette

from _github_server import make_github
from test_docs import parse_blocks
from toolshell.config import Config, load_text
from toolshell.frontends.cli import main as cli_main
from toolshell.frontends.serve.auth import NO_AUTH
from toolshell.frontends.web import web_app
from toolshell.frontends.web.serve import ui_mount, url_for
from toolshell.host import Host
from toolshell.registry.entry import ToolEntry

pytestmark = pytest.mark.anyio

TOKEN = "test-token-0123456789"
BASE = "http://127.0.0.1:8766"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
DOC = Path(__file__).resolve().parent.parent / "docs" / "web.md"
MANAGE = "[tools_in_shell]\nmanage_scripts = true\n"
TRIGGERS = '\n[[triggers]]\nname = "nightly-greet"\nscript = "greet"\nschedule = "@daily"\n'


@asynccontextmanager
async def _page(
    config: Config | None = None, calls: list[Any] | None = None
) -> AsyncIterator[tuple[Host, httpx2.AsyncClient]]:
    async with Host.open(config or Config(), servers={"github": make_github(calls)}) as host:
        transport = httpx2.ASGITransport(app=web_app(host, TOKEN))
        async with httpx2.AsyncClient(transport=transport, base_url=BASE) as client:
            yield host, client


def _denied(message: str) -> dict[str, Any]:
    return {"error": {"code": "denied", "message": message, "retryable": False}}


# --- protection ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/api/approvals", "/api/servers", "/api/nothing-here", "/nothing-here"])
async def test_a_request_without_the_token_gets_401_and_names_the_fix(path: str) -> None:
    async with _page() as (_, client):
        response = await client.get(path)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json() == _denied(
        "this page needs its token: open the URL toolshell web printed, or send 'Authorization: Bearer <token>'"
    )


async def test_a_wrong_token_gets_401_in_both_headers_and_without_the_bearer_scheme() -> None:
    async with _page() as (_, client):
        statuses = [
            (await client.get("/api/approvals", headers={"Authorization": "Bearer nope"})).status_code,
            (await client.get("/api/approvals", headers={"X-Toolshell-Token": "nope"})).status_code,
            (await client.get("/api/approvals", headers={"Authorization": TOKEN})).status_code,  # no "Bearer"
            (await client.get("/api/approvals", headers={"X-Toolshell-Token": TOKEN})).status_code,
        ]
    assert statuses == [401, 401, 401, 200]


async def test_the_right_token_in_a_cookie_or_the_query_string_is_refused_with_401() -> None:
    """A cookie is sent to every port of 127.0.0.1, so another local app would get it; a query
    string reaches logs. Only a header counts."""
    cookie = {"Cookie": f"toolshell_token={TOKEN}"}
    async with _page() as (_, client):
        answers = [
            await client.get("/api/approvals", headers=cookie),
            await client.get(f"/api/approvals?token={TOKEN}"),
            await client.post("/api/grants/revoke", headers=cookie, json={"tool": "tools github x"}),
            await client.post(f"/api/grants/revoke?token={TOKEN}", json={"tool": "tools github x"}),
        ]
    assert [a.status_code for a in answers] == [401, 401, 401, 401]


async def test_the_page_and_its_files_are_served_without_the_token_and_hold_no_secret() -> None:
    async with _page() as (_, client):
        answers = [await client.get(path) for path in ("/", "/static/app.js", "/static/style.css")]
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert all(TOKEN not in a.text for a in answers)
    assert "X-Toolshell-Token" in answers[1].text and "sessionStorage" in answers[1].text


async def test_no_answer_sets_a_cookie() -> None:
    async with _page(load_text(MANAGE)) as (host, client):
        await host.run("tools github delete-branch branch=a")
        [pending] = host.policy.approvals.list_pending()
        answers = [
            await client.get("/"),
            await client.get(f"/?token={TOKEN}"),  # the URL form toolshell web printed before
            await client.get("/static/app.js"),
            await client.get("/api/approvals", headers=AUTH),
            await client.get("/api/approvals"),
            await client.post(f"/api/approvals/{pending.id}", headers=AUTH, json={"answer": "once"}),
            await client.put("/api/scripts/greet", headers=AUTH, json={"body": "echo hi"}),
            await client.post("/api/scripts/greet/run", headers=AUTH),
            await client.get("/api/nothing", headers=AUTH),
        ]
    assert [a.status_code for a in answers] == [200, 200, 200, 200, 401, 200, 200, 200, 404]
    assert [a.headers.get_list("set-cookie") for a in answers] == [[]] * len(answers)


def test_the_printed_url_carries_the_token_in_its_fragment_which_a_browser_never_sends() -> None:
    assert url_for("127.0.0.1", 8766, TOKEN) == f"http://127.0.0.1:8766/#token={TOKEN}"
    assert url_for("::", 9, TOKEN, "/ui") == f"http://127.0.0.1:9/ui/#token={TOKEN}"
    assert url_for("::1", 9, TOKEN) == f"http://[::1]:9/#token={TOKEN}"


async def test_a_foreign_host_header_is_refused_even_with_the_token() -> None:
    async with _page() as (_, client):
        response = await client.get("/api/approvals", headers={**AUTH, "Host": "evil.example:8766"})
        loopback = await client.get("/api/approvals", headers={**AUTH, "Host": "localhost:8766"})
    assert response.status_code == 403
    assert response.json() == _denied("host 'evil.example:8766' is not served here; open the URL toolshell web printed")
    assert loopback.status_code == 200


@pytest.mark.parametrize("origin", ["http://evil.example", "http://127.0.0.1:3000", "null", "https://127.0.0.1:8766"])
async def test_a_foreign_origin_is_refused_even_with_the_token(origin: str) -> None:
    async with _page() as (_, client):
        get = await client.get("/api/approvals", headers={**AUTH, "Origin": origin})
        post = await client.post("/api/grants/revoke", headers={**AUTH, "Origin": origin}, json={"tool": "x"})
    assert (get.status_code, post.status_code) == (403, 403)
    assert get.json() == _denied(f"origin {origin!r} is not this page; only the page itself may call its API")


async def test_the_pages_own_origin_is_accepted() -> None:
    async with _page() as (_, client):
        response = await client.post("/api/grants/revoke", headers={**AUTH, "Origin": BASE}, json={"tool": "x"})
    assert response.status_code == 200


async def test_the_page_loads_nothing_from_another_site() -> None:
    async with _page() as (_, client):
        page = await client.get("/", headers=AUTH)
    assert "http://" not in page.text and "https://" not in page.text and "//" not in page.text.replace("<!", "")


async def test_every_answer_forbids_framing_caching_and_the_referer() -> None:
    async with _page() as (_, client):
        answers = [
            await client.get("/", headers=AUTH),
            await client.get("/api/grants"),
            await client.get("/static/style.css", headers=AUTH),
        ]
    for response in answers:
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["cache-control"] == "no-store"
        assert response.headers["referrer-policy"] == "no-referrer"


async def test_the_icon_is_an_svg_served_without_the_token_as_image_svg_xml_under_the_same_headers() -> None:
    async with _page() as (_, client):
        page = await client.get("/")
        linked, conventional = await client.get("/static/favicon.svg"), await client.get("/favicon.ico")
    assert '<link rel="icon" href="static/favicon.svg" type="image/svg+xml">' in page.text
    for icon in (linked, conventional):
        assert icon.status_code == 200
        assert icon.headers["content-type"] == "image/svg+xml"
        assert icon.headers["x-content-type-options"] == "nosniff"
        assert icon.headers["content-security-policy"] == page.headers["content-security-policy"]
        assert icon.content.startswith(b"<svg ") and b"<script" not in icon.content
    assert linked.content == conventional.content


# --- approvals and grants --------------------------------------------------------------------------


async def test_a_stopped_call_shows_up_as_a_pending_request_and_once_lets_it_run_on_the_next_run() -> None:
    calls: list[Any] = []
    script = "tools github delete-branch branch=fix-x"
    async with _page(calls=calls) as (host, client):
        stopped = await host.run(script)
        assert stopped.tools["stopped"]["reason"] == "needs_approval"
        [pending] = (await client.get("/api/approvals", headers=AUTH)).json()
        assert set(pending) >= {"id", "tool", "input", "risk", "why", "status", "created"}
        assert (pending["tool"], pending["input"], pending["risk"], pending["why"], pending["status"]) == (
            "tools github delete-branch",
            {"branch": "fix-x"},
            "needs_approval",
            "destructive",
            "pending",
        )
        answered = await client.post(f"/api/approvals/{pending['id']}", headers=AUTH, json={"answer": "once"})
        assert (answered.status_code, answered.json()["status"]) == (200, "granted_once")
        assert (await client.get("/api/approvals", headers=AUTH)).json() == []
        [grant] = (await client.get("/api/grants", headers=AUTH)).json()
        assert (grant["kind"], grant["tool"], grant["input"]) == (
            "once",
            "tools github delete-branch",
            {"branch": "fix-x"},
        )
        again = await host.run(script)
    assert (again.exit_code, again.stdout) == (0, "deleted fix-x\n")
    assert calls == [("delete-branch", {"branch": "fix-x"})]


async def test_always_grants_the_tool_and_revoke_withdraws_it() -> None:
    calls: list[Any] = []
    async with _page(calls=calls) as (host, client):
        await host.run("tools github delete-branch branch=a")
        [pending] = host.policy.approvals.list_pending()
        await client.post(f"/api/approvals/{pending.id}", headers=AUTH, json={"answer": "always"})
        ran = await host.run("tools github delete-branch branch=b")
        revoked = await client.post("/api/grants/revoke", headers=AUTH, json={"tool": "tools github delete-branch"})
        after = await host.run("tools github delete-branch branch=c")
    assert ran.exit_code == 0 and calls == [("delete-branch", {"branch": "b"})]
    assert revoked.json() == {"tool": "tools github delete-branch", "revoked": 1}
    assert after.tools["stopped"]["reason"] == "needs_approval"


async def test_deny_answers_the_request_and_a_second_answer_or_an_unknown_id_is_refused() -> None:
    async with _page() as (host, client):
        await host.run("tools github delete-branch branch=a")
        [pending] = host.policy.approvals.list_pending()
        denied = await client.post(f"/api/approvals/{pending.id}", headers=AUTH, json={"answer": "deny"})
        twice = await client.post(f"/api/approvals/{pending.id}", headers=AUTH, json={"answer": "once"})
        unknown = await client.post("/api/approvals/apr_000000", headers=AUTH, json={"answer": "once"})
        wrong = await client.post(f"/api/approvals/{pending.id}", headers=AUTH, json={"answer": "yes"})
        deep = await client.post(
            f"/api/approvals/{pending.id}", headers={**AUTH, "Content-Type": "application/json"}, content="[" * 100_000
        )
        huge = await client.post(
            f"/api/approvals/{pending.id}",
            headers={**AUTH, "Content-Type": "application/json"},
            content=b" " * 1_000_001 + b"{}",
        )
        not_json = await client.post(
            f"/api/approvals/{pending.id}", headers={**AUTH, "Content-Type": "text/plain"}, content="once"
        )
        assert host.policy.approvals.list_grants() == []
    assert (denied.status_code, denied.json()["status"]) == (200, "denied")
    assert twice.status_code == 409
    assert "already answered (denied by the person on the web page)" in twice.json()["error"]["message"]
    assert unknown.status_code == 404
    assert wrong.status_code == 400 and "'yes'" in wrong.json()["error"]["message"]
    assert not_json.status_code == 415
    assert (deep.status_code, huge.status_code) == (400, 413)


# --- bodies that are not valid Unicode --------------------------------------------------------------

SURROGATE = (
    "holds a lone UTF-16 surrogate (like \\ud800), which is not text; send valid Unicode: "
    "the character itself in UTF-8, or both halves of its surrogate pair"
)
BODY_ENDPOINTS = {  # every endpoint that reads a body: (method, path, a body with a lone surrogate)
    ("POST", "/api/approvals/{id}"): b'{"answer": "once", "note": "\\ud800"}',
    ("POST", "/api/grants/revoke"): b'{"tool": "tools github delete-branch\\udfff"}',
    ("PUT", "/api/scripts/{name}"): b'{"body": "echo hi", "description": "Say \\ud83d hi"}',
    ("POST", "/api/scripts/{name}/run"): b'{"who": {"names": ["Ada", "\\ud800"]}}',
}
WHERE = {
    "/api/approvals/{id}": "the value at /note",
    "/api/grants/revoke": "the value at /tool",
    "/api/scripts/{name}": "the value at /description",
    "/api/scripts/{name}/run": "the value at /who/names/1",
}


def test_every_endpoint_that_reads_a_body_is_covered_by_the_unicode_tests() -> None:
    from toolshell.frontends.web.api import Api

    routes = {(m, r.path) for r in Api.__new__(Api).routes() for m in (r.methods or ()) if m not in ("GET", "HEAD")}
    assert routes - {("DELETE", "/api/scripts/{name}")} == set(BODY_ENDPOINTS)


@pytest.mark.parametrize(("method", "route"), list(BODY_ENDPOINTS))
async def test_a_body_with_a_lone_surrogate_is_a_400_naming_where_and_nothing_changes(method: str, route: str) -> None:
    calls: list[Any] = []
    async with _page(load_text(MANAGE + TRIGGERS), calls) as (host, client):
        approvals, entry = host.policy.approvals, ToolEntry("github", "delete-branch")
        approvals.grant(approvals.request(entry, {"branch": "a"}, "s", "destructive").id, always=True)
        other = approvals.request(entry, {"branch": "b"}, "s", "destructive")
        await client.put("/api/scripts/greet", headers=AUTH, json={"body": "jq -r .who", "description": "Greet"})
        path = route.replace("{id}", other.id).replace("{name}", "greet")
        headers = {**AUTH, "Content-Type": "application/json"}
        response = await client.request(method, path, headers=headers, content=BODY_ENDPOINTS[(method, route)])
        after = (
            approvals.get(other.id).status,
            len(approvals.list_grants()),
            (await client.get("/api/scripts/greet", headers=AUTH)).json()["description"],
            len((await client.get("/api/scripts/greet", headers=AUTH)).json()["runs"]),
        )
    assert response.status_code == 400
    assert response.json() == {
        "error": {"code": "invalid_input", "message": f"{WHERE[route]} {SURROGATE}", "retryable": False}
    }
    assert after == ("pending", 1, "Greet", 0), "the refused body changed nothing"


async def test_a_key_with_a_lone_surrogate_or_a_nan_is_a_400_too() -> None:
    async with _page(load_text(MANAGE)) as (_, client):
        headers = {**AUTH, "Content-Type": "application/json"}
        await client.put("/api/scripts/greet", headers=AUTH, json={"body": "jq -r .who"})
        key = await client.post("/api/scripts/greet/run", headers=headers, content=b'{"a": {"\\ud800": 1}}')
        nan = await client.post("/api/scripts/greet/run", headers=headers, content=b'{"who": NaN}')
        big = await client.post("/api/scripts/greet/run", headers=headers, content=b'{"who": -Infinity}')
        paired = await client.post("/api/scripts/greet/run", headers=headers, content=b'{"who": "\\ud83d\\ude00"}')
    assert (key.status_code, key.json()["error"]["message"]) == (400, f"a key in /a {SURROGATE}")
    assert [r.status_code for r in (nan, big)] == [400, 400]
    assert nan.json()["error"]["message"] == 'the body must be a JSON object, e.g. {"repo": "acme/api"}'
    assert (paired.status_code, paired.json()["stdout"]) == (200, "\U0001f600\n"), "a surrogate pair is fine"


# --- timeline and servers --------------------------------------------------------------------------


async def test_the_timeline_shows_shell_calls_with_their_nested_calls_and_filters_by_session() -> None:
    async with _page() as (host, client):
        one, two = host.session(session_id="one"), host.session(session_id="two")
        await one.run("tools github list-pulls repo=a/b > /dev/null; b=$(echo x); tools github delete-branch branch=$b")
        await two.run("echo quiet")
        everything = (await client.get("/api/timeline", headers=AUTH)).json()
        only_one = (await client.get("/api/timeline?session=one&limit=5", headers=AUTH)).json()
        bad = await client.get("/api/timeline?limit=lots", headers=AUTH)
        odd = [(await client.get(f"/api/timeline?limit={v}", headers=AUTH)).status_code for v in ("²", "0", "1" * 5000)]
    assert {row["session_id"] for row in everything} == {"one", "two"}
    [row] = only_one
    assert [(c["type"], c["command"], c["outcome"]) for c in row["calls"]] == [
        ("tool.nested_call", "tools github list-pulls", "completed"),
        ("tool.nested_call", "tools github delete-branch", "stopped_for_approval"),
    ]
    assert all(isinstance(c["duration_ms"], float) for c in row["calls"])
    assert bad.status_code == 400 and "from 1 to 500" in bad.json()["error"]["message"]
    assert odd == [400, 400, 400]


async def test_servers_show_state_protocol_and_tool_count() -> None:
    async with _page() as (_, client):
        servers = {s["name"]: s for s in (await client.get("/api/servers", headers=AUTH)).json()}
    github = servers["github"]
    assert (github["state"], github["tool_count"], github["last_error"]) == ("ready", 6, None)
    assert github["protocol_version"] and github["stderr_tail"] == []


# --- saved scripts ---------------------------------------------------------------------------------


async def test_saving_or_deleting_a_script_needs_manage_scripts() -> None:
    async with _page() as (_, client):
        put = await client.put("/api/scripts/greet", headers=AUTH, json={"body": "echo hi"})
        delete = await client.delete("/api/scripts/greet", headers=AUTH)
    assert put.status_code == 403
    assert (
        put.json()["error"]["message"]
        == "saving scripts needs manage_scripts = true under [tools_in_shell] in the config"
    )
    assert delete.status_code == 403


async def test_a_script_is_saved_listed_run_with_json_input_and_deleted() -> None:
    schema = {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]}
    async with _page(load_text(MANAGE + TRIGGERS)) as (_, client):
        put = await client.put(
            "/api/scripts/greet",
            headers=AUTH,
            json={"body": "jq -r '\"hi \\(.who)\"'\n", "description": "Say hi", "input_schema": schema},
        )
        ran = await client.post("/api/scripts/greet/run", headers=AUTH, json={"who": "Ada"})
        refused = await client.post("/api/scripts/greet/run", headers=AUTH, json={"who": 7})
        [listed] = (await client.get("/api/scripts", headers=AUTH)).json()
        one = (await client.get("/api/scripts/greet", headers=AUTH)).json()
        deleted = await client.delete("/api/scripts/greet", headers=AUTH)
        missing = await client.get("/api/scripts/greet", headers=AUTH)
    assert put.status_code == 200 and put.json()["body"] == "jq -r '\"hi \\(.who)\"'\n"
    assert ran.json() == {"script": "greet", "exit_code": 0, "success": True, "stdout": "hi Ada\n"}
    assert refused.status_code == 400 and "who" in refused.json()["error"]["message"]
    assert (listed["name"], listed["description"], listed["input_schema"]) == ("greet", "Say hi", schema)
    assert listed["triggers"] == [{"name": "nightly-greet", "schedule": "@daily", "webhook": False}]
    assert [r["exit_code"] for r in listed["runs"]] == [0], "the run shows as a trigger run"
    assert "body" not in listed and one["body"] == put.json()["body"]
    assert deleted.json() == {"deleted": "greet"}
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_command"


async def test_a_script_whose_call_needs_approval_stops_with_the_report_as_a_webhook_run_does() -> None:
    async with _page(load_text(MANAGE)) as (host, client):
        await client.put("/api/scripts/cleanup", headers=AUTH, json={"body": "tools github delete-branch branch=old\n"})
        ran = (await client.post("/api/scripts/cleanup/run", headers=AUTH)).json()
        [pending] = (await client.get("/api/approvals", headers=AUTH)).json()
    assert ran["exit_code"] == 1 and ran["tools"]["stopped"]["reason"] == "needs_approval"
    assert pending["input"] == {"branch": "old"}


async def test_a_bad_script_body_or_name_is_a_400_that_says_what_to_write() -> None:
    async with _page(load_text(MANAGE)) as (_, client):
        no_body = await client.put("/api/scripts/greet", headers=AUTH, json={"description": "x"})
        blank = await client.put("/api/scripts/greet", headers=AUTH, json={"body": "  "})
        bad_name = await client.put("/api/scripts/no%20spaces", headers=AUTH, json={"body": "echo"})
        bad_schema = await client.put("/api/scripts/greet", headers=AUTH, json={"body": "echo", "input_schema": []})
    assert [r.status_code for r in (no_body, blank, bad_name, bad_schema)] == [400, 400, 400, 400]
    assert "pipe the script on stdin" in blank.json()["error"]["message"]
    assert no_body.json()["error"]["message"] == 'send {"body": "<bash script>", "description": "<one line>"}'


# --- the command -----------------------------------------------------------------------------------


def test_a_port_in_use_is_one_clear_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = CliRunner().invoke(cli_main, ["web", "--port", str(port)])
    assert result.exit_code == 1
    assert result.stderr == f"Error: port {port} on 127.0.0.1 is in use; choose another with --port\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "99999"], "Invalid value for '--port': 99999 is not in the range 0<=x<=65535."),
        (["--port", "web"], "Invalid value for '--port': 'web' is not a valid integer range."),
        (["--host", "10.1.2.3"], "--host 10.1.2.3 would let other machines answer your approvals"),
        (
            ["--host", "no such host!", "--allow-remote"],
            "--host 'no such host!' is not an address this machine can bind",
        ),
    ],
)
def test_a_bad_port_or_host_is_refused_with_one_clear_line_and_no_traceback(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli_main, ["web", *args])
    assert result.exit_code in (1, 2)
    assert message in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.strip().count("\n") <= 3  # click's usage lines at most, then the one error line


async def test_toolshell_web_prints_its_url_with_the_token_on_one_line_and_answers_on_it() -> None:
    process = await anyio.open_process(
        [sys.executable, "-c", "from toolshell.frontends.cli import main; main()", "web", "--port", "0"]
    )
    try:
        assert process.stdout is not None
        with anyio.fail_after(30):
            line = await process.stdout.receive()
        url = line.decode().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/#token=[A-Za-z0-9_-]{32}", url), url
        base, _, token = url.partition("#token=")
        async with httpx2.AsyncClient() as client:
            with anyio.fail_after(30):
                without = await client.get(base + "api/servers")
                with_token = await client.get(base + "api/servers", headers={"Authorization": f"Bearer {token}"})
        assert without.status_code == 401
        assert with_token.status_code == 200 and {s["name"] for s in with_token.json()} >= {"runtime"}
        assert process.stderr is not None
        shown = _doc_block("$ toolshell web").splitlines()
        assert re.fullmatch(r"http://127\.0\.0\.1:8766/#token=\S+", shown[1]), "the doc shows the URL's form"
        said = ""
        with anyio.fail_after(30):  # the doc shows what toolshell web says on stderr (after any "waiting" line)
            while shown[2] not in said.splitlines():
                said += (await process.stderr.receive()).decode()
    finally:
        process.terminate()
        with anyio.fail_after(30):
            await process.wait()


# --- docs/web.md -----------------------------------------------------------------------------------


def _doc_block(first_line: str) -> str:
    blocks = parse_blocks(DOC.read_text(encoding="utf-8"), "docs/web.md")
    return next(b.text for b in blocks if b.lang == "text" and b.first_line.startswith(first_line))


def _curl(line: str, request_id: str) -> tuple[str, str, dict[str, str], str | None]:
    """(method, url, headers, body) of one documented curl line, with the token and a real request id."""
    words = shlex.split(line.replace("$TOKEN", TOKEN).replace("apr_123abc", request_id))
    method, headers, body, url = "GET", {}, None, ""
    i = 1
    while i < len(words):
        word = words[i]
        if word in ("-X", "-H", "-d"):
            value, i = words[i + 1], i + 1
            if word == "-X":
                method = value
            elif word == "-H":
                key, _, given = value.partition(":")
                headers[key.strip()] = given.strip()
            else:
                body, method = value, "POST" if method == "GET" else method
        elif word != "-s":
            url = word
        i += 1
    return method, url, headers, body


async def test_the_curl_examples_of_the_doc_work_against_the_page() -> None:
    lines = [ln for ln in _doc_block("curl ").splitlines() if ln.strip()]
    assert len(lines) == 5 and all(ln.startswith("curl -s ") for ln in lines)
    async with _page(load_text(MANAGE)) as (host, client):
        await host.run("tools github delete-branch branch=fix-x")
        [pending] = host.policy.approvals.list_pending()
        answers = []
        for line in lines:
            method, url, headers, body = _curl(line, pending.id)
            answers.append(await client.request(method, url, headers=headers, content=body))
        assert [a.status_code for a in answers] == [200] * 5, [a.text for a in answers]
        assert answers[1].json()["status"] == "granted_once"
        assert answers[4].json()["stdout"] == "Ada\n"


@pytest.mark.parametrize(("hosts", "accepted"), [(["box.lan"], ["box.lan:8766"]), (["*"], ["box.lan", "anything:1"])])
async def test_a_remote_page_answers_to_its_own_host_name_and_still_needs_the_token(
    hosts: list[str], accepted: list[str]
) -> None:
    async with Host.open(Config()) as host:
        transport = httpx2.ASGITransport(app=web_app(host, TOKEN, hosts=hosts))
        async with httpx2.AsyncClient(transport=transport, base_url=BASE) as client:
            for name in accepted:
                assert (await client.get("/api/grants", headers={**AUTH, "Host": name})).status_code == 200
                assert (await client.get("/api/grants", headers={"Host": name})).status_code == 401
            if hosts != ["*"]:
                assert (await client.get("/api/grants", headers={**AUTH, "Host": "other.lan"})).status_code == 403


async def test_the_page_works_mounted_under_ui_as_serve_http_can_add_it() -> None:
    async with Host.open(Config()) as host:
        mount, said = ui_mount(host, "127.0.0.1", 8765, NO_AUTH)
        token = (host.state_dir / "web-token").read_text().strip()
        url = f"http://127.0.0.1:8765/ui/#token={token}"
        outer = Starlette(routes=[mount])
        transport = httpx2.ASGITransport(app=outer)
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as client:
            page = await client.get(url.partition("#")[0])
            script = await client.get("/ui/static/app.js")
            approvals = await client.get("/ui/api/approvals", headers={"X-Toolshell-Token": token})
            refused = await client.get("/ui/api/approvals")
            by_cookie = await client.get("/ui/api/approvals", headers={"Cookie": f"toolshell_token={token}"})
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", token) and token not in said, "the start line never shows the token"
    assert said.startswith("http://127.0.0.1:8765/ui/ (the token is in ")
    assert page.status_code == 200 and 'src="static/app.js"' in page.text and script.status_code == 200
    assert (approvals.status_code, approvals.json()) == (200, [])
    assert (refused.status_code, by_cookie.status_code) == (401, 401)
