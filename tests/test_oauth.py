"""OAuth against a local authorization server: login, calls, expiry and refresh, logout, machines, step-up."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from _oauth_server import MACHINE_ID, MACHINE_SECRET, WRITE_SCOPE, serve_oauth
from toolshell.config.models import OAuthConfig, ServerConfig
from toolshell.connections.base import CallOptions, ConnState
from toolshell.connections.client_conn import ClientConnection
from toolshell.connections.factory import make_connection
from toolshell.connections.oauth import AuthSetup
from toolshell.connections.oauth_admin import login, logout, status
from toolshell.connections.oauth_login import LoginUI
from toolshell.connections.oauth_tokens import TokenFile
from toolshell.errors import ToolshellError

ANY = CallOptions()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Browser:
    """The person's browser, headless: GET the authorization URL and follow the redirects home."""

    def __init__(self) -> None:
        self.opened: list[str] = []
        self.told: list[str] = []

    async def open(self, url: str) -> bool:
        self.opened.append(url)
        async with httpx2.AsyncClient(follow_redirects=True) as http:
            page = await http.get(url)
        assert page.status_code == 200, page.text
        return True

    def ui(self) -> LoginUI:
        return LoginUI(open_url=self.open, notify=self.told.append, timeout_seconds=10)


def secure(url: str, **oauth: Any) -> ServerConfig:
    return ServerConfig(name="secure", type="http", url=url, oauth=OAuthConfig(**oauth) if oauth else None)


async def call(conn: ClientConnection, tool: str = "whoami", **args: Any) -> str:
    result = await conn.call_tool(tool, args, ANY)
    assert not result.is_error, result
    text: str = result.content[0].text  # type: ignore[union-attr]
    return text


async def logged_in(server: ServerConfig, tmp_path: Path, browser: Browser) -> None:
    await login([server], server.name, AuthSetup(tmp_path, ui=browser.ui()))


@pytest.mark.anyio
async def test_a_login_through_the_browser_stores_tokens_a_call_then_uses(tmp_path: Path) -> None:
    browser = Browser()
    async with serve_oauth() as running:
        server = secure(running.url)
        await logged_in(server, tmp_path, browser)
        conn = make_connection(server, auth=AuthSetup(tmp_path))
        try:
            answer = json.loads(await call(conn))
        finally:
            await conn.close()
    client_id = next(iter(running.provider.clients))
    assert answer == {"client": client_id, "scopes": ["mcp"]}
    assert len(browser.opened) == 1 and browser.opened[0].startswith(f"{running.base}/authorize?")
    assert "code_challenge_method=S256" in browser.opened[0]
    assert "To log in to server 'secure', open this URL in a browser:" in browser.told[0]
    assert _mode(tmp_path / "secure.json") == 0o600
    assert _mode(tmp_path) == 0o700
    assert status([server], AuthSetup(tmp_path))[0] | {"expires_in_seconds": None} == {
        "server": "secure",
        "grant": "authorization_code",
        "logged_in": True,
        "issuer": f"{running.base}/",
        "scope": "mcp",
        "expires_in_seconds": None,
        "refreshable": True,
        "client_id": client_id,
        "client_source": "dynamic",
    }


@pytest.mark.anyio
async def test_a_call_without_a_login_is_connection_required_naming_the_login_command(tmp_path: Path) -> None:
    async with serve_oauth() as running:
        conn = make_connection(secure(running.url), auth=AuthSetup(tmp_path))
        try:
            with pytest.raises(ToolshellError) as caught:
                await conn.call_tool("whoami", {}, ANY)
            state = conn.status()
        finally:
            await conn.close()
    assert caught.value.code == "connection_required", caught.value.message
    assert caught.value.message == (
        "server 'secure' refused us (HTTP 401: invalid_token: \"Authentication required\") while starting; "
        "it needs a login: run `toolshell auth login secure`"
    )
    assert (state.state, state.auth_reason) == (ConnState.NEEDS_AUTH, 'invalid_token: "Authentication required"')
    assert running.provider.authorizations == []  # nobody was sent to a browser


@pytest.mark.anyio
async def test_an_expired_token_is_refreshed_before_the_call(tmp_path: Path) -> None:
    browser = Browser()
    async with serve_oauth() as running:
        server = secure(running.url)
        await logged_in(server, tmp_path, browser)
        file = TokenFile(tmp_path, "secure", running.url)
        file.write(file.read().model_copy(update={"expires_at": 1.0}))  # time passed: the token expired
        conn = make_connection(server, auth=AuthSetup(tmp_path))
        try:
            await call(conn)
        finally:
            await conn.close()
    assert (running.provider.refreshes, len(browser.opened)) == (1, 1)
    assert file.read().expires_at is not None and file.read().expires_at > 1.0


@pytest.mark.anyio
async def test_a_token_the_server_no_longer_accepts_is_refreshed_once_and_the_call_goes_through(
    tmp_path: Path,
) -> None:
    async with serve_oauth() as running:
        server = secure(running.url)
        await logged_in(server, tmp_path, Browser())
        conn = make_connection(server, auth=AuthSetup(tmp_path))
        try:
            await call(conn)
            running.provider.expire_access_tokens()
            await call(conn)
        finally:
            await conn.close()
    assert running.provider.refreshes == 1


@pytest.mark.anyio
async def test_two_concurrent_calls_redeem_the_refresh_token_once(tmp_path: Path) -> None:
    async with serve_oauth() as running:
        server = secure(running.url)
        await logged_in(server, tmp_path, Browser())
        file = TokenFile(tmp_path, "secure", running.url)
        file.write(file.read().model_copy(update={"expires_at": 1.0}))
        # Two connections, as two processes would have: each its own memory, one token file.
        first, second = (make_connection(server, auth=AuthSetup(tmp_path)) for _ in range(2))
        answers: list[str] = []
        try:
            async with anyio.create_task_group() as tg:
                for conn in (first, second, first):
                    tg.start_soon(lambda c: _append(answers, call(c)), conn)
        finally:
            await first.close()
            await second.close()
    assert len(answers) == 3
    assert (running.provider.refreshes, running.provider.refused_refreshes) == (1, 0)


async def _append(out: list[str], value: Any) -> None:
    out.append(await value)


@pytest.mark.anyio
async def test_after_logout_a_call_is_connection_required(tmp_path: Path) -> None:
    async with serve_oauth() as running:
        server = secure(running.url)
        await logged_in(server, tmp_path, Browser())
        conn = make_connection(server, auth=AuthSetup(tmp_path))
        try:
            await call(conn)
            assert logout([server], "secure", AuthSetup(tmp_path)) is True
            running.provider.expire_access_tokens()  # a real logout would also revoke at the server
            with pytest.raises(ToolshellError) as caught:
                await call(conn)
        finally:
            await conn.close()
    assert caught.value.code == "connection_required", caught.value.message
    assert "run `toolshell auth login secure`" in caught.value.message
    assert not (tmp_path / "secure.json").exists()
    assert running.provider.refreshes == 0  # the forgotten refresh token was not used


@pytest.mark.anyio
async def test_client_credentials_fetch_a_token_without_a_person(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("ROBOT_SECRET", MACHINE_SECRET)
    async with serve_oauth() as running:
        server = secure(
            running.url, grant="client_credentials", client_id=MACHINE_ID, client_secret_env="ROBOT_SECRET",
            issuer=running.base,
        )  # fmt: skip
        conn = make_connection(server, auth=AuthSetup(tmp_path))
        try:
            answer = json.loads(await call(conn))
        finally:
            await conn.close()
    assert answer == {"client": MACHINE_ID, "scopes": ["mcp"]}
    assert running.provider.machine_grants == 1
    assert MACHINE_SECRET not in (tmp_path / "secure.json").read_text()


@pytest.mark.anyio
async def test_a_missing_client_secret_variable_is_named(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.delenv("ROBOT_SECRET", raising=False)
    server = secure(
        "http://127.0.0.1:9/mcp", grant="client_credentials", client_id=MACHINE_ID, client_secret_env="ROBOT_SECRET"
    )
    conn = make_connection(server, auth=AuthSetup(tmp_path))
    try:
        with pytest.raises(ToolshellError) as caught:
            await conn.start()
    finally:
        await conn.close()
    assert caught.value.to_json()["error"] == {
        "code": "connection_required",
        "message": "server 'secure' takes its OAuth client secret from $ROBOT_SECRET, which is not set; "
        "set it and try again",
        "retryable": False,
    }


@pytest.mark.anyio
async def test_insufficient_scope_is_connection_required_then_a_login_steps_up(tmp_path: Path) -> None:
    browser = Browser()
    async with serve_oauth() as running:
        server = secure(running.url)
        await logged_in(server, tmp_path, browser)
        conn = make_connection(server, auth=AuthSetup(tmp_path))
        try:
            with pytest.raises(ToolshellError) as caught:
                await call(conn, "write", text="x")
            # A person is there: the same call steps up (one re-authorization) and goes through.
            stepped = make_connection(server, auth=AuthSetup(tmp_path, ui=browser.ui(), logging_in=True))
            try:
                wrote = await call(stepped, "write", text="x")
            finally:
                await stepped.close()
        finally:
            await conn.close()
    assert caught.value.code == "connection_required", caught.value.message
    assert caught.value.message.endswith(
        f"(HTTP 403: insufficient_scope; scope \"{WRITE_SCOPE}\") while calling 'write'; "
        "it needs more permission: run `toolshell auth login secure` to grant it"
    )
    assert wrote == "wrote x", wrote
    assert running.provider.authorizations[-1].scopes == ["mcp", WRITE_SCOPE]


@pytest.mark.anyio
async def test_a_server_with_login_on_call_opens_the_browser_itself(tmp_path: Path) -> None:
    browser = Browser()
    async with serve_oauth() as running:
        server = secure(running.url, login="on_call", scopes=["mcp"])
        conn = make_connection(server, auth=AuthSetup(tmp_path, ui=browser.ui()))
        try:
            answer = json.loads(await call(conn))
        finally:
            await conn.close()
    assert answer["scopes"] == ["mcp"] and len(browser.opened) == 1


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_token_directory_is_private(tmp_path: Path) -> None:
    directory = tmp_path / "oauth"
    file = TokenFile(directory, "secure", "http://x/mcp")
    file.forget_tokens()
    file.write(file.read())
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE((directory / "secure.json").stat().st_mode) == 0o600
    assert [p.name for p in directory.iterdir() if p.name.endswith(".tmp")] == []
    assert os.access(directory / "secure.json", os.R_OK)
