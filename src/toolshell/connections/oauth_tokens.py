"""OAuth tokens of one server: what the SDK's `TokenStorage` reads and writes, and where it lives.

`ServerTokens` is that storage, whatever holds the record; `TokenFile` keeps it on disk, one
private JSON file per server, and `oauth_store.StoredTokens` in the state store (what a host uses).

`<state dir>/oauth/` is 0700 and every file in it 0600, written whole and renamed into place so a
reader never sees half a record. A record names the server URL and the authorization server
(issuer) it belongs to: a server whose URL changed starts from nothing rather than sending another
resource's token, and the SDK drops a registration whose issuer no longer matches.

A refresh redeems a refresh token once: `refresh_lock()` serializes refreshes across the tasks of a
process (an `anyio.Lock` per file) and across processes (`flock` on a lock file beside it); the
holder re-reads the record first, so a refresh another process made is used instead of repeated.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Literal

import anyio
import anyio.to_thread
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import BaseModel, ValidationError

from toolshell.errors import ErrorCode, ToolshellError

ClientSource = Literal["dynamic", "configured", "metadata_url"]

_LOCKS: dict[Path, anyio.Lock] = {}


class TokenRecord(BaseModel):
    """What is stored for one server."""

    server_url: str
    issuer: str | None = None
    tokens: OAuthToken | None = None
    expires_at: float | None = None
    """When the access token expires (seconds since the epoch), from `expires_in` at receipt."""
    client_info: OAuthClientInformationFull | None = None
    client_source: ClientSource | None = None
    updated_at: float = 0.0


class ServerTokens:
    """The SDK's `TokenStorage` for one server; a subclass says where its record is kept."""

    server: str
    server_url: str
    metadata_url: str | None = None
    """The configured client ID metadata document: a registration with that ID came from it."""

    # --- TokenStorage ---------------------------------------------------------------------------

    async def get_tokens(self) -> OAuthToken | None:
        return self.read().tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        record = self.read()
        expires = time.time() + tokens.expires_in if tokens.expires_in is not None else None
        self.write(record.model_copy(update={"tokens": tokens, "expires_at": expires}))

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.read().client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        record = self.read()
        source: ClientSource = "metadata_url" if client_info.client_id == self.metadata_url else "dynamic"
        update = {"client_info": client_info, "client_source": source, "issuer": client_info.issuer}
        self.write(record.model_copy(update=update))

    # --- the record -----------------------------------------------------------------------------

    def read(self) -> TokenRecord:
        """The stored record, or an empty one."""
        raise NotImplementedError

    def write(self, record: TokenRecord) -> None:
        """Replace the record whole."""
        raise NotImplementedError

    def stamp(self) -> object | None:
        """A value that changes whenever the record is replaced (by any process)."""
        raise NotImplementedError

    def forget(self) -> bool:
        """Delete the record (logout). Returns whether there was one."""
        raise NotImplementedError

    def check(self) -> None:
        """Raise now what a write would raise later (before a login sends anyone to a browser)."""
        return None

    def forget_tokens(self) -> None:
        """Drop the tokens, keep the registration (a fresh login reuses it)."""
        record = self.read()
        if record.tokens is not None:
            self.write(record.model_copy(update={"tokens": None, "expires_at": None}))

    def refresh_lock(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Held while a refresh token is redeemed: one holder at a time, wherever the record is read."""
        raise NotImplementedError


class TokenFile(ServerTokens):
    """The record in `<dir>/<server>.json`."""

    def __init__(self, directory: Path, server: str, server_url: str) -> None:
        self.directory = directory
        self.server = server
        self.server_url = server_url
        self.path = directory / f"{server}.json"
        self._lock_path = directory / f"{server}.lock"

    def read(self) -> TokenRecord:
        """The stored record, or an empty one (none yet, unreadable, or for another URL)."""
        empty = TokenRecord(server_url=self.server_url)
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return empty
        except OSError as e:
            raise _unavailable(f"cannot read the OAuth tokens {self.path}: {e.strerror or e}") from None
        try:
            record = TokenRecord.model_validate_json(text)
        except ValidationError:
            return empty  # damaged: a new login writes a good one
        return record if record.server_url == self.server_url else empty

    def write(self, record: TokenRecord) -> None:
        """Replace the record atomically; the file is 0600 from its first byte."""
        self._ensure_dir()
        record = record.model_copy(update={"updated_at": time.time(), "server_url": self.server_url})
        temp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(record.model_dump_json(exclude_none=True))
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, self.path)

    def stamp(self) -> tuple[int, int] | None:
        """Changes whenever the file is replaced (by any process): (inode, mtime_ns)."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_mtime_ns

    def forget(self) -> bool:
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True

    @contextlib.asynccontextmanager
    async def refresh_lock(self) -> AsyncIterator[None]:
        """One task of one process at a time: an `anyio.Lock`, then a `flock` beside the file."""
        lock = _LOCKS.setdefault(self.path, anyio.Lock())
        async with lock:
            self._ensure_dir()
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                await anyio.to_thread.run_sync(fcntl.flock, fd, fcntl.LOCK_EX, abandon_on_cancel=False)
                yield
            finally:
                os.close(fd)  # closing releases the flock

    def _ensure_dir(self) -> None:
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.directory.chmod(0o700)
        except OSError as e:
            raise _unavailable(f"cannot create {self.directory} for OAuth tokens: {e.strerror or e}") from None


def _unavailable(message: str) -> ToolshellError:
    return ToolshellError(ErrorCode.UNAVAILABLE, message + "; choose a writable state directory with --state-dir")
