"""`toolshell auth login|logout|status`: OAuth logins to remote (`http`) servers.

The records live in the state store (`[state] url` / `$TOOLSHELL_STATE_URL`, else the SQLite file
in the state dir), sealed with the state key ring, so a login made here serves every host on a
shared store. A login opens the system browser (or prints the URL to open) and waits for the
authorization server's redirect to a loopback port on 127.0.0.1.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from toolshell.frontends.cli.options import Seconds, config_opt, guard, load_config, run_async, state_opt

if TYPE_CHECKING:
    from toolshell.connections.oauth import AuthSetup
    from toolshell.connections.oauth_login import LoginUI


@contextmanager
def _setup(config: Any, state_dir: str | None, ui: LoginUI | None = None) -> Iterator[AuthSetup]:
    """The host's OAuth setup: its state store (open while the command runs) and its state dir."""
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    from toolshell import config as cfg
    from toolshell.connections.oauth import AuthSetup
    from toolshell.store.engines import open_store

    store = guard(lambda: open_store(cfg.state_location(config, state_dir)))
    try:
        yield AuthSetup(cfg.state_dir(config, state_dir) / "oauth", ui=ui, store=store)
    finally:
        store.close()


@click.group()
def auth() -> None:
    """Log in to remote servers that use OAuth, log out, and show who is logged in."""


@auth.command()
@click.argument("server")
@config_opt
@state_opt
@click.option("--timeout", type=Seconds(), default=300.0, show_default=True, help="Seconds to wait for the browser.")
def login(server: str, config_path: str | None, state_dir: str | None, timeout: float) -> None:
    """Log in to SERVER: opens the browser (or prints the URL) and stores the tokens."""
    # Lazy: the SDK's OAuth client comes with `mcp`, which is slow to import.
    from toolshell.connections.oauth_admin import login as do_login
    from toolshell.connections.oauth_login import LoginUI

    config = guard(lambda: load_config(config_path))
    ui = LoginUI(notify=lambda text: click.echo(text, err=True), timeout_seconds=timeout)
    with _setup(config, state_dir, ui) as setup:
        record = run_async(lambda: do_login(list(config.mcp.servers), server, setup))
    if record.tokens is None:
        click.echo(f"server {server!r} did not ask for a login; nothing was stored")
        return
    scope = f" (scope: {record.tokens.scope})" if record.tokens.scope else ""
    click.echo(f"logged in to {server}{scope}")


@auth.command()
@click.argument("server")
@config_opt
@state_opt
def logout(server: str, config_path: str | None, state_dir: str | None) -> None:
    """Forget SERVER's tokens and client registration."""
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    from toolshell.connections.oauth_admin import logout as do_logout

    config = guard(lambda: load_config(config_path))
    with _setup(config, state_dir) as setup:
        forgot = guard(lambda: do_logout(list(config.mcp.servers), server, setup))
    click.echo(f"logged out of {server}" if forgot else f"was not logged in to {server}")


@auth.command()
@click.argument("server", required=False)
@config_opt
@state_opt
@click.option("--json", "as_json", is_flag=True)
def status(server: str | None, config_path: str | None, state_dir: str | None, as_json: bool) -> None:
    """Show, per OAuth server, whether you are logged in, the issuer, scope and expiry (never a token)."""
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    from toolshell.connections.oauth_admin import render_status
    from toolshell.connections.oauth_admin import status as get_status

    config = guard(lambda: load_config(config_path))
    with _setup(config, state_dir) as setup:
        rows = guard(lambda: get_status(list(config.mcp.servers), setup, server))
    click.echo(json.dumps(rows, indent=2) if as_json else render_status(rows))
