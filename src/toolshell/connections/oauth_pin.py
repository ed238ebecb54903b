"""`issuer` in `[mcp.servers.oauth]` pins a login to one authorization server.

The remote server names the authorization server its login goes to. With `issuer` set, the
flow's registration and token requests go only to that issuer: its metadata must name it, or,
where none was found, the request must be on the issuer's own origin; a browser is never sent
elsewhere either. A refresh after a restart, when no metadata is held yet (the SDK would post it
to the MCP server's origin), first reads the issuer's own metadata.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
from mcp.client.auth import OAuthFlowError
from mcp.client.auth.oauth2 import OAuthContext
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    create_oauth_metadata_request,
    handle_auth_metadata_response,
    issuers_match,
)


def _origin(url: httpx2.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host.lower(), url.port


class IssuerPin:
    """Mixed into the SDK's provider (it reads the provider's `context`)."""

    context: OAuthContext
    _pinned_issuer: str | None = None
    """The configured `issuer`, if any."""
    _looked_up_issuer = False

    def _select_authorization_server(self, advertised: list[str]) -> str:
        """The advertised server that is the configured issuer, if one is; else the first."""
        want = self._pinned_issuer
        return next((s for s in advertised if want is not None and issuers_match(s, want)), advertised[0])

    def _refresh_needs_metadata(self, refresh_due: bool) -> bool:
        """A refresh is due, the issuer is pinned, and its metadata was not looked up yet."""
        context = self.context
        due = context.can_refresh_token() and (not context.is_token_valid() or refresh_due)
        return due and bool(self._pinned_issuer) and context.oauth_metadata is None and not self._looked_up_issuer

    def _issuer_metadata_requests(self) -> Iterator[httpx2.Request]:
        """The GETs of the pinned issuer's metadata, in the spec's order (once per provider)."""
        self._looked_up_issuer = True
        urls = build_oauth_authorization_server_metadata_discovery_urls(self._pinned_issuer, self.context.server_url)
        return (create_oauth_metadata_request(url) for url in urls)

    async def _take_metadata(self, response: httpx2.Response) -> bool:
        """Keep the pinned issuer's metadata from this answer; whether to stop looking."""
        go_on, metadata = await handle_auth_metadata_response(response)
        if metadata is not None and self._pinned_issuer and issuers_match(str(metadata.issuer), self._pinned_issuer):
            self.context.oauth_metadata = metadata
        return self.context.oauth_metadata is not None or not go_on

    def _check_issuer(self, request: httpx2.Request) -> None:
        """Refuse a POST of the flow (registration, token) that is not for the pinned issuer."""
        want = self._pinned_issuer
        if want is None or request.method != "POST":
            return
        metadata = self.context.oauth_metadata
        if metadata is not None and issuers_match(str(metadata.issuer), want):
            return
        if metadata is None and _origin(request.url) == _origin(httpx2.URL(want)):
            return
        found = f"metadata of issuer {str(metadata.issuer)!r}" if metadata else f"no metadata, {request.url.host}"
        raise OAuthFlowError(
            f"the server sent us to another authorization server ({found}) than the configured issuer {want!r}; "
            "nothing was sent there. If the server moved, correct `issuer` in [mcp.servers.oauth]"
        )
