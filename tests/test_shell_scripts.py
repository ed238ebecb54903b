"""Saved scripts through `tools scripts`: save, list, run with checked input, nesting, the shared budget."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from _github_server import make_github
from toolshell.config import Config
from toolshell.host import Host

pytestmark = pytest.mark.anyio

MANAGE = Config.model_validate({"tools_in_shell": {"manage_scripts": True}})

SEED_SAVE = """cat <<'EOF' | tools scripts save triage-prs --description 'Label new pull requests.' \\
  --input-schema '{"type":"object","properties":{"repo":{"type":"string"}},"required":["repo"]}'
repo=$(jq -r .repo)
tools github list-pulls repo="$repo" state=open | jq -r '.[].number' | while read -r n; do
  tools github add-labels repo="$repo" number="$n" labels='["triage"]'
done
EOF
"""


def _open(calls: list[Any], config: Config = MANAGE) -> Any:
    return Host.open(config, servers={"github": make_github(calls)})


def _last_error(stderr: str) -> dict[str, Any]:
    return json.loads([line for line in stderr.splitlines() if line.startswith('{"error"')][-1])["error"]


async def test_the_seed_saved_script_is_saved_listed_and_run_with_its_input() -> None:
    calls: list[Any] = []
    async with _open(calls) as host:
        session = host.session()
        saved = await session.run(SEED_SAVE)
        listed = await session.run("tools scripts")
        ran = await session.run("tools scripts triage-prs repo=a/b")
    assert saved.stdout == "saved script triage-prs\n", saved.stderr
    assert "triage-prs" in listed.stdout and "Label new pull requests." in listed.stdout
    assert ran.exit_code == 0, ran.stderr
    assert calls == [
        ("list-pulls", {"repo": "a/b", "state": "open"}),
        *[("add-labels", {"repo": "a/b", "number": n, "labels": ["triage"]}) for n in (7, 8, 9)],
    ]
    assert ran.tools is None  # a run that succeeded carries no report (seed 000)


async def test_saving_needs_manage_scripts() -> None:
    async with _open([], Config()) as host:
        result = await host.run(SEED_SAVE)
    err = _last_error(result.stderr)
    assert err["code"] == "denied" and "manage_scripts" in err["message"]


async def test_a_saved_scripts_input_is_checked_against_its_schema() -> None:
    calls: list[Any] = []
    async with _open(calls) as host:
        session = host.session()
        await session.run(SEED_SAVE)
        result = await session.run("tools scripts triage-prs number=3")
    assert _last_error(result.stderr)["code"] == "invalid_input"
    assert calls == []


async def test_curl_is_not_available_inside_a_saved_script() -> None:
    async with _open([]) as host:
        session = host.session()
        await session.run("echo 'curl http://127.0.0.1:1/' | tools scripts save fetcher")
        result = await session.run("tools scripts fetcher")
    assert _last_error(result.stderr)["code"] == "unavailable"


class _Page(BaseHTTPRequestHandler):
    """A private-address page that counts the requests that reached it."""

    hits = 0

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        type(self).hits += 1
        body = b"<html><body><p>internal page</p></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def private_url() -> Iterator[str]:
    _Page.hits = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/internal"
    server.shutdown()
    server.server_close()


async def test_a_saved_scripts_web_fetch_is_held_by_the_web_fetch_guard_and_its_curl_refuses(private_url: str) -> None:
    # The caller's shell lists the page in network_allow: the saved script's own rule is what refuses curl.
    config = Config.model_validate(
        {"tools_in_shell": {"manage_scripts": True}, "shell": {"network_allow": [private_url]}}
    )
    async with _open([], config) as host:
        session = host.session()
        outside = await session.run(f"tools web-fetch url={private_url}")
        await session.run(f"echo 'tools web-fetch url={private_url}' | tools scripts save fetch-page")
        await session.run(f"echo 'curl -s {private_url}' | tools scripts save curl-page")
        inside = await session.run("tools scripts fetch-page")
        curl = await session.run("tools scripts curl-page")
    assert _last_error(inside.stderr) == _last_error(outside.stderr)
    assert _last_error(inside.stderr)["code"] == "denied" and "allow_private" in _last_error(inside.stderr)["message"]
    assert _last_error(curl.stderr)["code"] == "unavailable"
    assert _Page.hits == 0


async def test_a_saved_scripts_web_fetch_reaches_an_allowed_address_and_counts_against_the_callers_budget(
    private_url: str,
) -> None:
    port = private_url.split(":")[2].split("/")[0]
    config = Config.model_validate(
        {
            "tools_in_shell": {"manage_scripts": True, "call_limit": 1},
            "web_fetch": {"allow_private": [f"127.0.0.1:{port}"]},
        }
    )
    async with _open([], config) as host:
        session = host.session()
        await session.run(f"echo 'tools web-fetch url={private_url}' | tools scripts save once")
        await session.run(
            f"echo 'tools web-fetch url={private_url}; tools web-fetch url={private_url}' | tools scripts save twice"
        )
        once = await session.run("tools scripts once")
        twice = await session.run("tools scripts twice")
    assert "internal page" in once.stdout
    assert twice.tools["stopped"]["reason"] == "call_limit"
    assert twice.tools["stopped"]["call"]["tool"] == "tools web-fetch"
    assert _Page.hits == 2  # `once`, and the first fetch of `twice`: its second was never sent


async def test_saved_scripts_nest_up_to_four_deep() -> None:
    async with _open([]) as host:
        session = host.session()
        body = "d=$(jq .d); echo depth=$d; tools scripts deeper d=$((d+1))"
        await session.run(f"echo '{body}' | tools scripts save deeper")
        result = await session.run("tools scripts deeper d=1")
    assert result.stdout.split() == ["depth=1", "depth=2", "depth=3", "depth=4"]
    assert "4 deep" in result.stderr


async def test_a_stop_inside_a_saved_script_stops_the_caller_too() -> None:
    calls: list[Any] = []
    async with _open(calls) as host:
        session = host.session()
        body = "tools github create-issue title=x; b=fix; tools github delete-branch branch=$b"
        await session.run(f"echo '{body}' | tools scripts save cleanup")
        result = await session.run("tools scripts cleanup; echo caller-went-on")
    assert "caller-went-on" not in result.stdout
    assert result.tools["stopped"]["reason"] == "needs_approval"
    assert [d["tool"] for d in result.tools["done"]] == ["tools github create-issue"]
    assert calls == [("create-issue", {"title": "x"})]


async def test_saved_scripts_share_the_callers_call_budget() -> None:
    calls: list[Any] = []
    config = Config.model_validate({"tools_in_shell": {"manage_scripts": True, "call_limit": 4}})
    async with _open(calls, config) as host:
        session = host.session()
        body = "for i in 1 2 3; do tools github list-pulls repo=a/b >/dev/null; done"
        await session.run(f"echo '{body}' | tools scripts save three")
        result = await session.run("tools scripts three; tools scripts three")
    assert result.tools["stopped"]["reason"] == "call_limit"
    assert len(calls) == 4


async def test_a_script_that_does_not_parse_is_not_saved() -> None:
    async with _open([]) as host:
        session = host.session()
        result = await session.run("printf 'echo ok\\nif then\\n' | tools scripts save broken")
        listed = await session.run("tools scripts")
    err = _last_error(result.stderr)
    assert err["code"] == "invalid_input"
    assert err["message"] == (
        "the script does not parse (parse error at line 2, column 4: syntax error near unexpected token `then'); "
        "fix it, nothing was saved"
    )
    assert "broken" not in listed.stdout


async def test_the_scripts_help_says_a_saved_script_has_no_network_of_its_own_but_calls_web_fetch() -> None:
    async with _open([]) as host:
        result = await host.run("tools scripts --help")
    assert "no network of its own (curl, wget and http refuse)" in result.stdout
    assert "web-fetch\nincluded, under the caller's tools, approvals and call budget" in result.stdout
