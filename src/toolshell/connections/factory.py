"""Build the connection for one configured server."""

from __future__ import annotations

from toolshell.config import ServerConfig, state_dir
from toolshell.config.models import Config
from toolshell.connections.backoff import Clock
from toolshell.connections.client_conn import ClientConnection
from toolshell.connections.oauth import AuthSetup
from toolshell.connections.targets import BuiltinFactory, BuiltinTarget, HttpTarget, StdioTarget, Target


def default_auth() -> AuthSetup:
    """Tokens under the default state dir (`$TOOLSHELL_STATE_DIR` or the user data dir)."""
    return AuthSetup(state_dir(Config()) / "oauth")


def make_target(server: ServerConfig, builtin: BuiltinFactory | None = None, auth: AuthSetup | None = None) -> Target:
    """How to open `server`: in-process for `builtin`, a subprocess for `stdio`, a URL for `http`."""
    if server.type == "builtin":
        return BuiltinTarget(server.name, builtin)
    if server.type == "http":
        return HttpTarget(server, auth or default_auth())
    return StdioTarget(server)


def make_connection(
    server: ServerConfig,
    builtin: BuiltinFactory | None = None,
    *,
    clock: Clock | None = None,
    mode: str = "auto",
    auth: AuthSetup | None = None,
) -> ClientConnection:
    """A not-yet-started connection to `server`.

    Args:
        server: The config entry.
        builtin: For `type = "builtin"`: a callable returning the in-process `Server`/`MCPServer`
            (the host resolves built-in names; without one, starting fails with a clear error).
        clock: Measures restart backoff (tests pass a fake one); `time.monotonic` by default.
        mode: The SDK connect mode ("auto", "legacy", or a modern protocol version).
        auth: Where OAuth tokens live and who answers a login (default: the default state dir, no one).
    """
    target = make_target(server, builtin, auth)
    if server.protocol == "2025-11-25" and mode == "auto":
        mode = "legacy"  # the older initialize handshake: servers that ask with `ctx.elicit` need it
    if clock is None:
        return ClientConnection(server, target, mode=mode)
    return ClientConnection(server, target, clock=clock, mode=mode)
