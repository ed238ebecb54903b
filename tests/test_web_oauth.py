"""The web page under `serve --http` in `[serve.oauth]` mode (issue 22 item 9): `/ui/api` takes an
access token of the configured issuer, checked by the serve gate's own verifier, and nothing else —
no page token is made, so there is none to leak. The issuer is a real local authorization server
(`_oauth_server`) issuing ES256 JWTs."""

from __future__ import annotations

import anyio
import httpx2
import pytest

from _net_support import free_port, wait_until_serving
from _oauth_server import MACHINE_ID, MACHINE_SECRET, serve_oauth
from toolshell.config import Config
from toolshell.config.serve import ServeConfig, ServeOAuthConfig
from toolshell.frontends.serve.oauth import oauth_gate
from toolshell.frontends.serve.server import _serve_http, build_server
from toolshell.host import Host

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_in_oauth_mode_the_page_api_takes_an_issuers_token_and_no_page_token(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with serve_oauth() as issuer:
        port = free_port()
        url = f"http://127.0.0.1:{port}/mcp"
        issuer.provider.issue_jwts(url)
        oauth = ServeOAuthConfig(issuer=issuer.base, audience=url)
        gate = oauth_gate(oauth, "127.0.0.1", port, {})
        async with (
            Host.open(Config(serve=ServeConfig(oauth=oauth))) as host,
            anyio.create_task_group() as tg,
            httpx2.AsyncClient(timeout=30) as http,
        ):
            tg.start_soon(_serve_http, build_server(host, []), "127.0.0.1", port, gate, None, host)
            await wait_until_serving(url)
            got = await http.post(
                f"{issuer.base}/token",
                data={"grant_type": "client_credentials", "scope": "mcp"},
                auth=(MACHINE_ID, MACHINE_SECRET),
            )
            token = got.json()["access_token"]
            api = f"http://127.0.0.1:{port}/ui/api/approvals"
            with_token = await http.get(api, headers={"Authorization": f"Bearer {token}"})
            in_header = await http.get(api, headers={"X-Toolshell-Token": token})
            without = await http.get(api)
            forged = await http.get(api, headers={"Authorization": f"Bearer {token[:-4]}AAAA"})
            claims = issuer.provider.jwt_claims(MACHINE_ID, ["mcp"], aud="http://127.0.0.1:1/mcp")
            other_audience = issuer.provider.sign(claims)
            wrong = await http.get(api, headers={"Authorization": f"Bearer {other_audience}"})
            page = await http.get(f"http://127.0.0.1:{port}/ui/")
            said = capsys.readouterr().err
            tg.cancel_scope.cancel()
        page_token_made = (host.state_dir / "web-token").exists()
    assert (with_token.status_code, with_token.json()) == (200, [])
    assert in_header.status_code == 200
    assert (without.status_code, forged.status_code, wrong.status_code) == (401, 401, 401)
    assert "access token of the configured issuer" in without.json()["error"]["message"]
    assert page.status_code == 200, "the page itself holds no data and loads without a token"
    assert not page_token_made, "in OAuth mode there is no page token to leak"
    assert "/ui/ (open /ui/#token=<an access token of the issuer>)" in said
