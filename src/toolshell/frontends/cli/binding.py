"""The address an HTTP command listens on: loopback unless `--allow-remote`, and checked before
anything starts, so a taken port or an odd `--host` is one clear message, not a traceback."""

from __future__ import annotations

import socket

import click

PORT = click.IntRange(1, 65535)
"""`--port`: what a TCP port can be."""


def listen_address(bind: str, port: int | None, *, allow_remote: bool, what: str) -> str:
    """The `--host` to bind (`[::1]` written as `::1`), after the loopback rule and a trial bind
    (none when `port` is None: nothing will listen, but the rule still holds for what was asked).

    Raises:
        click.UsageError: a non-loopback host without `--allow-remote` (exit 2).
        click.ClickException: the address cannot be bound, e.g. the port is in use (exit 1).
    """
    from toolshell.frontends.serve.server import is_loopback  # lazy: the MCP server stack is heavy

    host = bind[1:-1] if bind.startswith("[") and bind.endswith("]") else bind
    if not is_loopback(host) and not allow_remote:
        raise click.UsageError(
            f"--host {bind} would let other machines {what}; keep the default 127.0.0.1, or pass "
            "--allow-remote to mean it (and put TLS in front: tokens cross the network)"
        )
    if port is not None:
        _try_bind(host, port)
    return host


def _try_bind(host: str, port: int) -> None:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise click.ClickException(f"cannot listen on {host!r}: {e.strerror}; give --host an address") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will
        try:
            sock.bind(address)
        except OSError as e:
            raise click.ClickException(
                f"cannot listen on {host} port {port}: {e.strerror}; choose another --port or stop what uses it"
            ) from None
