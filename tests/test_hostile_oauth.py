"""A hostile remote server's OAuth answers (security issue, items 8, 13 and 14).

The remote server is a plain ASGI app on 127.0.0.1, configured as `http://localhost:PORT/mcp`
(so its own host is `localhost`); whatever it names elsewhere on 127.0.0.1 is another private
host, which toolshell must not reach unless `allow_private` says so. A second app, the victim,
records every request that reaches it. Nothing here leaves the machine: the addresses that are
not loopback (169.254.169.254, 198.51.100.7) are refused before any connection is made.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import anyio
import httpx2
import pytest
from mcp.shared.auth import OAuthToken

from _connections_support import serve_http
from toolshell.config import load_text
from toolshell.config.models import OAuthConfig, ServerConfig
from toolshell.connections.base import CallOptions
from toolshell.connections.factory import make_connection
from toolshell.connections.oauth import AuthSetup
from toolshell.connections.oauth_admin import login
from toolshell.connections.oauth_guard import OAuthGuard
from toolshell.connections.oauth_login import LoginUI
from toolshell.connections.oauth_tokens import TokenFile
from toolshell.errors import ToolshellError
from toolshell.host import Host

pytestmark = pytest.mark.anyio
SECRET = "hostile-test-client-secret-0451"
ID_JAG = "eyJhbGciOiJIUzI1NiJ9.an-id-jag-from-the-idp.c2lnbmF0dXJl"
Answer = tuple[int, dict[str, str], bytes]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class App:
    """An ASGI app answering each path from `routes` (JSON), recording every request it gets."""

    routes: dict[str, Any] = field(default_factory=dict)
    seen: list[tuple[str, str, str]] = field(default_factory=list)
    """(method, path, body) of each request."""
    hosts: list[str] = field(default_factory=list)
    """The `Host` header of each request."""
    base: str = ""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.seen.append((scope["method"], scope["path"], body.decode()))
        self.hosts.append(dict(scope["headers"]).get(b"host", b"").decode())
        route = self.routes.get(scope["path"], (404, {}, b"{}"))
        status, headers, content = route(body) if callable(route) else route
        raw = [(b"content-type", b"application/json"), *((k.encode(), v.encode()) for k, v in headers.items())]
        await send({"type": "http.response.start", "status": status, "headers": raw})
        await send({"type": "http.response.body", "body": content})


@asynccontextmanager
async def running(app: App) -> AsyncIterator[str]:
    """Serve `app`; yields its base as `http://localhost:PORT` (the host the config names)."""
    async with serve_http(app) as url:
        app.base = url.removesuffix("/mcp").replace("127.0.0.1", "localhost")
        yield app.base


def refuse(challenge: str) -> Answer:
    return 401, {"www-authenticate": challenge}, b"{}"


def documents(app: App, **endpoints: str) -> None:
    """Protected-resource and authorization-server metadata on the server's own host."""
    base = app.base
    app.routes["/.well-known/oauth-protected-resource/mcp"] = (
        200,
        {},
        json.dumps({"resource": f"{base}/mcp", "authorization_servers": [f"{base}/"]}).encode(),
    )
    metadata = {
        "issuer": f"{base}/",
        "authorization_endpoint": f"{base}/authorize",
        "token_endpoint": f"{base}/token",
        "response_types_supported": ["code"],
        **endpoints,
    }
    app.routes["/.well-known/oauth-authorization-server"] = (200, {}, json.dumps(metadata).encode())
    app.routes["/mcp"] = refuse(f'Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"')


def server(base: str, **oauth: Any) -> ServerConfig:
    return ServerConfig(name="remote", type="http", url=f"{base}/mcp", oauth=OAuthConfig(**oauth))


def machine(base: str, **more: Any) -> ServerConfig:
    return server(base, grant="client_credentials", client_id="robot", client_secret_env="REMOTE_SECRET", **more)


async def connect_error(config: ServerConfig, tmp_path: Path) -> ToolshellError:
    conn = make_connection(config, auth=AuthSetup(tmp_path))
    try:
        with anyio.fail_after(20), pytest.raises(ToolshellError) as caught:
            await conn.call_tool("whoami", {}, CallOptions())
    finally:
        await conn.close()
    return caught.value


async def no_browser(url: str) -> bool:
    raise AssertionError(f"the login must be refused before a browser opens {url}")


# --- item 14: discovery stays off private addresses ------------------------------------------


async def test_metadata_naming_another_loopback_host_is_refused_and_that_host_gets_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMOTE_SECRET", SECRET)
    hostile, victim = App(), App()
    async with running(hostile) as base, running(victim) as victim_base:
        port = victim_base.rsplit(":", 1)[1]
        hostile.routes["/mcp"] = refuse(f'Bearer resource_metadata="http://127.0.0.1:{port}/admin/metadata"')
        error = await connect_error(machine(base), tmp_path)
    assert error.code == "denied", error.message
    assert error.message == (
        f"denied: server 'remote''s OAuth discovery points to 127.0.0.1, a loopback address, which toolshell "
        f'does not reach by default; if you trust it, add "127.0.0.1:{port}" to allow_private in that '
        "server's [mcp.servers.oauth]"
    )
    assert victim.seen == []


async def test_allow_private_lets_discovery_reach_the_address_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMOTE_SECRET", SECRET)
    hostile, victim = App(), App()
    async with running(hostile) as base, running(victim) as victim_base:
        port = victim_base.rsplit(":", 1)[1]
        hostile.routes["/mcp"] = refuse(f'Bearer resource_metadata="http://127.0.0.1:{port}/metadata"')
        await connect_error(machine(base, allow_private=[f"127.0.0.1:{port}"]), tmp_path)
    assert victim.seen[0][:2] == ("GET", "/metadata")


async def test_an_allowed_name_is_reached_at_the_address_it_was_checked_at_under_its_own_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMOTE_SECRET", SECRET)
    hostile, victim = App(), App()
    async with running(hostile) as base, running(victim) as victim_base:
        own = base.replace("localhost", "127.0.0.1")  # configured by address; discovery names `localhost`
        hostile.routes["/mcp"] = refuse(f'Bearer resource_metadata="{victim_base}/metadata"')
        name = victim_base.removeprefix("http://")
        await connect_error(machine(own, allow_private=[name]), tmp_path)
    assert victim.seen[0][:2] == ("GET", "/metadata")
    assert victim.hosts[0] == name


async def test_the_configured_issuers_host_is_reached_like_the_servers_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMOTE_SECRET", SECRET)
    hostile, issuer = App(), App()
    async with running(hostile) as base, running(issuer) as issuer_base:
        hostile.routes["/mcp"] = refuse("Bearer")
        config = server(
            base,
            grant="identity_assertion",
            client_id="agent",
            client_secret_env="REMOTE_SECRET",
            issuer=issuer_base.replace("localhost", "127.0.0.1"),  # a private host, but one the user named
            assertion_command=[sys.executable, "-c", f"print({ID_JAG!r})"],
        )
        error = await connect_error(config, tmp_path)
    assert error.code != "denied", error.message
    assert issuer.seen[0][:2] == ("GET", "/.well-known/oauth-authorization-server")


async def test_a_registration_endpoint_on_a_private_host_gets_no_json_post(tmp_path: Path) -> None:
    hostile, victim = App(), App()
    async with running(hostile) as base, running(victim) as victim_base:
        port = victim_base.rsplit(":", 1)[1]
        documents(hostile, registration_endpoint=f"http://127.0.0.1:{port}/internal/api")
        with anyio.fail_after(20), pytest.raises(ToolshellError) as caught:
            await login([server(base)], "remote", AuthSetup(tmp_path, ui=LoginUI(open_url=no_browser)))
    assert caught.value.code == "denied"
    assert "points to 127.0.0.1, a loopback address" in caught.value.message
    assert victim.seen == []


async def test_a_token_endpoint_on_the_link_local_metadata_address_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMOTE_SECRET", SECRET)
    hostile = App()
    async with running(hostile) as base:
        documents(hostile, token_endpoint="http://169.254.169.254/latest/meta-data/iam")
        error = await connect_error(machine(base), tmp_path)
    assert error.code == "denied"
    assert "points to 169.254.169.254, a link-local address" in error.message
    assert [path for _, path, _ in hostile.seen if path == "/token"] == []


# --- item 13: the client secret -------------------------------------------------------------


async def test_a_client_secret_is_never_sent_over_plain_http_to_an_address_that_is_not_loopback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMOTE_SECRET", SECRET)
    hostile = App()
    async with running(hostile) as base:
        documents(hostile, token_endpoint="http://198.51.100.7:9/token")
        error = await connect_error(machine(base, allow_private=["198.51.100.7"]), tmp_path)
    assert error.code == "denied"
    assert error.message == (
        "denied: server 'remote''s OAuth would send a client credential over plain http to 198.51.100.7; "
        "credentials go only over https (or to a loopback address): use an https issuer and server url"
    )


async def test_a_pinned_issuer_refuses_metadata_from_another_and_sends_it_nothing(tmp_path: Path) -> None:
    hostile = App()
    async with running(hostile) as base:
        documents(hostile, registration_endpoint=f"{base}/register")
        config = server(base, client_id="desk", issuer="https://auth.example.com")
        with anyio.fail_after(20), pytest.raises(ToolshellError) as caught:
            await login([config], "remote", AuthSetup(tmp_path, ui=LoginUI(open_url=no_browser)))
    assert caught.value.code == "connection_required"
    assert (
        f"the server sent us to another authorization server (metadata of issuer '{base}/') than the "
        "configured issuer 'https://auth.example.com'; nothing was sent there" in caught.value.message
    )
    assert [method for method, _, _ in hostile.seen if method == "POST"] == ["POST"]  # the MCP request only


async def test_a_pinned_issuer_keeps_the_machine_secret_from_another_authorization_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMOTE_SECRET", SECRET)
    hostile = App()
    async with running(hostile) as base:
        documents(hostile)
        error = await connect_error(machine(base, issuer="https://auth.example.com"), tmp_path)
    assert error.code == "connection_required"
    assert "issuer mismatch" in error.message and "https://auth.example.com" in error.message
    assert not any(SECRET in body or path == "/token" for _, path, body in hostile.seen)


async def test_a_refresh_with_a_pinned_issuer_goes_to_that_issuers_token_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMOTE_SECRET", SECRET)
    mcp, auth = App(), App()
    async with running(mcp) as base, running(auth) as auth_base:
        issuer = auth_base.replace("localhost", "127.0.0.1")
        metadata = {
            "issuer": f"{issuer}/",
            "authorization_endpoint": f"{issuer}/authorize",
            "token_endpoint": f"{issuer}/token",
            "response_types_supported": ["code"],
        }
        auth.routes["/.well-known/oauth-authorization-server"] = (200, {}, json.dumps(metadata).encode())
        fresh = {"access_token": "new", "token_type": "Bearer", "expires_in": 3600, "refresh_token": "r2"}
        auth.routes["/token"] = (200, {}, json.dumps(fresh).encode())
        mcp.routes["/mcp"] = refuse("Bearer")
        config = server(base, client_id="desk", client_secret_env="REMOTE_SECRET", issuer=issuer)
        file = TokenFile(tmp_path, "remote", config.url or "")
        await file.set_tokens(OAuthToken(access_token="old", expires_in=1, refresh_token="r1"))  # due now
        await connect_error(config, tmp_path)
    posts = [parse_qs(body) for method, path, body in auth.seen if (method, path) == ("POST", "/token")]
    # r1 before the call; the server's 401 on the new token is answered by one more refresh (r2)
    assert [(p["grant_type"], p["refresh_token"]) for p in posts] == [
        (["refresh_token"], ["r1"]),
        (["refresh_token"], ["r2"]),
    ]
    assert not [path for _, path, _ in mcp.seen if path == "/token"]


def echo_form(body: bytes) -> Answer:
    """A token endpoint that quotes the request back in its error."""
    form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
    return 400, {}, json.dumps({"error": "invalid_client", "error_description": f"bad request {form}"}).encode()


async def test_a_token_endpoint_echoing_the_secret_shows_it_nowhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("REMOTE_SECRET", SECRET)
    hostile = App()
    async with running(hostile) as base:
        documents(hostile)
        hostile.routes["/token"] = echo_form
        text = (
            f'[[mcp.servers]]\nname = "remote"\ntype = "http"\nurl = "{base}/mcp"\n'
            '[mcp.servers.oauth]\ngrant = "client_credentials"\nclient_id = "robot"\n'
            'client_secret_env = "REMOTE_SECRET"\ntoken_endpoint_auth_method = "client_secret_post"\n'
        )
        async with Host.open(load_text(text), state_dir=tmp_path / "state") as host:
            with anyio.fail_after(20):
                result = await host.run("tools remote whoami")
            statuses = json.dumps([s.to_json() for s in host.statuses()])
    assert any(SECRET in body for _, path, body in hostile.seen if path == "/token")  # it was sent, and echoed
    assert "bad request" in result.stderr and "***" in result.stderr
    assert SECRET not in result.stderr + result.stdout + statuses + caplog.text


async def test_an_echoed_id_jag_is_masked_in_the_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMOTE_SECRET", SECRET)
    hostile = App()
    async with running(hostile) as base:
        documents(hostile)
        hostile.routes["/token"] = echo_form
        config = server(
            base,
            grant="identity_assertion",
            client_id="agent",
            client_secret_env="REMOTE_SECRET",
            issuer=f"{base}/",
            assertion_command=[sys.executable, "-c", f"print({ID_JAG!r})"],
        )
        error = await connect_error(config, tmp_path)
    assert any(ID_JAG in body for _, path, body in hostile.seen if path == "/token")
    assert "bad request" in error.message and "'assertion': '***'" in error.message
    assert ID_JAG not in error.message


# --- item 8: a hostile WWW-Authenticate -----------------------------------------------------


async def test_a_huge_www_authenticate_is_read_to_8_kib_and_said_so(tmp_path: Path) -> None:
    hostile = App()
    async with running(hostile) as base:
        hostile.routes["/mcp"] = refuse('Bearer error="invalid_token", error_description="' + "a" * 90_000)
        config = ServerConfig(name="remote", type="http", url=f"{base}/mcp", headers={"Authorization": "Bearer x"})
        error = await connect_error(config, tmp_path)
    assert error.code == "connection_required"
    assert "WWW-Authenticate past 8 KiB ignored" in error.message


async def test_a_parameter_value_cannot_pose_as_the_scope_the_sdk_reads(tmp_path: Path) -> None:
    hostile = App()
    opened: list[str] = []

    async def browser(url: str) -> bool:
        opened.append(url)
        return False  # the person closes the tab; the login then times out

    async with running(hostile) as base:
        documents(hostile, registration_endpoint=f"{base}/register")
        hostile.routes["/register"] = lambda body: (
            201,
            {},
            json.dumps({**json.loads(body), "client_id": "c"}).encode(),
        )
        hostile.routes["/mcp"] = refuse(
            'Bearer error_description="try scope=admin:all", scope="files:read", '
            f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"'
        )
        ui = LoginUI(open_url=browser, notify=lambda _: None, timeout_seconds=1)
        with anyio.fail_after(20), pytest.raises(ToolshellError):
            await login([server(base)], "remote", AuthSetup(tmp_path, ui=ui))
    assert len(opened) == 1
    assert parse_qs(opened[0].split("?", 1)[1])["scope"] == ["files:read"]


async def test_a_checked_name_is_connected_to_at_the_checked_address_so_a_rebinding_cannot_change_it() -> None:
    sent: list[httpx2.Request] = []

    def inner(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        return httpx2.Response(404)

    guard = OAuthGuard(httpx2.MockTransport(inner), "remote", ["https://mcp.example/mcp"], ["localhost:8443"])
    await guard.handle_async_request(httpx2.Request("GET", "https://localhost:8443/.well-known/x"))
    assert sent[0].url.host in ("127.0.0.1", "::1")  # the address checked, not the name again
    assert (sent[0].url.port, sent[0].url.path) == (8443, "/.well-known/x")
    assert sent[0].headers["Host"] == "localhost:8443"
    assert sent[0].extensions["sni_hostname"] == "localhost"
