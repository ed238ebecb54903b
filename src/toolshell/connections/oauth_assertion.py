"""Cross-app access (SEP-990): an ID-JAG from the enterprise IdP, redeemed through the SDK's provider.

The SDK's `IdentityAssertionOAuthProvider` does leg 2, the RFC 7523 jwt-bearer grant at the
configured authorization server (metadata from that issuer's own well-known, never from the MCP
server). Leg 1, getting the ID-JAG from the IdP (its login, then an RFC 8693 token exchange), is
deployment-specific and outside the SDK; here it is the configured `assertion_command`, run each
time a token is needed, with the audience and resource the ID-JAG must name in its environment.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncGenerator, Callable
from typing import Literal

import anyio
import httpx2
from mcp.client.auth import OAuthFlowError
from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider

from toolshell.config.oauth import OAuthConfig
from toolshell.connections import auth_params
from toolshell.connections.oauth_guard import Echoes
from toolshell.connections.oauth_tokens import ServerTokens

AUDIENCE_ENV = "TOOLSHELL_OAUTH_AUDIENCE"
"""Tells `assertion_command` the authorization server's issuer: the ID-JAG's `aud`."""
RESOURCE_ENV = "TOOLSHELL_OAUTH_RESOURCE"
"""Tells `assertion_command` the MCP server's resource identifier: the ID-JAG's `resource` claim."""


class AssertionAuth(IdentityAssertionOAuthProvider):
    """The SDK's ID-JAG provider, fed by `assertion_command`, telling the connection how requests end."""

    on_outcome: Callable[[httpx2.Response], None] | None = None
    """Told the response each request ended with (a 401/403 there becomes `connection_required`)."""

    def __init__(self, server: str, url: str, file: ServerTokens, settings: OAuthConfig, secret: str) -> None:
        method: Literal["client_secret_basic", "client_secret_post"] = "client_secret_basic"  # RFC 8414's default
        if settings.token_endpoint_auth_method == "client_secret_post":
            method = "client_secret_post"
        super().__init__(
            server_url=url,
            storage=file,
            client_id=settings.client_id or "",
            client_secret=secret,
            issuer=settings.issuer or "",
            assertion_provider=self._assertion,
            scope=" ".join(settings.scopes) or None,
            token_endpoint_auth_method=method,
        )
        self._server = server
        self._command = list(settings.assertion_command)
        self._timeout = settings.login_timeout_seconds

    async def _assertion(self, audience: str, resource: str) -> str:
        """Run `assertion_command`; its stdout is the ID-JAG. Its output is never shown (it is a credential)."""
        env = {**os.environ, AUDIENCE_ENV: audience, RESOURCE_ENV: resource}
        program = self._command[0]
        try:
            with anyio.fail_after(self._timeout):
                done = await anyio.run_process(self._command, env=env, check=False, stderr=subprocess.DEVNULL)
        except OSError as exc:
            raise OAuthFlowError(f"assertion_command {program!r} could not start ({exc.strerror})") from None
        except TimeoutError:
            raise OAuthFlowError(f"assertion_command {program!r} gave no ID-JAG in {self._timeout:g}s") from None
        assertion = done.stdout.decode(errors="replace").strip()
        if done.returncode != 0 or not assertion:
            why = f"exited with status {done.returncode}" if done.returncode else "printed nothing"
            raise OAuthFlowError(f"assertion_command {program!r} {why}; run it yourself to see why")
        return assertion

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        flow = super()._auth_flow(request)
        response: httpx2.Response | None = None
        echoes = Echoes()
        try:
            outgoing = await flow.__anext__()
            while True:
                echoes.note(outgoing)
                response = yield outgoing
                auth_params.tame(response)
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            if response is not None and self.on_outcome is not None:
                self.on_outcome(response)
        except OAuthFlowError as exc:
            echoes.scrub(exc)  # the token endpoint's error may quote the ID-JAG or the secret
            raise
        finally:
            await flow.aclose()
