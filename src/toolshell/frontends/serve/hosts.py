"""Which `Host` and `Origin` headers `serve --http` answers (its DNS-rebinding protection).

A page on `evil.example` that resolves to a worker's address makes a browser send
`Host: evil.example`; such a request gets `421`, and one whose `Origin` is another site `403`
(the SDK's `TransportSecurityMiddleware` checks them). Accepted: the loopback names and the
`--host` address, each with the worker's port, and the public names of `[serve] allowed_hosts` /
`--allowed-host`. A name given without a port is accepted with any port, since a proxy may add
its own (`proxy_set_header Host $host:$server_port`). Behind a trusted proxy the check sees the
host the client asked for (`frontends.serve.forwarded`). The probe paths (`/healthz`, `/readyz`)
are outside this check: a kubelet sends `Host: <pod IP>`, and they reveal nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from mcp.server.transport_security import TransportSecuritySettings


def host_checks(bind: str, port: int, allowed: Sequence[str]) -> TransportSecuritySettings:
    """The SDK's Host/Origin settings for a worker bound to `bind:port` that also answers `allowed`."""
    own = f"[{bind}]" if ":" in bind and not bind.startswith("[") else bind
    hosts = [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", f"{own}:{port}"]
    origins = [f"http://127.0.0.1:{port}", f"http://localhost:{port}", f"http://[::1]:{port}", f"http://{own}:{port}"]
    for name in allowed:
        names = [name] if _has_port(name) else [name, f"{name}:*"]
        hosts += names
        origins += [f"{scheme}://{n}" for n in names for scheme in ("https", "http")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=_unique(hosts), allowed_origins=_unique(origins)
    )


def _has_port(name: str) -> bool:
    return name.rsplit("]", 1)[-1].count(":") == 1


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
