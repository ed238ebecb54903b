"""`toolshell servers` and `toolshell timeline`: what the host knows, for people."""

from __future__ import annotations

import json

import click

from toolshell.frontends.cli.options import (
    UTF8,
    config_opt,
    guard,
    load_config,
    no_daemon_opt,
    run_async,
    state_opt,
    warm_later,
)


@click.command()
@config_opt
@state_opt
@click.option("--json", "as_json", is_flag=True)
@no_daemon_opt
def servers(config_path: str | None, state_dir: str | None, as_json: bool, no_daemon: bool) -> None:
    """Show each server's state, protocol version, tools, last error and stderr tail."""
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    from toolshell.frontends.diagnostics import show_servers

    config = guard(lambda: load_config(config_path))
    warm_later(config, config_path, state_dir, no_daemon)
    run_async(lambda: show_servers(config, state_dir, as_json))


@click.command()
@config_opt
@state_opt
@click.option("--session", "session_id", type=UTF8, help="Only this session.")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 1_000_000), help="Shell calls to show.")
@click.option("--json", "as_json", is_flag=True)
def timeline(config_path: str | None, state_dir: str | None, session_id: str | None, limit: int, as_json: bool) -> None:
    """Shell calls and the tool calls under them (never shown to the model)."""
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    from toolshell import config as cfg
    from toolshell.store.engines import open_store
    from toolshell.timeline.render import render_timeline
    from toolshell.timeline.sinks import query

    loaded = guard(lambda: load_config(config_path))
    store = guard(lambda: open_store(cfg.state_location(loaded, state_dir)))
    rows = query(store, session_id=session_id, limit=limit)
    if not rows and session_id and not as_json:
        click.echo(f"no shell calls recorded for session {session_id}")
        return
    click.echo(json.dumps(rows, indent=2) if as_json else render_timeline(rows))
