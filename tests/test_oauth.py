"""OAuth against a local authorization server: login, calls, expiry and refresh, logout, machines, step-up."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from cryptography.hazmat.primitives import serialization  # `mcp` needs pyjwt[crypto]
from cryptography.hazmat.primitives.asymmetric import ec
from mcp.shared.auth import OAuthClientInformationFull
from pydantic import AnyUrl

from _net_support import free_port
from _oauth_server import MACHINE_ID, MACHINE_SECRET, WRITE_SCOPE, serve_oauth
from toolshell import Host
from toolshell.config import Config, load_text
from toolshell.config.models import McpSection, OAuthConfig, ServerConfig
from toolshell.connections.base import CallOptions, ConnState
from toolshell.connections.client_conn import ClientConnection
from toolshell.connections.factory import make_connection
from toolshell.connections.oauth import AuthSetup, oauth_settings
from toolshell.connections.oauth_admin import login, logout, status
from toolshell.connections.oauth_login import LoginUI
from toolshell.connections.oauth_tokens import TokenFile
from toolshell.errors import ConfigError, ToolshellError

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
        "problem": None,
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


@pytest.mark.anyio
async def test_a_second_login_reuses_the_registration_and_its_port(tmp_path: Path) -> None:
    browser = Browser()
    async with serve_oauth() as running:
        server = secure(running.url)
        await logged_in(server, tmp_path, browser)
        await logged_in(server, tmp_path, browser)
    assert len(running.provider.clients) == 1
    first, second = (a.redirect_uri for a in running.provider.authorizations)
    assert first == second and str(first).startswith("http://127.0.0.1:")


@pytest.mark.anyio
async def test_a_pre_registered_client_logs_in_with_its_fixed_redirect_port(tmp_path: Path, monkeypatch: Any) -> None:
    port = free_port()
    monkeypatch.setenv("DESK_SECRET", "desk-secret-value")
    async with serve_oauth() as running:
        running.provider.clients["desk"] = OAuthClientInformationFull(
            client_id="desk",
            client_secret="desk-secret-value",
            redirect_uris=[AnyUrl(f"http://127.0.0.1:{port}/callback")],
            token_endpoint_auth_method="client_secret_basic",  # RFC 8414's default, what we send unless told
            scope="mcp",
        )
        server = secure(
            running.url, client_id="desk", client_secret_env="DESK_SECRET", redirect_port=port, issuer=running.base
        )
        await logged_in(server, tmp_path, Browser())
        conn = make_connection(server, auth=AuthSetup(tmp_path))
        try:
            answer = json.loads(await call(conn))
        finally:
            await conn.close()
    assert answer == {"client": "desk", "scopes": ["mcp"]}
    assert list(running.provider.clients) == ["desk"]  # nothing registered dynamically
    assert "desk-secret-value" not in (tmp_path / "secure.json").read_text()


@pytest.mark.anyio
async def test_a_refused_login_is_connection_required_with_the_servers_reason(tmp_path: Path) -> None:
    async with serve_oauth() as running:
        running.provider.deny = True
        server = secure(running.url)
        with pytest.raises(ToolshellError) as caught:
            await logged_in(server, tmp_path, Browser())
    assert caught.value.code == "connection_required"
    assert caught.value.message == (
        "the login to server 'secure' failed while starting: the authorization server refused the login: "
        "access_denied: the person said no; run `toolshell auth login secure` to try again"
    )


@pytest.mark.anyio
async def test_the_refresh_lock_excludes_another_process(tmp_path: Path) -> None:
    file = TokenFile(tmp_path, "secure", "http://x/mcp")
    probe = (
        "import fcntl, os, sys\n"
        f"fd = os.open({str(tmp_path / 'secure.lock')!r}, os.O_RDWR)\n"
        "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept BlockingIOError:\n    sys.exit(3)\n"
    )
    async with file.refresh_lock():
        held = await anyio.run_process([sys.executable, "-c", probe], check=False)
    free = await anyio.run_process([sys.executable, "-c", probe], check=False)
    assert (held.returncode, free.returncode) == (3, 0)


@pytest.mark.parametrize(
    ("oauth", "problem"),
    [
        (
            'oauth = { grant = "client_credentials", client_id = "c" }',
            (
                "mcp.servers[a].oauth",
                'grant = "client_credentials" needs client_id and client_secret_env (or private_key_env)',
            ),
        ),
        (
            'oauth = { client_id = "c", issuer = "auth.example.com" }',
            (
                "mcp.servers[a].oauth.issuer",
                "issuer 'auth.example.com' must be the authorization server's issuer URL, e.g. https://auth.example.com",
            ),
        ),
        (
            'oauth = { client_secret_env = "sk-live-123 abc" }',
            (
                "mcp.servers[a].oauth.client_secret_env",
                'client_secret_env takes the name of an environment variable, e.g. "GITHUB_SECRET"',
            ),
        ),
        (
            'oauth = { client_metadata_url = "http://x.example/client.json" }',
            (
                "mcp.servers[a].oauth.client_metadata_url",
                "client_metadata_url 'http://x.example/client.json' must be an https URL with a path",
            ),
        ),
    ],
)
def test_oauth_settings_that_cannot_work_are_config_errors_that_say_what_to_write(
    oauth: str, problem: tuple[str, str]
) -> None:
    text = f'[[mcp.servers]]\nname = "a"\ntype = "http"\nurl = "http://x/mcp"\n{oauth}\n'
    with pytest.raises(ConfigError) as caught:
        load_text(text)
    assert [(place, message.removeprefix("Value error, ")) for place, message in caught.value.problems] == [problem]
    assert "sk-live" not in str(caught.value.problems)  # a secret pasted in place of a name is not echoed


def test_an_http_server_uses_oauth_unless_it_has_an_authorization_header_or_opts_out() -> None:
    plain = ServerConfig(name="a", type="http", url="http://x/mcp")
    static = plain.model_copy(update={"headers": {"authorization": "Bearer t"}})
    off = plain.model_copy(update={"oauth": OAuthConfig(enabled=False)})
    assert oauth_settings(plain) == OAuthConfig()
    assert (oauth_settings(static), oauth_settings(off)) == (None, None)


@pytest.mark.anyio
async def test_a_host_with_its_own_state_dir_finds_the_tokens_logged_in_there(tmp_path: Path) -> None:
    state = tmp_path / "elsewhere"
    async with serve_oauth() as running:
        server = secure(running.url)
        await login([server], "secure", AuthSetup(state / "oauth", ui=Browser().ui()))
        async with Host.open(Config(mcp=McpSection(servers=[server])), state_dir=state) as host:
            called = await host.run("tools secure whoami")
    assert called.exit_code == 0, called.stderr


@pytest.mark.anyio
async def test_a_client_id_metadata_document_is_used_instead_of_registering(tmp_path: Path) -> None:
    document_url = "https://toolshell.example/oauth/client.json"
    port = free_port()
    async with serve_oauth() as running:
        running.provider.metadata_documents[document_url] = OAuthClientInformationFull(
            client_id=document_url,
            redirect_uris=[AnyUrl(f"http://127.0.0.1:{port}/callback")],
            token_endpoint_auth_method="none",
            scope="mcp",
        )
        server = secure(running.url, client_metadata_url=document_url, redirect_port=port)
        await logged_in(server, tmp_path, Browser())
        conn = make_connection(server, auth=AuthSetup(tmp_path))
        try:
            answer = json.loads(await call(conn))
        finally:
            await conn.close()
    assert answer == {"client": document_url, "scopes": ["mcp"]}
    assert running.provider.clients == {}  # nothing was registered
    assert status([server], AuthSetup(tmp_path))[0]["client_source"] == "metadata_url"


@pytest.mark.anyio
async def test_client_credentials_with_a_signed_assertion_private_key_jwt(tmp_path: Path, monkeypatch: Any) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    monkeypatch.setenv("ROBOT_KEY", private)
    async with serve_oauth() as running:
        running.provider.signing_keys["signer"] = public
        server = secure(
            running.url, grant="client_credentials", client_id="signer", token_endpoint_auth_method="private_key_jwt",
            private_key_env="ROBOT_KEY", signing_algorithm="ES256", issuer=f"{running.base}/",
        )  # fmt: skip
        conn = make_connection(server, auth=AuthSetup(tmp_path))
        try:
            answer = json.loads(await call(conn))
        finally:
            await conn.close()
    assert answer == {"client": "signer", "scopes": ["mcp"]}
    assert "PRIVATE KEY" not in (tmp_path / "secure.json").read_text()
