"""The SSRF guard of `web_fetch`: which addresses a fetch may reach.

A URL's host is resolved here, every address is checked, and the fetch then connects to the
checked address itself, so a DNS answer that changes between check and connect (rebinding)
cannot slip a private address through. Private, loopback, link-local, unspecified, multicast and
other non-public addresses are refused unless the host, `host:port`, or the address is listed in
`[web_fetch] allow_private`. Refusals raise `Denied`, whose message starts with `denied:`.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

import anyio
import httpx2

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

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


def non_public_kind(ip: IPAddress) -> str | None:
    """Why `ip` is not a public address ("loopback", "private", ...), or None when it is public."""
    candidates: list[IPAddress] = []
    if isinstance(ip, ipaddress.IPv6Address):
        # An IPv6 address that embeds an IPv4 one reaches that IPv4 host: judge (and name) it first.
        candidates += [a for a in (ip.ipv4_mapped, ip.sixtofour) if a is not None]
        if ip.teredo:
            candidates.append(ip.teredo[1])
    candidates.append(ip)
    for addr in candidates:
        for attr, kind in (
            ("is_loopback", "loopback"),
            ("is_link_local", "link-local"),
            ("is_unspecified", "unspecified"),
            ("is_multicast", "multicast"),
            ("is_private", "private"),
        ):
            if getattr(addr, attr):
                return kind
        if not addr.is_global:
            return "non-public"
    return None


def _allow_keys(host: str, port: int, address: IPAddress) -> set[str]:
    ip = str(address)
    ip_port = f"[{ip}]:{port}" if address.version == 6 else f"{ip}:{port}"
    host_port = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return {host, host_port, ip, ip_port}


def _normalise(entries: list[str]) -> set[str]:
    return {e.strip().lower() for e in entries if e.strip()}


async def _resolve(host: str, port: int) -> list[IPAddress]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as e:
        raise BadURL(f"cannot resolve host {host!r}: {e.strerror or e}") from None
    seen: dict[IPAddress, None] = {}
    for info in infos:
        # The scope of a link-local IPv6 answer ("fe80::1%eth0") is not part of the address.
        seen.setdefault(ipaddress.ip_address(str(info[4][0]).split("%")[0]), None)
    if not seen:
        raise BadURL(f"host {host!r} has no address")
    return list(seen)


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
    allowed = _normalise(allow_private)
    addresses = await _resolve(host, port)
    for address in addresses:
        kind = non_public_kind(address)
        if kind and not (_allow_keys(host, port, address) & allowed):
            suggestion = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            named = host if host == str(address) else f"{host} ({address})"
            raise Denied(
                f"denied: {named} is a {kind} address, which web_fetch does not reach by default; "
                f'to allow it, add "{suggestion}" to [web_fetch] allow_private in the config'
            )
    return Target(parsed, host, port, addresses[0])
