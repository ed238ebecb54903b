"""Cross-app access (SEP-990): `grant = "identity_assertion"` against a local authorization server.

The server is the SDK's own (`identity_assertion_enabled`), whose provider checks the ID-JAG as
SEP-990 asks: signature, `typ`, `aud` (its issuer), `client_id` (the authenticated client) and
`resource` (this MCP server). The IdP is the `assertion_command`, a Python one-liner signing that JWT.
"""

from __future__ import annotations

import json
import secrets
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import jwt
import pytest
import uvicorn
from mcp.server.auth.provider import IdentityAssertionParams, TokenError
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import JWT_BEARER_GRANT_TYPE, OAuthClientInformationFull, OAuthToken

from _connections_support import wait_until
from _oauth_server import Provider, protected_server
from toolshell.config import load_text
from toolshell.config.models import OAuthConfig, ServerConfig
from toolshell.connections.base import CallOptions
from toolshell.connections.factory import make_connection
from toolshell.connections.oauth import AuthSetup
from toolshell.errors import ConfigError, ToolshellError

CLIENT_ID = "finance-agent"
CLIENT_SECRET = "finance-agent-secret-value"
IDP_KEY = "idp-signing-key-of-the-tests-0123456789abcdef"
ISSUE_ID_JAG = f"""
import os, time, uuid, jwt
now = int(time.time())
claims = {{"iss": "https://idp.test", "sub": "alice", "client_id": "{CLIENT_ID}", "jti": str(uuid.uuid4()),
          "aud": os.environ["TOOLSHELL_OAUTH_AUDIENCE"], "resource": os.environ["TOOLSHELL_OAUTH_RESOURCE"],
          "iat": now, "exp": now + 300}}
print(jwt.encode(claims, os.environ["IDP_KEY"], algorithm="HS256", headers={{"typ": "oauth-id-jag+jwt"}}))
"""
IDP = [sys.executable, "-c", ISSUE_ID_JAG]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class AssertionProvider(Provider):
    """The test provider, also redeeming ID-JAGs (leg 2); records each one's claims."""

    def __init__(self, base: str) -> None:
        super().__init__(f"{base}/mcp")
        self.base = base
        self.grants: list[dict[str, Any]] = []
        self.clients[CLIENT_ID] = OAuthClientInformationFull(
            client_id=CLIENT_ID,
            client_secret=CLIENT_SECRET,
            redirect_uris=None,
            grant_types=[JWT_BEARER_GRANT_TYPE],
            token_endpoint_auth_method="client_secret_basic",
        )

    async def exchange_identity_assertion(
        self, client: OAuthClientInformationFull, params: IdentityAssertionParams
    ) -> OAuthToken:
        try:
            if jwt.get_unverified_header(params.assertion).get("typ") != "oauth-id-jag+jwt":
                raise jwt.InvalidTokenError("not an ID-JAG")
            claims = jwt.decode(params.assertion, IDP_KEY, algorithms=["HS256"], audience=[self.base, f"{self.base}/"])
        except jwt.InvalidTokenError as e:
            raise TokenError("invalid_grant", str(e)) from None
        if claims["client_id"] != client.client_id or claims["resource"] != self.resource:
            raise TokenError("invalid_grant", "the ID-JAG is for another client or resource")
        self.grants.append(claims)
        access = self.mint(client.client_id or "", ["mcp"])
        return OAuthToken(access_token=access, expires_in=3600, scope="mcp")


@asynccontextmanager
async def serve_assertions() -> AsyncIterator[AssertionProvider]:
    """The authorization server (jwt-bearer enabled) and its MCP server on 127.0.0.1, in this loop."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    provider = AssertionProvider(base)
    mcp: MCPServer = protected_server(base, provider)
    assert mcp.settings.auth is not None
    mcp.settings.auth = AuthSettings(**{**mcp.settings.auth.model_dump(), "identity_assertion_enabled": True})
    server = uvicorn.Server(uvicorn.Config(mcp.streamable_http_app(), log_level="error", lifespan="on"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        await wait_until(lambda: server.started)
        try:
            yield provider
        finally:
            server.should_exit = True
    sock.close()


def agent(base: str, command: list[str] = IDP) -> ServerConfig:
    oauth = OAuthConfig(
        grant="identity_assertion",
        client_id=CLIENT_ID,
        client_secret_env="AGENT_SECRET",
        issuer=f"{base}/",  # exactly as the server's metadata writes it (the SDK's AnyHttpUrl adds the slash)
        assertion_command=command,
    )
    return ServerConfig(name="finance", type="http", url=f"{base}/mcp", oauth=oauth)


@pytest.mark.anyio
async def test_an_id_jag_from_the_assertion_command_is_redeemed_for_a_token_without_a_person(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("AGENT_SECRET", CLIENT_SECRET)
    monkeypatch.setenv("IDP_KEY", IDP_KEY)
    async with serve_assertions() as provider:
        conn = make_connection(agent(provider.base), auth=AuthSetup(tmp_path))
        try:
            first = await conn.call_tool("whoami", {}, CallOptions())
            await conn.call_tool("whoami", {}, CallOptions())
        finally:
            await conn.close()
    assert json.loads(first.content[0].text) == {"client": CLIENT_ID, "scopes": ["mcp"]}  # type: ignore[union-attr]
    [claims] = provider.grants  # one ID-JAG, one token, used by both calls
    assert (claims["aud"], claims["resource"]) == (f"{provider.base}/", f"{provider.base}/mcp")
    stored = (tmp_path / "finance.json").read_text()
    assert CLIENT_SECRET not in stored and "access_" in stored  # the token is kept, the secret never


@pytest.mark.anyio
async def test_an_assertion_command_that_fails_is_connection_required_naming_it(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("AGENT_SECRET", CLIENT_SECRET)
    leak = secrets.token_hex(8)
    failing = [sys.executable, "-c", f"import sys; print('{leak}', file=sys.stderr); sys.exit(3)"]
    async with serve_assertions() as provider:
        conn = make_connection(agent(provider.base, failing), auth=AuthSetup(tmp_path))
        try:
            with pytest.raises(ToolshellError) as caught:
                await conn.call_tool("whoami", {}, CallOptions())
        finally:
            await conn.close()
    assert caught.value.code == "connection_required"
    assert f"assertion_command {sys.executable!r} exited with status 3; run it yourself" in caught.value.message
    assert leak not in caught.value.message  # what the command says stays with it
    assert provider.grants == []


def test_an_identity_assertion_grant_without_its_pieces_is_a_config_error_naming_them() -> None:
    text = (
        '[[mcp.servers]]\nname = "a"\ntype = "http"\nurl = "http://x/mcp"\n'
        'oauth = { grant = "identity_assertion", client_id = "c", client_secret_env = "S" }\n'
    )
    with pytest.raises(ConfigError) as caught:
        load_text(text)
    assert [(place, message.removeprefix("Value error, ")) for place, message in caught.value.problems] == [
        (
            "mcp.servers[a].oauth",
            'grant = "identity_assertion" needs client_id, client_secret_env, issuer and assertion_command',
        )
    ]
