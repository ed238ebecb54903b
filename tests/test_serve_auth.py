"""`toolshell serve --http` authenticates every request with the serve token, and records who called.

Exercised the way the hole was found: the owner (root) starts `serve --http` on 127.0.0.1 and a
second local account (`nobody`, with only the system's python3 and curl) tries to run the owner's
destructive tool and answer its approval with `always`."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
from pathlib import Path

import httpx2
import mcp_types as types
import pytest

from _serve_auth_support import Outsider, client, outsider, serving, toolshell_exe
from toolshell.frontends.serve.auth import token_identity
from toolshell.policy import Approvals
from toolshell.store.keys import key_ring
from toolshell.store.sqlite import Store
from toolshell.timeline.sinks import query

pytestmark = pytest.mark.anyio
__all__ = ["outsider"]  # the fixture, imported for pytest
DELETE = "tools github delete-branch branch=main"
STRONG = "from-the-environment-Kq8vR2mZ"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _unused(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
    raise AssertionError("a 2026-07-28 client is asked in input_required rounds, not by elicitation/create")


async def test_a_second_local_account_gets_401_and_leaves_no_always_grant_for_the_owner(outsider: Outsider) -> None:
    state = outsider.directory / "state"
    state.mkdir()  # 0755 under the usual umask: reachable, so only the token file's own mode protects it
    token_file = state / "serve-token"
    with serving(state) as served:
        attempt = outsider.mcp_call(served.url, token_file, DELETE)
        curl = outsider.run("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", served.url)
        out = json.loads(attempt.stdout)
        assert (out["no_token"][0], out["guessed_token"][0], curl.stdout) == (401, 401, "401"), out
        assert "no_token_always" not in out and "guessed_token_always" not in out, "nothing to answer: no call ran"
        token = token_file.read_text().strip()
        async with client(served.url, token, elicitation_callback=_unused) as owner:
            later = await owner.session.call_tool("bash", {"script": DELETE}, allow_input_required=True)
    assert out["token_file"] == "Permission denied"
    error = out["no_token"][1]["error"]
    assert error["code"] == "connection_required"
    assert f"Authorization: Bearer <token>'; the token is in {token_file}" in error["message"]
    assert token not in attempt.stdout and token not in "".join(served.stderr)
    assert isinstance(later, types.InputRequiredResult), "the owner's next call is still asked about"


async def test_the_owners_calls_are_recorded_under_a_token_identity_that_is_not_the_token(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with serving(state) as served:
        token = (state / "serve-token").read_text().strip()
        async with client(served.url, token, mode="legacy") as owner:  # no elicitation: the call stops, pending
            hello = await owner.call_tool("bash", {"script": "echo hi"})
            stopped = await owner.call_tool("bash", {"script": DELETE})
    # The id is keyed with the state key ring: a bare SHA-256 of the token (which anyone reading the
    # timeline or a trace could test guesses against) is not it.
    identity = token_identity(token, key_ring(None, state, shared=False))
    assert identity != "token:" + hashlib.sha256(token.encode()).hexdigest()[:16]
    store = Store(state / "toolshell.db")
    [pending] = Approvals(store).list_pending()
    rows = query(store)
    store.close()
    assert hello.structured_content["stdout"] == "hi\n"
    assert "needs_approval" in stopped.content[0].text
    assert [r["caller"] for r in rows] == [identity, identity]
    assert pending.caller == identity
    assert token.encode() not in (state / "toolshell.db").read_bytes()


async def test_the_token_file_is_made_private_and_the_start_line_says_where_it_is(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with serving(state) as served:
        first = (state / "serve-token").read_text()
    with serving(state) as again:
        second = (state / "serve-token").read_text()
    mode = stat.S_IMODE((state / "serve-token").stat().st_mode)
    assert mode == 0o600
    assert first == second and len(first.strip()) >= 40, "made once, kept across starts"
    assert f"the token is in {state / 'serve-token'}" in served.start_line
    assert first.strip() not in served.start_line + again.start_line
    assert not [p for p in state.iterdir() if p.name.endswith(".tmp")]


def test_a_token_file_others_can_read_is_refused_with_the_chmod_that_fixes_it(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    token_file = state / "serve-token"
    token_file.write_text("a-token-someone-else-may-have-read\n")
    token_file.chmod(0o644)
    result = subprocess.run(
        [toolshell_exe(), "serve", "--http", "--port", "1", "--state-dir", str(state)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert f"run chmod 600 {token_file}" in result.stderr
    assert "Traceback" not in result.stderr and "a-token-someone-else" not in result.stderr


async def test_the_environment_token_is_used_instead_of_a_file(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with serving(state, env={"TOOLSHELL_SERVE_TOKEN": STRONG}) as served:
        async with client(served.url, STRONG) as owner:
            result = await owner.call_tool("bash", {"script": "echo ok"})
        async with httpx2.AsyncClient() as http:
            wrong = await http.post(served.url, json={}, headers={"Authorization": f"Bearer {STRONG[:-1]}X"})
    assert result.structured_content["stdout"] == "ok\n"
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"].startswith("Bearer ")
    assert "the token is $TOOLSHELL_SERVE_TOKEN" in served.start_line
    assert not (state / "serve-token").exists()


def test_no_auth_is_refused_beyond_loopback_and_warns_on_loopback(tmp_path: Path) -> None:
    remote = subprocess.run(
        [toolshell_exe(), "serve", "--http", "--no-auth", "--host", "0.0.0.0", "--allow-remote"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    with serving(tmp_path / "state", "--no-auth") as served:
        pass
    assert remote.returncode == 2
    assert "--no-auth serves loopback addresses only" in remote.stderr
    assert "/mcp (no authentication: --no-auth)" in served.start_line
    assert not (tmp_path / "state" / "serve-token").exists()


def test_no_auth_without_http_is_a_usage_error() -> None:
    result = subprocess.run(
        [toolshell_exe(), "serve", "--no-auth"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2 and "--no-auth applies to --http only" in result.stderr


def test_an_empty_environment_token_does_not_turn_authentication_off(tmp_path: Path) -> None:
    with serving(tmp_path / "state", env={"TOOLSHELL_SERVE_TOKEN": ""}) as served:
        pass
    assert f"the token is in {tmp_path / 'state' / 'serve-token'}" in served.start_line
    assert os.path.getsize(tmp_path / "state" / "serve-token") > 0


@pytest.mark.parametrize("weak", ["hunter2hunter2", "0123456789abcdef0123456789abcde", "from-the-environment"])
def test_an_environment_token_under_128_bits_is_refused_at_start_naming_how_to_make_one(
    tmp_path: Path, weak: str
) -> None:
    result = subprocess.run(
        [toolshell_exe(), "serve", "--http", "--port", "1", "--state-dir", str(tmp_path / "state")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "TOOLSHELL_SERVE_TOKEN": weak},
    )
    assert result.returncode != 0
    assert "$TOOLSHELL_SERVE_TOKEN is too weak to guard this server" in result.stderr
    assert "it needs 128): make one with python -c 'import secrets; print(secrets.token_urlsafe(32))'" in result.stderr
    assert "Traceback" not in result.stderr and weak not in result.stderr
