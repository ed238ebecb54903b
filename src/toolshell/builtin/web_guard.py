"""The SSRF guard of `web_fetch`: which addresses a fetch may reach.

The address rule is `connections.private_address` (OAuth discovery follows it too): a URL's host
is resolved here, every address is checked, and the fetch then connects to the checked address
itself. Non-public addresses are refused unless listed in `[web_fetch] allow_private`.
Refusals raise `Denied`, whose message starts with `denied:`.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx2

from toolshell.connections.private_address import (
    IPAddress,
    Unresolvable,
    non_public_kind,
    normalise,
    refusal,
    resolve,
)

__all__ = ["BadURL", "Denied", "Target", "check", "non_public_kind"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


class Denied(Exception):
    """The fetch is refused by policy. The message starts with `denied:` and says how to allow it."""


class BadURL(Exception):
    """The URL cannot be fetched as written (not a policy refusal)."""


@dataclass(frozen=True)
class Target:
    """A checked URL and the address to connect to for it."""

    url: httpx2.URL
    host: str
    port: int
    address: IPAddress

    @property
    def pinned_url(self) -> httpx2.URL:
        """The URL with its host replaced by the checked address (the `Host` header keeps the name)."""
        return self.url.copy_with(host=str(self.address))

    @property
    def host_header(self) -> str:
        return self.url.netloc.decode("ascii")


async def check(url: str | httpx2.URL, allow_private: list[str]) -> Target:
    """Parse, resolve and check one URL (the first one or a redirect hop).

    Returns:
        The target to connect to: the first resolved address (every one was checked).

    Raises:
        Denied: A scheme other than http(s), or a non-public address that is not allowed.
        BadURL: The URL has no host or the host does not resolve.
    """
    try:
        parsed = url if isinstance(url, httpx2.URL) else httpx2.URL(url)
    except (httpx2.InvalidURL, ValueError, TypeError) as e:
        raise BadURL(f"url {str(url)!r} is not a valid URL: {e}") from None
    if parsed.scheme not in _DEFAULT_PORTS:
        raise Denied(
            f"denied: web_fetch reads only http:// and https:// URLs, not {parsed.scheme or 'scheme-less'} ones ({url})"
        )
    host = parsed.raw_host.decode("ascii").lower()
    if not host:
        raise BadURL(f"url {str(url)!r} has no host; write it like https://example.com/page")
    port = parsed.port or _DEFAULT_PORTS[parsed.scheme]
    try:
        addresses = await resolve(host, port)
    except Unresolvable as e:
        raise BadURL(str(e)) from None
    refused = refusal(host, port, addresses, normalise(allow_private))
    if refused is not None:
        raise Denied(
            f"denied: {refused.named} is a {refused.kind} address, which web_fetch does not reach by default; "
            f'to allow it, add "{refused.entry}" to [web_fetch] allow_private in the config'
        )
    return Target(parsed, host, port, addresses[0])
