"""The request path of `serve --http` does only the work a call needs (issue 31): a call nobody
hears the progress of starts no progress stream, `/mcp` goes past Starlette's router with every
check still made, forwarded headers cost nothing when none came, and the serve token's caller is
made once. Progress still reaches a client that asked for it, over HTTP in both eras."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from _github_server import make_github
from _serve_http_support import http_serving
from toolshell.frontends.serve.app import Front
from toolshell.frontends.serve.auth import StaticTokenVerifier
from toolshell.frontends.serve.forwarded import ForwardedHeaders
from toolshell.frontends.serve.server import build_server
from toolshell.frontends.serve.tasks import progress
from toolshell.host import Host
from toolshell.store.keys import new_key

pytestmark = pytest.mark.anyio
SCRIPT = "echo first; tools github list-pulls repo=acme/api > /dev/null; echo second"


@pytest.fixture
def senders(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the progress senders started (one a call that reports progress)."""
    started: list[int] = []
    send = progress._send

    async def counted(*args: Any) -> None:
        started.append(1)
        await send(*args)

    monkeypatch.setattr(progress, "_send", counted)
    return started


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_call_without_a_progress_listener_starts_no_progress_sender(mode: str, senders: list[int]) -> None:
    async with Host.open(servers={"github": make_github()}) as host:
        async with Client(build_server(host, []), mode=mode) as client:  # type: ignore[arg-type]
            for _ in range(3):
                result = await client.call_tool("bash", {"script": SCRIPT})
                assert result.structured_content["stdout"] == "first\nsecond\n"
    assert senders == [], "no progress token, no callback: no stream and no sending task"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_bash_call_over_http_with_a_progress_token_reports_its_progress(
    mode: str, senders: list[int], tmp_path: Path
) -> None:
    heard: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append(message)

    async with Host.open(servers={"github": make_github()}, state_dir=tmp_path) as host, http_serving(host) as url:
        with anyio.fail_after(60):
            async with Client(url, mode=mode) as client:  # type: ignore[arg-type]
                quiet = await client.call_tool("bash", {"script": SCRIPT})
                assert senders == [], "a call without a token sends no progress"
                result = await client.call_tool("bash", {"script": SCRIPT}, progress_callback=on_progress)
    assert quiet.structured_content["stdout"] == result.structured_content["stdout"] == "first\nsecond\n"
    assert senders == [1]
    messages = " | ".join(m or "" for m in heard)
    assert "tools github list-pulls: completed" in messages and "of output" in messages


async def test_mcp_goes_to_its_app_with_forwarded_headers_of_an_untrusted_peer_dropped() -> None:
    seen: dict[str, Any] = {}

    async def mcp(scope: Any, receive: Any, send: Any) -> None:
        seen["mcp"] = scope

    async def rest(scope: Any, receive: Any, send: Any) -> None:
        seen.setdefault("rest", []).append(scope)

    front = Front(mcp, rest, ForwardedHeaders(rest, ["10.0.0.0/8"]))
    forged = [(b"host", b"127.0.0.1:1"), (b"x-forwarded-for", b"203.0.113.9")]
    base = {"type": "http", "client": ("192.0.2.1", 5), "headers": forged}
    await front({**base, "path": "/mcp"}, None, None)  # type: ignore[arg-type]
    await front({**base, "path": "/mcp/"}, None, None)  # type: ignore[arg-type]
    await front({"type": "lifespan"}, None, None)  # type: ignore[arg-type]
    assert seen["mcp"]["headers"] == [(b"host", b"127.0.0.1:1")] and seen["mcp"]["client"] == ("192.0.2.1", 5)
    assert seen["mcp"]["app"] is rest, "as Starlette would set it"
    assert [s.get("path") for s in seen["rest"]] == ["/mcp/", None], "any other path and the lifespan: the router"
    assert seen["rest"][0]["headers"] == [(b"host", b"127.0.0.1:1")], "forged headers dropped on every path"


async def test_a_scope_without_forwarded_headers_is_passed_on_as_it_is() -> None:
    scope = {"type": "http", "client": ("10.1.2.3", 5), "headers": [(b"host", b"a.example")]}
    assert ForwardedHeaders(None, ["10.0.0.0/8"]).applied(scope) is scope  # type: ignore[arg-type]
    assert ForwardedHeaders(None, []).applied(scope) is scope  # type: ignore[arg-type]


async def test_the_serve_token_gives_one_caller_made_once_and_refuses_any_other_token() -> None:
    verifier = StaticTokenVerifier("s3cret-token-value", [new_key().encode()])
    first, second = await verifier.verify_token("s3cret-token-value"), await verifier.verify_token("s3cret-token-value")
    assert first is second and first is not None and first.client_id == verifier.identity
    assert await verifier.verify_token("s3cret-token-valuf") is None


async def test_a_calls_yielded_run_look_up_and_sweep_never_hold_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every `bash` call asks the store whether its shell has a yielded run, and now and then sweeps
    old runs: both in a worker thread, so a slow store never stalls the worker's other sessions."""
    from toolshell.store.tasks import TaskRows
    from toolshell.store.yields import YieldRows

    monkeypatch.setenv("TOOLSHELL_STATE_KEYS", new_key())
    threads: dict[str, set[int]] = {"get": set(), "sweep": set()}
    real_get, real_sweep = YieldRows.get, TaskRows.sweep

    def get(self: YieldRows, handle: str) -> Any:
        threads["get"].add(threading.get_ident())
        return real_get(self, handle)

    def sweep(self: TaskRows, *args: Any, **kwargs: Any) -> Any:
        threads["sweep"].add(threading.get_ident())
        return real_sweep(self, *args, **kwargs)

    monkeypatch.setattr(YieldRows, "get", get)
    monkeypatch.setattr(TaskRows, "sweep", sweep)
    loop_thread = threading.get_ident()
    async with Host.open(state_dir=tmp_path / "state") as host, Client(build_server(host, [])) as client:
        first = await client.call_tool("bash", {"script": "echo one > f"})
        shell = (first.structured_content or {})["shell"]
        second = await client.call_tool("bash", {"script": "cat f", "shell": shell})
    assert (second.structured_content or {})["stdout"] == "one\n"
    assert threads["get"] and threads["sweep"], "the calls looked their yielded runs up and swept"
    assert loop_thread not in threads["get"] | threads["sweep"], "a store call ran on the event loop's thread"
