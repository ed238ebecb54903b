# ruff: noqa: F811  (the engine fixtures are imported from _store_support and named as parameters)
"""OAuth records in the state store, on each engine: one login serves every host on the store, a
refresh token is redeemed once however many hosts found it expired, the record is sealed with the
key ring (rotation keeps the login; a ring that cannot open it says so), and old token files move in."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx2
import pytest

from _oauth_server import Running, serve_oauth
from _store_support import ENGINES, postgres_server, store_url  # noqa: F401  (fixtures)
from toolshell import Host
from toolshell.config import Config
from toolshell.config.models import McpSection, ServerConfig
from toolshell.connections.oauth import AuthSetup
from toolshell.connections.oauth_admin import login, status
from toolshell.connections.oauth_login import LoginUI
from toolshell.connections.oauth_store import PURPOSE, StoredTokens
from toolshell.store.engines import open_store
from toolshell.store.keys import key_ring, new_key
from toolshell.store.protocol import StateStore
from toolshell.store.sealed import unseal

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("store_url", ENGINES, indirect=True)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def ring(monkeypatch: Any) -> list[str]:
    """The configured key ring every host of the test shares (a shared store needs one)."""
    keys = [new_key()]
    monkeypatch.setenv("TOOLSHELL_STATE_KEYS", keys[0])
    return keys


async def browse(url: str) -> bool:
    """The person's browser, headless: follow the authorization URL back to the loopback redirect."""
    async with httpx2.AsyncClient(follow_redirects=True) as http:
        page = await http.get(url)
    assert page.status_code == 200, page.text
    return True


def secure(url: str, **extra: Any) -> ServerConfig:
    return ServerConfig(name="secure", type="http", url=url, **extra)


def config_for(server: ServerConfig) -> Config:
    return Config(mcp=McpSection(servers=[server]))


async def log_in(server: ServerConfig, store: StateStore, state_dir: Path) -> None:
    ui = LoginUI(open_url=browse, notify=lambda _: None, timeout_seconds=10)
    await login([server], server.name, AuthSetup(state_dir / "oauth", ui=ui, store=store))


async def whoami(server: ServerConfig, store_url: str, state_dir: Path) -> Any:
    """A call to the server from a host of its own on the store (a host closes its store)."""
    async with Host.open(config_for(server), store=open_store(store_url), state_dir=state_dir) as host:
        return await host.run("tools secure whoami")


def expire(server: ServerConfig, store: StateStore, state_dir: Path) -> None:
    tokens = StoredTokens(store, server, state_dir)
    tokens.write(tokens.read().model_copy(update={"expires_at": 1.0}))  # time passed: the token expired


def raw_rows(store: StateStore) -> list[bytes]:
    """Every column of every OAuth row, as the database hands it to anyone who can read the table."""
    rows = store.query("SELECT * FROM oauth_records")
    return [v if isinstance(v, bytes) else bytes(v) if isinstance(v, memoryview) else str(v).encode()
            for row in rows for v in (row[k] for k in row.keys())]  # fmt: skip


async def test_a_login_on_one_host_is_used_by_another_host_on_the_same_store(
    store_url: str, tmp_path: Path, ring: list[str]
) -> None:
    async with serve_oauth() as running:
        server = secure(running.url)
        await log_in(server, open_store(store_url), tmp_path / "one")
        called = await whoami(server, store_url, tmp_path / "two")
    assert called.exit_code == 0, called.stderr
    assert json.loads(called.stdout) == {"client": next(iter(running.provider.clients)), "scopes": ["mcp"]}
    assert len(running.provider.authorizations) == 1  # host two sent nobody to a browser


class Watched:
    """The real store, telling the test when a refresh asks for the record's row lock."""

    def __init__(self, inner: StateStore) -> None:
        self.inner = inner
        self.asked = anyio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def lock_row(self, table: str, key_column: str, key: str) -> Any:
        self.asked.set()
        return self.inner.lock_row(table, key_column, key)


async def test_two_hosts_refreshing_an_expired_token_at_once_redeem_it_once(
    store_url: str, tmp_path: Path, ring: list[str]
) -> None:
    setup_store, holder = open_store(store_url), open_store(store_url)
    one, two = Watched(open_store(store_url)), Watched(open_store(store_url))
    results: dict[str, Any] = {}
    async with serve_oauth() as running:
        server = secure(running.url, load="on_demand")
        await log_in(server, setup_store, tmp_path)
        expire(server, setup_store, tmp_path)
        identity = StoredTokens(setup_store, server, tmp_path).identity
        # The test holds the row first, so both hosts are surely waiting on it when it lets go.
        held = holder.lock_row("oauth_records", "identity", identity)
        await anyio.to_thread.run_sync(held.__enter__)
        async with (
            Host.open(config_for(server), store=one, state_dir=tmp_path / "one") as first,  # type: ignore[arg-type]
            Host.open(config_for(server), store=two, state_dir=tmp_path / "two") as second,  # type: ignore[arg-type]
            anyio.create_task_group() as tg,
        ):

            async def run(name: str, host: Host) -> None:
                results[name] = await host.run("tools secure whoami")

            tg.start_soon(run, "first", first)
            tg.start_soon(run, "second", second)
            with anyio.fail_after(10):
                await one.asked.wait()
                await two.asked.wait()
            held.__exit__(None, None, None)
    assert [r.exit_code for r in results.values()] == [0, 0], [r.stderr for r in results.values()]
    assert (running.provider.refreshes, running.provider.refused_refreshes) == (1, 0)


async def test_the_stored_record_holds_no_token_or_registration_in_clear(
    store_url: str, tmp_path: Path, ring: list[str]
) -> None:
    store = open_store(store_url)
    async with serve_oauth() as running:
        server = secure(running.url)
        await log_in(server, store, tmp_path)
    stored = b"".join(raw_rows(store))
    secrets = [*running.provider.access_tokens, *running.provider.refresh_tokens, *running.provider.clients]
    assert len(secrets) == 3 and stored
    assert [s for s in secrets if s.encode() in stored] == []
    assert running.url.encode() not in stored  # the row is keyed by a hash of the URL, not the URL
    assert b"refresh_" not in stored and b"access_token" not in stored


async def test_a_rotated_key_ring_keeps_the_login_and_the_next_write_seals_with_the_new_key(
    store_url: str, tmp_path: Path, ring: list[str], monkeypatch: Any
) -> None:
    store = open_store(store_url)
    old, new = ring[0], new_key()
    async with serve_oauth() as running:
        server = secure(running.url)
        await log_in(server, store, tmp_path)
        monkeypatch.setenv("TOOLSHELL_STATE_KEYS", f"{new},{old}")  # rotation: the new key first
        opened_with_both = await whoami(server, store_url, tmp_path)
        running.provider.expire_access_tokens()  # the next call refreshes, and so writes the record
        refreshed = await whoami(server, store_url, tmp_path)
        monkeypatch.setenv("TOOLSHELL_STATE_KEYS", new)  # the old key dropped
        opened_with_new = await whoami(server, store_url, tmp_path)
    assert [r.exit_code for r in (opened_with_both, refreshed, opened_with_new)] == [0, 0, 0], refreshed.stderr
    assert running.provider.refreshes == 1 and len(running.provider.authorizations) == 1
    [row] = store.query("SELECT identity, sealed FROM oauth_records")
    old_ring = key_ring(old, tmp_path, shared=True)
    assert unseal(old_ring, PURPOSE, row["identity"], bytes(row["sealed"])) is None


async def test_a_record_no_key_of_the_ring_opens_is_connection_required_naming_the_ring(
    store_url: str, tmp_path: Path, ring: list[str], monkeypatch: Any
) -> None:
    store = open_store(store_url)
    async with serve_oauth() as running:
        server = secure(running.url)
        await log_in(server, store, tmp_path)
        monkeypatch.setenv("TOOLSHELL_STATE_KEYS", new_key())  # a ring without the key it was sealed with
        refused = await whoami(server, store_url, tmp_path)
        [row] = status([server], AuthSetup(tmp_path / "oauth", store=store))
        await log_in(server, store, tmp_path)  # a fresh login replaces what no key opens
        again = await whoami(server, store_url, tmp_path)
    error = json.loads(refused.stderr.strip().splitlines()[-1])["error"]
    assert refused.exit_code != 0 and "Traceback" not in refused.stderr
    assert error["code"] == "connection_required"
    assert "state key ring does not hold ($TOOLSHELL_STATE_KEYS" in error["message"]
    assert error["message"].endswith("run `toolshell auth login secure`")
    assert (row["logged_in"], row["problem"]) == (False, error["message"])
    assert again.exit_code == 0, again.stderr


async def test_a_token_file_from_before_moves_into_the_store_on_first_use(
    store_url: str, tmp_path: Path, ring: list[str]
) -> None:
    state = tmp_path / "state"
    async with serve_oauth() as running:
        server = secure(running.url)
        await _file_login(server, state, running)
        assert (state / "oauth" / "secure.json").exists()
        called = await whoami(server, store_url, state)
    assert called.exit_code == 0, called.stderr
    assert not (state / "oauth" / "secure.json").exists()  # the store holds it now, sealed
    assert len(open_store(store_url).query("SELECT identity FROM oauth_records")) == 1


async def _file_login(server: ServerConfig, state: Path, running: Running) -> None:
    """A login as an earlier version made it: a token file under `<state dir>/oauth`."""
    ui = LoginUI(open_url=browse, notify=lambda _: None, timeout_seconds=10)
    await login([server], server.name, AuthSetup(state / "oauth", ui=ui))
    assert running.provider.authorizations
