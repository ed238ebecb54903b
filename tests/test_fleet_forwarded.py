"""Forwarded headers behind the real nginx of docs/scale-out.md: with `[serve] trusted_proxies`
naming nginx, the caller's address in the timeline, the OAuth protected-resource metadata and the
page under `/ui/` follow what nginx says the client sent; the same headers sent straight to the
worker by a peer that is not a trusted proxy change nothing.

The client connects from 127.0.0.2, nginx from 127.0.0.1: on loopback the two are told apart by
address, so "trusted" means nginx and nothing else."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from _fleet_support import TOKEN, bash_stdout, port_of
from _proxy_support import PROXIES, Proxy, proxy
from _serve_auth_support import GITHUB_CONFIG, Served, serving
from toolshell.config.loading import STATE_FILE
from toolshell.store.engines import open_store
from toolshell.timeline.sinks import query

pytestmark = pytest.mark.anyio
CLIENT = "127.0.0.2"
"""Where the test's requests come from: an address that is not a trusted proxy."""
PROXIED = '[serve]\nallowed_hosts = ["mcp.example.com"]\ntrusted_proxies = ["127.0.0.1"]\n'
OAUTH = '[serve.oauth]\nissuer = "https://login.example.com"\naudience = "https://mcp.example.com/mcp"\n'
METADATA = "/.well-known/oauth-protected-resource/mcp"
# What a client could claim about itself: believed from nowhere but a trusted proxy.
LIES = {"X-Forwarded-For": "203.0.113.9", "X-Forwarded-Proto": "https", "X-Forwarded-Host": "mcp.example.com"}


def _http(**headers: str) -> httpx2.AsyncClient:
    transport = httpx2.AsyncHTTPTransport(local_address=CLIENT, verify=False)
    return httpx2.AsyncClient(transport=transport, headers=headers, timeout=httpx2.Timeout(30, read=60))


def _through(worker: Served, directory: Path) -> Iterator[Proxy]:
    port = port_of(worker)
    return proxy("nginx", [port, port, port], directory)  # the doc's three upstreams, all this worker


@pytest.fixture(scope="module")
def token_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Proxy]]:
    state = tmp_path_factory.mktemp("token") / "state"
    with serving(state, config=GITHUB_CONFIG + PROXIED, env={"TOOLSHELL_SERVE_TOKEN": TOKEN}) as worker:
        with _through(worker, state.parent / "nginx") as front:
            yield worker, front


def _addresses(worker: Served, marker: str) -> list[str | None]:
    store = open_store(worker.state / STATE_FILE)
    try:
        rows = query(store, limit=500)
    finally:
        store.close()
    return [r["address"] for r in reversed(rows) if marker in r["script_preview"]]


async def _bash(url: str, script: str, **headers: str) -> str:
    http = _http(Authorization=f"Bearer {TOKEN}", **headers)
    async with Client(streamable_http_client(url, http_client=http)) as c:
        return bash_stdout(await c.call_tool("bash", {"script": script}))


async def test_through_a_trusted_proxy_the_timeline_records_the_clients_address_and_a_spoof_sent_directly_does_not(
    token_worker: tuple[Served, Proxy],
) -> None:
    worker, front = token_worker
    marker = f"m{secrets.token_hex(4)}"
    # The client prepends a lie of its own; nginx appends the address it saw, 127.0.0.2.
    proxied = await _bash(
        front.url, f"echo via # {marker}", Host="mcp.example.com", **{"X-Forwarded-For": "198.51.100.66"}
    )
    direct = await _bash(worker.url, f"echo direct # {marker}", **LIES)
    assert (proxied, direct) == ("via\n", "direct\n")
    assert _addresses(worker, marker) == [CLIENT, CLIENT]


async def test_the_page_behind_the_trusted_proxy_answers_its_https_origin_and_a_direct_claim_of_https_is_refused(
    token_worker: tuple[Served, Proxy],
) -> None:
    worker, front = token_worker
    page = (worker.state / "web-token").read_text().strip()
    public = {"Host": "mcp.example.com", "Origin": "https://mcp.example.com"}
    base = front.url.removesuffix("/mcp")
    own = worker.url.removesuffix("/mcp")
    async with _http(Authorization=f"Bearer {page}") as http:
        proxied = await http.get(f"{base}/ui/api/timeline?limit=5", headers=public)
        direct = await http.get(
            f"{own}/ui/api/timeline?limit=5", headers={**LIES, "Origin": own.replace("http:", "https:")}
        )
    assert proxied.status_code == 200, proxied.text
    assert isinstance(proxied.json(), list)
    assert direct.status_code == 403, "an https origin counts only when a trusted proxy says the page is https"
    assert "origin" in json.loads(direct.text)["error"]["message"]


async def test_the_protected_resource_metadata_names_the_public_https_url_only_through_the_trusted_proxy(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    with (
        serving(state, config=GITHUB_CONFIG + OAUTH + PROXIED) as worker,
        _through(worker, tmp_path / "nginx") as front,
    ):
        async with _http(Host="mcp.example.com") as http:
            proxied = (await http.get(front.url.removesuffix("/mcp") + METADATA)).json()
            challenge = (await http.post(front.url)).headers["www-authenticate"]
        own = worker.url.removesuffix("/mcp")
        async with _http(**LIES) as http:
            direct = (await http.get(own + METADATA)).json()
            direct_challenge = (await http.post(worker.url)).headers["www-authenticate"]
    assert proxied["resource"] == "https://mcp.example.com/mcp"
    assert f'resource_metadata="https://mcp.example.com{METADATA}"' in challenge
    assert direct["resource"] == f"{own}/mcp"
    assert f'resource_metadata="{own}{METADATA}"' in direct_challenge


async def test_a_clients_own_forwarded_header_through_the_docs_nginx_changes_nothing(
    token_worker: tuple[Served, Proxy],
) -> None:
    # nginx sets X-Forwarded-*; a Forwarded of the client's own it would pass on, were it not
    # removed in the doc's config and ignored by the worker's default forwarded_header.
    worker, front = token_worker
    marker = f"m{secrets.token_hex(4)}"
    lies = ['for="[2001:db8::66]:1";proto=https;host=mcp.example.com', 'for="<script>alert(1)</script>"']
    for lie in lies:
        await _bash(front.url, f"echo via # {marker}", Host="mcp.example.com", Forwarded=lie)
    assert _addresses(worker, marker) == [CLIENT, CLIENT]


async def test_a_forwarded_origin_through_the_docs_nginx_is_not_the_metadatas(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with (
        serving(state, config=GITHUB_CONFIG + OAUTH + PROXIED) as worker,
        _through(worker, tmp_path / "nginx") as front,
    ):
        poison = "for=1.2.3.4;proto=http;host=mcp.example.com:1"
        async with _http(Host="mcp.example.com", Forwarded=poison) as http:
            answer = await http.get(front.url.removesuffix("/mcp") + METADATA)
            challenge = (await http.post(front.url)).headers["www-authenticate"]
    assert answer.json()["resource"] == "https://mcp.example.com/mcp"
    assert f'resource_metadata="https://mcp.example.com{METADATA}"' in challenge
    assert answer.headers["cache-control"] == "no-store", "an origin from the request's headers is not shared"


@pytest.mark.parametrize("name", PROXIES)
async def test_the_docs_proxies_remove_a_clients_own_forwarded_header(name: str, tmp_path: Path) -> None:
    # A worker told to read Forwarded, behind a documented proxy that sets X-Forwarded-*: the
    # client's Forwarded must not arrive, so the worker records the proxy's own address.
    config = GITHUB_CONFIG + PROXIED + 'forwarded_header = "forwarded"\n'
    marker = f"m{secrets.token_hex(4)}"
    with serving(tmp_path / "state", config=config, env={"TOOLSHELL_SERVE_TOKEN": TOKEN}) as worker:
        port = port_of(worker)
        with proxy(name, [port, port, port], tmp_path / name) as front:
            lie = 'for="[2001:db8::66]:1";proto=https;host=mcp.example.com'
            await _bash(front.url, f"echo via # {marker}", Host="mcp.example.com", Forwarded=lie)
        assert _addresses(worker, marker) == ["127.0.0.1"]
