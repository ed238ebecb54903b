# ruff: noqa: F811  (the engine fixtures are imported from _store_support and named as parameters)
"""`toolshell auth login|status|logout` as a person runs them, with `$BROWSER` as the browser."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest

from _oauth_server import serve_oauth
from _store_support import ENGINES, fresh_database, needs_postgres, postgres_server, store_url  # noqa: F401  (fixtures)
from toolshell import Host
from toolshell.config import load
from toolshell.store.engines import open_store
from toolshell.store.keys import new_key

TOOLSHELL = Path(sys.executable).parent / "toolshell"  # the installed console script

BROWSER = f"""#!{sys.executable}
# A headless browser: fetch the authorization URL and follow the redirects back to toolshell.
import sys, httpx2
page = httpx2.get(sys.argv[1], follow_redirects=True)
sys.exit(0 if page.status_code == 200 else 1)
"""


async def toolshell(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    done = await anyio.run_process([str(TOOLSHELL), *args], env=env, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


@pytest.mark.anyio
async def test_login_status_call_and_logout_from_the_command_line(tmp_path: Path) -> None:
    browser = tmp_path / "browser"
    browser.write_text(BROWSER)
    browser.chmod(0o700)
    state = tmp_path / "state"
    env = {**os.environ, "BROWSER": str(browser), "TOOLSHELL_STATE_DIR": str(state)}
    async with serve_oauth() as running:
        config = tmp_path / "toolshell.toml"
        config.write_text(f'[[mcp.servers]]\nname = "secure"\ntype = "http"\nurl = "{running.url}"\n')
        cfg = ["--config", str(config)]
        before = await toolshell("auth", "status", *cfg, env=env)
        logged = await toolshell("auth", "login", "secure", *cfg, "--timeout", "20", env=env)
        shown = await toolshell("auth", "status", "secure", *cfg, "--json", env=env)
        async with Host.open(load(str(config)), state_dir=state) as host:
            called = await host.run("tools secure whoami")
        out = await toolshell("auth", "logout", "secure", *cfg, env=env)
        after = await toolshell("auth", "status", *cfg, env=env)
    assert before == (0, "secure           not logged in (toolshell auth login secure)\n", "")
    assert logged[:2] == (0, "logged in to secure (scope: mcp)\n"), logged
    assert "To log in to server 'secure', open this URL in a browser:" in logged[2]
    row = json.loads(shown[1])[0]
    assert (row["logged_in"], row["scope"], row["refreshable"]) == (True, "mcp", True)
    assert "access_" not in shown[1] and "refresh_" not in shown[1]  # never a token
    assert called.exit_code == 0 and json.loads(called.stdout)["scopes"] == ["mcp"], called.stderr
    assert out == (0, "logged out of secure\n", "")
    assert after[1].startswith("secure           not logged in")


@pytest.mark.anyio
async def test_login_to_a_server_that_does_not_use_oauth_says_so(tmp_path: Path) -> None:
    config = tmp_path / "toolshell.toml"
    config.write_text('[[mcp.servers]]\nname = "t"\ntype = "stdio"\ncommand = "true"\n')
    code, out, err = await toolshell("auth", "login", "t", "--config", str(config), env=dict(os.environ))
    assert (code, out) == (1, "")
    assert json.loads(err)["error"]["message"] == (
        "server 't' does not log in with OAuth (only type = \"http\" servers do, unless their headers carry an "
        "Authorization or oauth.enabled = false)"
    )


@pytest.mark.anyio
@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_login_status_and_logout_work_against_the_state_store_a_worker_elsewhere_uses(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    browser = tmp_path / "browser"
    browser.write_text(BROWSER)
    browser.chmod(0o700)
    ring = new_key()
    env = {
        **os.environ,
        "BROWSER": str(browser),
        "TOOLSHELL_STATE_DIR": str(tmp_path / "laptop"),
        "TOOLSHELL_STATE_URL": store_url,
        "TOOLSHELL_STATE_KEYS": ring,
    }
    async with serve_oauth() as running:
        config = tmp_path / "toolshell.toml"
        config.write_text(f'[[mcp.servers]]\nname = "secure"\ntype = "http"\nurl = "{running.url}"\n')
        cfg = ["--config", str(config)]
        logged = await toolshell("auth", "login", "secure", *cfg, "--timeout", "20", env=env)
        shown = await toolshell("auth", "status", "secure", *cfg, "--json", env=env)
        monkeypatch.setenv("TOOLSHELL_STATE_KEYS", ring)  # the worker holds the same ring
        worker = tmp_path / "worker"
        async with Host.open(load(str(config)), store=open_store(store_url), state_dir=worker) as host:
            called = await host.run("tools secure whoami")
        out = await toolshell("auth", "logout", "secure", *cfg, env=env)
        after = await toolshell("auth", "status", *cfg, env=env)
    assert logged[:2] == (0, "logged in to secure (scope: mcp)\n"), logged
    assert json.loads(shown[1])[0]["logged_in"] is True
    assert called.exit_code == 0 and json.loads(called.stdout)["scopes"] == ["mcp"], called.stderr
    assert not (tmp_path / "laptop" / "oauth").exists()  # nothing was written beside the store
    assert out == (0, "logged out of secure\n", "")
    assert after[1].startswith("secure           not logged in")


@pytest.mark.anyio
async def test_a_login_to_a_shared_store_without_a_key_ring_says_so_before_the_browser_opens(
    postgres_server: str | None, tmp_path: Path
) -> None:
    url = fresh_database(needs_postgres(postgres_server))
    env = {k: v for k, v in os.environ.items() if k != "TOOLSHELL_STATE_KEYS"}
    env |= {"TOOLSHELL_STATE_DIR": str(tmp_path / "state"), "TOOLSHELL_STATE_URL": url}
    async with serve_oauth() as running:
        config = tmp_path / "toolshell.toml"
        config.write_text(f'[[mcp.servers]]\nname = "secure"\ntype = "http"\nurl = "{running.url}"\n')
        login = ["auth", "login", "secure", "--config", str(config), "--timeout", "10"]
        code, out, err = await toolshell(*login, env=env)
    assert (code, out, running.provider.authorizations) == (1, "", [])
    error = json.loads(err)["error"]
    assert error["code"] == "invalid_input"
    assert error["message"].startswith(
        "a shared state store needs one key ring for every worker: set TOOLSHELL_STATE_KEYS"
    )
