"""Behind any proxy (issue 23, §1): a worker answers the public names it is given and keeps its
DNS-rebinding protection for every other `Host` and `Origin`; `Forwarded` / `X-Forwarded-*` count
only from `[serve] trusted_proxies`, and then the URLs it hands out use them."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import httpx2
import pytest

from _fleet_support import TOKEN, bash_stdout, fleet_client, raw_call
from _serve_auth_support import GITHUB_CONFIG, serving
from toolshell.frontends.serve.forwarded import ForwardedHeaders, public_origin

pytestmark = pytest.mark.anyio
ENV = {"TOOLSHELL_SERVE_TOKEN": TOKEN}
OAUTH = '[serve.oauth]\nissuer = "https://login.example.com"\naudience = "https://mcp.example.com/mcp"\n'
METADATA = "/.well-known/oauth-protected-resource/mcp"


async def test_a_worker_answers_the_public_names_it_is_given_and_refuses_any_other_host_with_421(
    tmp_path: Path,
) -> None:
    with serving(tmp_path / "state", "--allowed-host", "mcp.example.com", env=ENV) as worker:
        # nginx's `proxy_set_header Host $host:$server_port` adds a port to the name: still the name.
        async with fleet_client(worker.url, {"Host": "mcp.example.com:443"}) as c:
            answered = bash_stdout(await c.call_tool("bash", {"script": "echo through"}))
        plain = await raw_call(worker.url, "echo plain", {"Host": "mcp.example.com"})
        other = await raw_call(worker.url, "echo no", {"Host": "evil.example"})
        sibling = await raw_call(worker.url, "echo no", {"Host": "mcp.example.com.evil.example"})
    assert answered == "through\n"
    assert plain.status_code == 200, plain.text
    assert (other.status_code, other.text) == (421, "Invalid Host header")
    assert sibling.status_code == 421


async def test_by_default_a_worker_answers_loopback_names_only(tmp_path: Path) -> None:
    with serving(tmp_path / "state", env=ENV) as worker:
        public = await raw_call(worker.url, "echo no", {"Host": "mcp.example.com"})
        loopback = await raw_call(worker.url, "echo yes")
        # From a peer that is not a trusted proxy, a claimed host is not what the check judges.
        own = worker.url.removeprefix("http://").removesuffix("/mcp")
        spoofed = await raw_call(worker.url, "echo no", {"Host": "evil.example", "X-Forwarded-Host": own})
    assert public.status_code == 421
    assert loopback.status_code == 200, loopback.text
    assert spoofed.status_code == 421


async def test_an_origin_of_another_site_gets_403_even_with_an_allowed_host(tmp_path: Path) -> None:
    config = GITHUB_CONFIG + '[serve]\nallowed_hosts = ["mcp.example.com"]\n'
    with serving(tmp_path / "state", config=config, env=ENV) as worker:
        foreign = await raw_call(worker.url, "echo no", {"Host": "mcp.example.com", "Origin": "https://evil.example"})
        own = await raw_call(worker.url, "echo yes", {"Host": "mcp.example.com", "Origin": "https://mcp.example.com"})
    assert (foreign.status_code, foreign.text) == (403, "Invalid Origin header")
    assert own.status_code == 200, own.text


async def test_forwarded_headers_from_a_peer_that_is_not_a_trusted_proxy_are_ignored(tmp_path: Path) -> None:
    lying = {"X-Forwarded-Host": "mcp.example.com", "X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9"}
    config = GITHUB_CONFIG + OAUTH + '[serve]\nallowed_hosts = ["mcp.example.com"]\n'
    with serving(tmp_path / "state", config=config, env=ENV) as worker:
        base = worker.url.removesuffix("/mcp")
        async with httpx2.AsyncClient() as http:
            metadata = (await http.get(base + METADATA, headers=lying)).json()
            challenge = (await http.post(worker.url, headers=lying)).headers["www-authenticate"]
    assert metadata["resource"] == f"{base}/mcp"
    assert f'resource_metadata="{base}{METADATA}"' in challenge


async def test_a_trusted_proxy_names_the_scheme_and_host_the_client_used_in_every_url_the_worker_gives(
    tmp_path: Path,
) -> None:
    config = GITHUB_CONFIG + OAUTH + '[serve]\nallowed_hosts = ["mcp.example.com"]\ntrusted_proxies = ["127.0.0.0/8"]\n'
    sent = {"X-Forwarded-Host": "mcp.example.com", "X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9"}
    rfc = {"Forwarded": 'for="[2001:db8::7]:4711";proto=https;host=mcp.example.com'}
    with serving(tmp_path / "state", config=config, env=ENV) as worker:
        base = worker.url.removesuffix("/mcp")
        async with httpx2.AsyncClient() as http:
            answer = await http.get(base + METADATA, headers=sent)
            by_rfc = (await http.get(base + METADATA, headers=rfc)).json()
            challenge = (await http.post(worker.url, headers=sent)).headers["www-authenticate"]
            own = await http.get(base + METADATA)
        assert answer.json()["resource"] == "https://mcp.example.com/mcp"
    assert by_rfc["resource"] == f"{base}/mcp", "Forwarded is not the family [serve] forwarded_header names"
    assert f'resource_metadata="https://mcp.example.com{METADATA}"' in challenge
    assert own.json()["resource"] == f"{base}/mcp", "without the headers, the worker's own address"
    # An answer built from the request's headers is for that request: no shared cache keeps it.
    assert answer.headers["cache-control"] == "no-store"
    assert {"host", "x-forwarded-host", "x-forwarded-proto"} <= set(answer.headers["vary"].lower().split(", "))
    assert "public" in own.headers["cache-control"], "the worker's own answer stays cacheable"


def _applied(
    trusted: list[str], peer: str, headers: dict[str, str], family: Literal["x-forwarded", "forwarded"] = "x-forwarded"
) -> dict[str, object]:
    scope = {
        "type": "http",
        "client": (peer, 5000),
        "scheme": "http",
        "headers": [(b"host", b"10.0.0.2:8765"), *((k.lower().encode(), v.encode()) for k, v in headers.items())],
    }
    return ForwardedHeaders(lambda *_: None, trusted, family).applied(scope)  # type: ignore[arg-type, return-value]


def test_the_client_is_the_rightmost_address_that_is_not_a_trusted_proxy() -> None:
    # The client prepended a lie; two trusted proxies appended what they saw.
    chain = {"X-Forwarded-For": "198.51.100.66, 203.0.113.9, 10.0.0.7", "X-Forwarded-Proto": "https"}
    scope = _applied(["10.0.0.0/8"], "10.0.0.5", chain)
    rfc = _applied(
        ["10.0.0.0/8"], "10.0.0.5", {"Forwarded": "for=198.51.100.66, for=203.0.113.9;proto=https"}, "forwarded"
    )
    assert scope["client"] == ("203.0.113.9", 0) and scope["scheme"] == "https"
    assert rfc["client"] == ("203.0.113.9", 0) and rfc["scheme"] == "https"


def test_an_untrusted_peer_keeps_its_own_address_and_its_forwarded_headers_go() -> None:
    scope = _applied(["10.0.0.0/8"], "192.0.2.1", {"X-Forwarded-For": "203.0.113.9", "Forwarded": "for=1.2.3.4"})
    assert scope["client"] == ("192.0.2.1", 5000)
    assert [k for k, _ in scope["headers"]] == [b"host"]  # type: ignore[attr-defined]
    assert public_origin(scope) is None


def test_behind_a_trusted_proxy_the_host_check_judges_the_host_the_client_asked_for() -> None:
    scope = _applied(["10.0.0.5"], "10.0.0.5", {"X-Forwarded-Host": "evil.example", "X-Forwarded-For": "1.2.3.4"})
    assert dict(scope["headers"])[b"host"] == b"evil.example"  # type: ignore[call-overload]
    assert public_origin(scope) == "http://evil.example"


def test_a_malformed_forwarded_host_is_not_taken() -> None:
    scope = _applied(["10.0.0.5"], "10.0.0.5", {"X-Forwarded-Host": "evil.example/<x>", "X-Forwarded-For": "1.2.3.4"})
    assert dict(scope["headers"])[b"host"] == b"10.0.0.2:8765"  # type: ignore[call-overload]


def test_only_the_configured_header_family_is_read() -> None:
    # nginx and HAProxy set X-Forwarded-*; a client's own Forwarded they pass on as it was written.
    both = {"X-Forwarded-For": "203.0.113.9", "Forwarded": 'for="[2001:db8::66]:1";proto=https;host=evil.example'}
    scope = _applied(["10.0.0.5"], "10.0.0.5", both)
    assert scope["client"] == ("203.0.113.9", 0) and scope["scheme"] == "http"
    assert public_origin(scope) == "http://10.0.0.2:8765"
    rfc = _applied(
        ["10.0.0.5"], "10.0.0.5", {"Forwarded": "for=198.51.100.7", "X-Forwarded-For": "1.2.3.4"}, "forwarded"
    )
    assert rfc["client"] == ("198.51.100.7", 0)
    alone = _applied(["10.0.0.5"], "10.0.0.5", {"Forwarded": "for=198.51.100.7;proto=https"})
    assert alone["client"] == ("10.0.0.5", 5000) and public_origin(alone) is None


@pytest.mark.parametrize(
    ("family", "headers"),
    [
        ("forwarded", {"Forwarded": 'for="<script>alert(1)</script>"'}),
        ("forwarded", {"Forwarded": "for=unknown"}),
        ("forwarded", {"Forwarded": "proto=https;host=mcp.example.com"}),
        ("x-forwarded", {"X-Forwarded-For": "<script>alert(1)</script>"}),
        ("x-forwarded", {"X-Forwarded-For": "mcp.example.com"}),
    ],
)
def test_a_hop_that_is_not_an_ip_address_leaves_the_peers_address(
    family: Literal["x-forwarded", "forwarded"], headers: dict[str, str]
) -> None:
    scope = _applied(["10.0.0.5"], "10.0.0.5", headers, family)
    assert scope["client"] == ("10.0.0.5", 5000) and scope["scheme"] == "http"


@pytest.mark.parametrize(
    ("family", "headers"),
    [
        # The proxy appended its element after what the client wrote; a part that does not parse
        # must not leave the client's element standing for the proxy's.
        ("forwarded", {"Forwarded": "for=198.51.100.7;proto=https, @@, for=203.0.113.2"}),
        ("forwarded", {"Forwarded": 'for=198.51.100.7;proto=https;x="unterminated, for=203.0.113.2'}),
        ("forwarded", {"Forwarded": "for=198.51.100.7;proto=https,, for=203.0.113.2"}),
    ],
)
def test_a_malformed_element_anywhere_leaves_the_whole_header_unread(
    family: Literal["x-forwarded", "forwarded"], headers: dict[str, str]
) -> None:
    scope = _applied(["10.0.0.5"], "10.0.0.5", headers, family)
    assert scope["client"] == ("10.0.0.5", 5000) and scope["scheme"] == "http"
    assert public_origin(scope) is None


def test_what_a_client_wrote_left_of_its_own_address_neither_hides_nor_replaces_it() -> None:
    # The proxies append: 203.0.113.2 is what the trusted proxy saw; the rest is the client's own.
    garbled = {"X-Forwarded-For": "198.51.100.7, @@, 203.0.113.2", "X-Forwarded-Proto": "https"}
    scope = _applied(["10.0.0.5"], "10.0.0.5", garbled)
    assert scope["client"] == ("203.0.113.2", 0) and scope["scheme"] == "https"
    # Garbage where a trusted proxy wrote (its own entry) leaves the nearest proxy's address.
    behind = _applied(["10.0.0.0/24"], "10.0.0.5", {"X-Forwarded-For": "203.0.113.2, @@, 10.0.0.7"})
    assert behind["client"] == ("10.0.0.7", 0)
    first = _applied(["10.0.0.5"], "10.0.0.5", {"X-Forwarded-For": "203.0.113.2, @@"})
    assert first["client"] == ("10.0.0.5", 5000)


def test_addresses_in_brackets_with_ports_or_bare_ipv6_are_read() -> None:
    rfc = _applied(["10.0.0.5"], "10.0.0.5", {"Forwarded": 'for="[2001:db8::1]:4711";proto=https'}, "forwarded")
    bare = _applied(["10.0.0.5"], "10.0.0.5", {"X-Forwarded-For": "2001:db8::1, 192.0.2.4:80"})
    assert rfc["client"] == ("2001:db8::1", 4711) and rfc["scheme"] == "https"
    assert bare["client"] == ("192.0.2.4", 80)
