"""`[serve.oauth]`: `toolshell serve --http` as an OAuth resource server of a local authorization
server (`_oauth_server`), which issues ES256 JWT access tokens and answers RFC 7662 introspection.
Two local clients (two machine clients of that issuer) call it; the token's subject is the caller."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from pydantic import ValidationError

from _github_server import make_github
from _net_support import free_port, wait_until_serving
from _oauth_server import MACHINE_ID, MACHINE_SECRET, Running, serve_oauth
from _serve_auth_support import client, toolshell_exe
from toolshell.config.serve import ServeOAuthConfig
from toolshell.frontends.serve import oauth as serve_oauth_module
from toolshell.frontends.serve.oauth import oauth_gate
from toolshell.frontends.serve.server import _serve_http, build_server
from toolshell.host import Host
from toolshell.store.sqlite import Store
from toolshell.timeline.sinks import SqliteSink, query

pytestmark = pytest.mark.anyio
DELETE = "tools github delete-branch branch=main"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Served:
    url: str
    host: Host
    store: Store
    issuer: Running

    async def token(self, client_id: str = MACHINE_ID, secret: str = MACHINE_SECRET) -> str:
        """An access token from the issuer's token endpoint (client-credentials grant)."""
        async with httpx2.AsyncClient() as http:
            response = await http.post(
                f"{self.issuer.base}/token",
                data={"grant_type": "client_credentials", "scope": "mcp"},
                auth=(client_id, secret),
            )
        response.raise_for_status()
        return str(response.json()["access_token"])


@asynccontextmanager
async def served_with_oauth(introspect: bool = False, **settings: Any) -> AsyncIterator[Served]:
    """The authorization server, and toolshell serving `/mcp` as its resource server, in this loop.
    `introspect`: the issuer hands out opaque tokens, which toolshell asks its `/introspect` about;
    `settings`: more `[serve.oauth]` keys."""
    async with serve_oauth() as issuer:
        port = free_port()
        url = f"http://127.0.0.1:{port}/mcp"
        oauth: dict[str, Any] = {}
        if introspect:
            issuer.provider.resource = url  # opaque tokens, issued for toolshell
            oauth = {"introspection_endpoint": f"{issuer.base}/introspect", "client_id": MACHINE_ID}
            oauth["client_secret_env"] = "ROBOT_SECRET"
        else:
            issuer.provider.issue_jwts(url)
        config = ServeOAuthConfig(issuer=issuer.base, audience=url, **oauth, **settings)
        gate = oauth_gate(config, "127.0.0.1", port, {"ROBOT_SECRET": MACHINE_SECRET})
        store = Store()
        host_cm = Host.open(servers={"github": make_github()}, sink=SqliteSink(store))
        async with host_cm as host, anyio.create_task_group() as tg:
            tg.start_soon(_serve_http, build_server(host, []), "127.0.0.1", port, gate)
            await wait_until_serving(url)
            yield Served(url, host, store, issuer)
            tg.cancel_scope.cancel()


async def test_an_issuers_jwt_for_this_audience_is_served_and_its_subject_is_the_caller() -> None:
    async with served_with_oauth() as served:
        token = await served.token()
        async with client(served.url, token, mode="legacy") as robot:  # no elicitation: the call stays pending
            hello = await robot.call_tool("bash", {"script": "echo hi"})
            await robot.call_tool("bash", {"script": DELETE})
        [pending] = served.host.policy.approvals.list_pending()
        rows = query(served.store)
    caller = f"oauth:{served.issuer.base}#{MACHINE_ID}"
    assert token.count(".") == 2, "a JWT access token"
    assert hello.structured_content["stdout"] == "hi\n"
    assert [r["caller"] for r in rows] == [caller, caller]
    assert pending.caller == caller


async def test_a_401_points_to_the_public_protected_resource_metadata_naming_the_issuer() -> None:
    async with served_with_oauth() as served, httpx2.AsyncClient() as http:
        refused = await http.post(served.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=HEADERS)
        metadata_url = served.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
        metadata = await http.get(metadata_url)
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == (
        f'Bearer error="invalid_token", error_description="Authentication required", resource_metadata="{metadata_url}"'
    )
    error = refused.json()["error"]
    assert error["code"] == "connection_required"
    assert f"with a token from {served.issuer.base} for {served.url}" in error["message"]
    assert metadata.status_code == 200
    assert metadata.json()["resource"] == served.url
    assert metadata.json()["authorization_servers"] == [f"{served.issuer.base}/"]


def _hs256_with_the_public_key(served: Served, claims: dict[str, Any]) -> str:
    """The algorithm-confusion forgery: HMAC keyed with the issuer's public JWK."""

    def part(value: Any) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    signing = f"{part({'alg': 'HS256', 'kid': served.issuer.provider.jwt_kid})}.{part(claims)}"
    key = json.dumps(served.issuer.provider.jwks()["keys"][0]).encode()
    signature = base64.urlsafe_b64encode(hmac.new(key, signing.encode(), hashlib.sha256).digest()).rstrip(b"=")
    return f"{signing}.{signature.decode()}"


FORGERIES = {
    "another audience": lambda s, c: s.issuer.provider.sign({**c, "aud": "http://127.0.0.1:1/mcp"}),
    "another issuer": lambda s, c: s.issuer.provider.sign({**c, "iss": "http://127.0.0.1:1/"}),
    "expired": lambda s, c: s.issuer.provider.sign({**c, "exp": int(time.time()) - 3600}),
    "no subject": lambda s, c: s.issuer.provider.sign({k: v for k, v in c.items() if k != "sub"}),
    "someone else's key": lambda s, c: s.issuer.provider.sign(c, key=ec.generate_private_key(ec.SECP256R1())),
    "alg none": lambda s, c: jwt.encode(c, None, algorithm="none", headers={"kid": s.issuer.provider.jwt_kid}),
    "HS256 keyed with the public key": _hs256_with_the_public_key,
    "not a JWT": lambda s, c: "opaque-token-value",
}


@pytest.mark.parametrize("forgery", list(FORGERIES))
async def test_a_token_for_another_audience_issuer_or_key_or_expired_or_unsigned_is_refused(forgery: str) -> None:
    async with served_with_oauth() as served, httpx2.AsyncClient() as http:
        claims = served.issuer.provider.jwt_claims("mallory", ["mcp"])
        token = FORGERIES[forgery](served, claims)
        body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        response = await http.post(served.url, json=body, headers={**HEADERS, "Authorization": f"Bearer {token}"})
        valid = served.issuer.provider.sign(claims)
        control = await http.post(served.url, json=body, headers={**HEADERS, "Authorization": f"Bearer {valid}"})
    assert response.status_code == 401
    assert control.status_code != 401, "the same claims, signed by the issuer, are accepted"


async def test_caller_b_presenting_the_session_id_of_caller_a_is_refused() -> None:
    async with served_with_oauth() as served, httpx2.AsyncClient() as http:
        served.issuer.provider.machines["other-robot"] = "other-secret"
        alice = {**HEADERS, "Authorization": f"Bearer {await served.token()}"}
        bob = {**HEADERS, "Authorization": f"Bearer {await served.token('other-robot', 'other-secret')}"}
        opened = await http.post(served.url, json=_initialize(), headers=alice)
        session = {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await http.post(served.url, json=initialized, headers={**alice, **session})
        write = _bash(2, "echo alices-secret > notes; echo written")
        own = await http.post(served.url, json=write, headers={**alice, **session})
        stolen = await http.post(served.url, json=_bash(3, "cat notes"), headers={**bob, **session})
        deleted = await http.delete(served.url, headers={**bob, **session})
        again = await http.post(served.url, json=_bash(4, "cat notes"), headers={**alice, **session})
    assert opened.status_code == 200
    assert own.status_code == 200 and "written" in own.text
    assert (stolen.status_code, deleted.status_code) == (404, 404)
    assert "alices-secret" not in stolen.text
    assert again.status_code == 200 and "alices-secret" in again.text, "bob could not end alice's session either"


async def test_caller_b_cannot_answer_the_approval_round_of_a_script_caller_a_started() -> None:
    async with served_with_oauth() as served, httpx2.AsyncClient(timeout=30) as http:
        served.issuer.provider.machines["other-robot"] = "other-secret"
        alice = {**HEADERS, **_modern(), "Authorization": f"Bearer {await served.token()}"}
        bob = {**HEADERS, **_modern(), "Authorization": f"Bearer {await served.token('other-robot', 'other-secret')}"}
        asked = (await http.post(served.url, json=_bash(1, DELETE, _META), headers=alice)).json()["result"]
        [key] = asked["inputRequests"]
        answer = {
            "inputResponses": {key: {"action": "accept", "content": {"answer": "always"}}},
            "requestState": asked["requestState"],
        }
        stolen = await http.post(served.url, json=_bash(2, DELETE, _META, **answer), headers=bob)
        own = await http.post(served.url, json=_bash(3, DELETE, _META, **answer), headers=alice)
    assert asked["resultType"] == "input_required"
    assert stolen.json()["error"]["message"] == "Invalid or expired requestState", "bound to alice"
    assert "deleted main" not in stolen.text
    assert own.status_code == 200 and "deleted main" in own.text


_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
}


def _modern() -> dict[str, str]:
    return {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "bash"}


def _initialize() -> dict[str, Any]:
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}


def _bash(request_id: int, script: str, meta: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    params = {"name": "bash", "arguments": {"script": script}, **({"_meta": meta} if meta else {}), **extra}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


async def test_the_issuers_keys_are_fetched_once_and_unknown_key_ids_cost_no_fetch_within_a_minute() -> None:
    async with served_with_oauth() as served, httpx2.AsyncClient() as http:
        provider = served.issuer.provider
        statuses = []
        for _ in range(3):
            token = await served.token()
            statuses.append((await _ping(http, served.url, token)).status_code)
        claims = provider.jwt_claims("mallory", ["mcp"])
        for kid in ("unknown-1", "unknown-2", "unknown-3"):
            forged = provider.sign(claims, key=ec.generate_private_key(ec.SECP256R1()), kid=kid)
            statuses.append((await _ping(http, served.url, forged)).status_code)
    assert statuses == [200, 200, 200, 401, 401, 401]
    assert provider.jwks_fetches == 1, "a flood of forged key ids fetches nothing more"


async def test_a_rotated_signing_key_is_picked_up_by_fetching_the_keys_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serve_oauth_module, "REFETCH_SECONDS", 0.0)  # as if a minute had passed
    async with served_with_oauth() as served, httpx2.AsyncClient() as http:
        provider = served.issuer.provider
        before = await _ping(http, served.url, await served.token())
        provider.jwt_key, provider.jwt_kid = ec.generate_private_key(ec.SECP256R1()), "rotated"
        after = await _ping(http, served.url, await served.token())
    assert (before.status_code, after.status_code) == (200, 200)
    assert provider.jwks_fetches == 2


async def test_while_the_issuers_keys_cannot_be_fetched_tokens_are_refused_and_it_is_asked_again_after_a_pause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with served_with_oauth() as served, httpx2.AsyncClient() as http:
        provider = served.issuer.provider
        provider.jwks_down = True
        token = await served.token()
        while_down = [(await _ping(http, served.url, token)).status_code for _ in range(4)]
        asked_while_down = provider.jwks_fetches
        provider.jwks_down = False
        monkeypatch.setattr(serve_oauth_module, "RETRY_SECONDS", 0.0)  # as if the pause had passed
        back = await _ping(http, served.url, token)
    assert while_down == [401, 401, 401, 401]
    assert asked_while_down == 1, "one failed fetch, then a pause: not one fetch per request"
    assert back.status_code == 200


async def _ping(http: httpx2.AsyncClient, url: str, token: str) -> httpx2.Response:
    """An `initialize` with `token`: 200 once authenticated, 401 otherwise."""
    return await http.post(url, json=_initialize(), headers={**HEADERS, "Authorization": f"Bearer {token}"})


async def test_an_opaque_token_is_checked_at_the_introspection_endpoint_and_refused_once_revoked() -> None:
    async with served_with_oauth(introspect=True, introspection_cache_seconds=0) as served:
        token = await served.token()
        async with client(served.url, token) as robot:
            hello = await robot.call_tool("bash", {"script": "echo hi"})
        asked = served.issuer.provider.introspections
        served.issuer.provider.expire_access_tokens()
        async with httpx2.AsyncClient() as http:
            body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            revoked = await http.post(served.url, json=body, headers={**HEADERS, "Authorization": f"Bearer {token}"})
        rows = query(served.store)
    assert token.startswith("access_"), "an opaque token"
    assert hello.structured_content["stdout"] == "hi\n"
    assert asked >= 1
    assert revoked.status_code == 401
    assert [r["caller"] for r in rows] == [f"oauth:{served.issuer.base}#{MACHINE_ID}"]


def test_shared_secret_algorithms_and_an_introspection_without_a_client_are_config_errors() -> None:
    with pytest.raises(ValidationError, match="algorithms takes some of RS256"):
        ServeOAuthConfig(issuer="https://login.example.com", audience="https://t.example/mcp", algorithms=["HS256"])
    with pytest.raises(ValidationError, match="introspection_endpoint needs client_id and client_secret_env"):
        ServeOAuthConfig(
            issuer="https://login.example.com",
            audience="https://t.example/mcp",
            introspection_endpoint="https://login.example.com/introspect",
        )


def test_serve_with_oauth_introspection_and_its_secret_unset_names_the_variable(tmp_path: Path) -> None:
    config = tmp_path / "toolshell.toml"
    config.write_text(
        '[serve.oauth]\nissuer = "https://login.example.com"\naudience = "http://127.0.0.1:8765/mcp"\n'
        'introspection_endpoint = "https://login.example.com/introspect"\nclient_id = "toolshell"\n'
        'client_secret_env = "NO_SUCH_SECRET"\n'
    )
    argv = [toolshell_exe(), "serve", "--http", "--port", str(free_port()), "--config", str(config)]
    result = subprocess.run(
        [*argv, "--state-dir", str(tmp_path / "s")], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 1
    assert "$NO_SUCH_SECRET, which is not set; export NO_SUCH_SECRET=" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("key", ["issuer", "introspection_endpoint"])
def test_a_plain_http_issuer_or_introspection_url_beyond_loopback_is_refused_at_start_naming_https(
    tmp_path: Path, key: str
) -> None:
    urls = {"issuer": "https://login.example.com", "introspection_endpoint": "https://login.example.com/introspect"}
    urls[key] = urls[key].replace("https://", "http://")
    config = tmp_path / "toolshell.toml"
    config.write_text(
        f'[serve.oauth]\nissuer = "{urls["issuer"]}"\naudience = "http://127.0.0.1:8765/mcp"\n'
        f'introspection_endpoint = "{urls["introspection_endpoint"]}"\nclient_id = "toolshell"\n'
        'client_secret_env = "ROBOT_SECRET"\n'
    )
    argv = [toolshell_exe(), "serve", "--http", "--port", str(free_port()), "--config", str(config)]
    result = subprocess.run(
        [*argv, "--state-dir", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "ROBOT_SECRET": MACHINE_SECRET},
    )
    assert result.returncode == 2, result.stderr
    assert f"serve.oauth.{key}: {urls[key]!r} is plain http to an address that is not loopback" in result.stderr
    assert "use https" in result.stderr and "Traceback" not in result.stderr
    assert ServeOAuthConfig(issuer="http://127.0.0.1:9/", audience="a", introspection_endpoint=None).issuer


async def test_a_jwks_uri_of_plain_http_beyond_loopback_is_never_fetched_and_its_tokens_are_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with served_with_oauth() as served, httpx2.AsyncClient() as http:
        served.issuer.provider.jwks_uri = "http://keys.example.test/jwks"  # keys anyone on the way could swap
        refused = await _ping(http, served.url, await served.token())
    assert refused.status_code == 401
    assert "the jwks_uri http://keys.example.test/jwks is plain http to an address that is not loopback" in caplog.text


async def test_a_jwt_not_typed_at_jwt_is_refused_unless_require_at_jwt_is_off(caplog: pytest.LogCaptureFixture) -> None:
    """An ID token of the same issuer (typ JWT, same key, same audience) is no access token."""
    outcomes = []
    for require in (True, False):
        async with served_with_oauth(require_at_jwt=require) as served, httpx2.AsyncClient() as http:
            provider = served.issuer.provider
            id_token = provider.sign(provider.jwt_claims(MACHINE_ID, ["mcp"]), typ="JWT")
            typed = await served.token()
            outcomes.append(
                (
                    (await _ping(http, served.url, id_token)).status_code,
                    (await _ping(http, served.url, typed)).status_code,
                )
            )
    assert outcomes == [(401, 200), (200, 200)]
    assert "refused a JWT typed 'JWT', not at+jwt" in caplog.text


async def test_an_introspection_answer_is_reused_until_its_exp_and_a_refusal_for_a_few_seconds() -> None:
    async with served_with_oauth(introspect=True) as served, httpx2.AsyncClient() as http:
        provider = served.issuer.provider
        token = await served.token()
        good = [(await _ping(http, served.url, token)).status_code for _ in range(3)]
        asked_for_good = provider.introspections
        bad = [(await _ping(http, served.url, "access_" + "0" * 32)).status_code for _ in range(3)]
        asked_for_bad = provider.introspections - asked_for_good
    assert (good, asked_for_good) == ([200, 200, 200], 1)
    assert (bad, asked_for_bad) == ([401, 401, 401], 1)


async def test_a_refresh_token_the_issuer_calls_active_is_refused_by_its_token_type(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with served_with_oauth(introspect=True) as served, httpx2.AsyncClient() as http:
        issued = served.issuer.provider._tokens(MACHINE_ID, ["mcp"])
        assert issued.refresh_token is not None
        access = await _ping(http, served.url, issued.access_token)
        refresh = await _ping(http, served.url, issued.refresh_token)
    assert (access.status_code, refresh.status_code) == (200, 401)
    assert "its token_type is 'refresh_token', not an access token" in caplog.text
