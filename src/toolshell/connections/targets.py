"""The three kinds of server a connection can open, each as what `mcp.client.Client` takes.

A target makes one `Attempt` per (re)start: the `Client` argument plus whatever that run leaves
behind (a process tree, a stderr pipe). Attempts never share such state, so the teardown of a
crashed run cannot touch the run that replaced it. What outlives attempts (the stderr tail, the
last HTTP status) stays on the target for diagnostics.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol

import anyio
import httpx2
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.server import Server
from mcp.server.mcpserver import MCPServer

from toolshell.config import ServerConfig
from toolshell.connections import stdio
from toolshell.connections.bounded_http import Dropped, bound_client
from toolshell.connections.bounded_stdio import Noise, bounded_stdio_client
from toolshell.connections.http import StatusWatch, http_client
from toolshell.connections.oauth import AuthSetup, ToolshellOAuth, build_auth, oauth_settings
from toolshell.connections.oauth_assertion import AssertionAuth
from toolshell.connections.oauth_guard import guard_client
from toolshell.connections.sdk_spans import lean_spans
from toolshell.errors import ErrorCode, ToolshellError

BuiltinFactory = Callable[[], "Server[Any] | MCPServer"]


class Attempt(Protocol):
    """One run of a server, from spawn to cleanup."""

    def client_arg(self) -> Any:
        """What to give `Client(...)`: a server object or a transport."""

    def opened(self) -> None:
        """The client has connected (the process, if any, is running)."""

    async def background(self) -> None:
        """Work that runs from the spawn on (stderr reader); returns when done."""

    async def watch(self) -> None:
        """Return when the server is known to be gone (its process exited); else never."""

    def abort(self) -> None:
        """Startup ran out of time: end the server now rather than politely."""

    async def cleanup(self) -> None:
        """After the client exited: release what the SDK leaves behind."""


class Target(Protocol):
    kind: str

    def attempt(self) -> Attempt: ...

    def stderr_tail(self) -> list[str]: ...

    def last_words(self) -> str | None: ...

    def http_status(self) -> int | None: ...

    def auth_challenge(self) -> str | None:
        """The `WWW-Authenticate` header of the last 401/403 (http only)."""

    def uses_oauth(self) -> bool: ...

    def clear_refusal(self) -> None:
        """A call went through: forget the last 401/403."""

    def notes(self) -> list[str]: ...


class _PlainAttempt:
    """An attempt with nothing to watch or clean up beyond the client itself."""

    def __init__(self, arg: Callable[[], Any]) -> None:
        self._arg = arg

    def client_arg(self) -> Any:
        return self._arg()

    def opened(self) -> None:
        return None

    async def background(self) -> None:
        return None

    async def watch(self) -> None:
        await anyio.sleep_forever()

    def abort(self) -> None:
        return None

    async def cleanup(self) -> None:
        return None


class _NoHttp:
    """The `Target` answers of a server reached without HTTP: no status, no challenge, no login."""

    def http_status(self) -> int | None:
        return None

    def auth_challenge(self) -> str | None:
        return None

    def uses_oauth(self) -> bool:
        return False

    def clear_refusal(self) -> None:
        return None


class BuiltinTarget(_NoHttp):
    """An in-process `Server` / `MCPServer`, built fresh by the host's factory on every start."""

    kind = "builtin"

    def __init__(self, name: str, factory: BuiltinFactory | None) -> None:
        self._name = name
        self._factory = factory

    def attempt(self) -> Attempt:
        return _PlainAttempt(self._build)

    def _build(self) -> Any:
        if self._factory is None:
            raise ToolshellError(
                ErrorCode.UNAVAILABLE,
                f'no built-in server is named {self._name!r}; use type = "stdio" or "http" for an external one',
            )
        return lean_spans(self._factory())  # in-process: the SDK's no-op span costs as much as the tool

    def stderr_tail(self) -> list[str]:
        return []

    def last_words(self) -> str | None:
        return None

    def notes(self) -> list[str]:
        return []


class HttpTarget:
    """A Streamable HTTP endpoint, with the configured headers and the server's OAuth on every request.

    The OAuth state (tokens in memory, discovered metadata) is made once and outlives attempts.
    """

    kind = "http"

    def __init__(self, server: ServerConfig, auth: AuthSetup) -> None:
        self._server = server
        self._watch = StatusWatch()
        self._setup = auth
        self._auth: ToolshellOAuth | AssertionAuth | None = None
        self._oauth = oauth_settings(server) is not None
        self._dropped = Dropped()

    def attempt(self) -> Attempt:
        self._watch = watch = StatusWatch(self._oauth)
        url, headers, limit = self._server.url or "", dict(self._server.headers), self._server.max_message_bytes
        return _PlainAttempt(lambda: _owned_http(url, self._client(headers, watch, limit), limit))

    def _client(self, headers: dict[str, str], watch: StatusWatch, limit: int) -> httpx2.AsyncClient:
        client = http_client(headers, watch, self._oauth_auth(watch))
        settings = oauth_settings(self._server)
        if settings is not None:
            configured = [u for u in (self._server.url, settings.issuer) if u]
            guard_client(client, self._server.name, configured, settings.allow_private)
        bound_client(client, limit, self._dropped, self._server.max_tools)
        return client

    def _oauth_auth(self, watch: StatusWatch) -> httpx2.Auth | None:
        if self._auth is None and self._oauth:
            self._auth = build_auth(self._server, self._setup)  # raises when its secret is missing
        if self._auth is not None:
            self._auth.on_outcome = watch.on_outcome
        return self._auth

    def auth_challenge(self) -> str | None:
        return self._watch.challenge

    def uses_oauth(self) -> bool:
        return self._oauth

    def clear_refusal(self) -> None:
        self._watch.clear_refusal()

    def stderr_tail(self) -> list[str]:
        return []

    def last_words(self) -> str | None:
        return None

    def http_status(self) -> int | None:
        return self._watch.error_status

    def notes(self) -> list[str]:
        return self._dropped.notes()


@asynccontextmanager
async def _owned_http(url: str, client: httpx2.AsyncClient, limit: int) -> AsyncIterator[Any]:
    """`streamable_http_client` plus closing the httpx client we gave it (it closes only its own).

    Our transport (`bounded_http`) bounds events first; the SDK's own cap, at the same bound,
    would otherwise end a stream at 1 MiB as a closed connection.
    """
    async with client, streamable_http_client(url, http_client=client, max_sse_event_size=limit) as streams:
        yield streams


class StdioTarget(_NoHttp):
    """A subprocess speaking MCP on stdin/stdout; its stderr is kept, its process tree ended."""

    kind = "stdio"

    def __init__(self, server: ServerConfig) -> None:
        self._server = server
        self._lines: deque[str] = deque(maxlen=stdio.STDERR_LINES)
        self._current: _StdioAttempt | None = None
        self._noise = Noise()

    def attempt(self) -> Attempt:
        self._current = _StdioAttempt(self._server, stdio.StderrTail(self._lines), self._noise)
        return self._current

    def stderr_tail(self) -> list[str]:
        if self._current is not None:
            self._current.stderr.drain()
        return list(self._lines)

    def last_words(self) -> str | None:
        tail = self.stderr_tail()
        return tail[-1] if tail else None

    def notes(self) -> list[str]:
        return self._noise.notes()


class _StdioAttempt:
    def __init__(self, server: ServerConfig, stderr: stdio.StderrTail, noise: Noise) -> None:
        self._server = server
        self._noise = noise
        self.stderr = stderr
        self._token = stdio.new_token()
        self._leader: int | None = None

    def client_arg(self) -> Any:
        s = self._server
        params = StdioServerParameters(
            command=s.command or "",
            args=list(s.args),
            env={**s.env, stdio.TOKEN_ENV: self._token},
            cwd=s.cwd,
        )
        return bounded_stdio_client(
            params, self.stderr.open(), max_message_bytes=s.max_message_bytes, noise=self._noise, max_tools=s.max_tools
        )

    def opened(self) -> None:
        self.stderr.release_write_end()
        self._leader = stdio.find_leader(self._token)

    async def background(self) -> None:
        await self.stderr.pump()

    async def watch(self) -> None:
        await stdio.wait_exit(self._leader)

    def abort(self) -> None:
        stdio.kill_now(self._token)

    async def cleanup(self) -> None:
        self.stderr.release_write_end()
        await stdio.end_process_tree(self._leader, self._token)
        self.stderr.close()
