"""`toolshell triggers list|history|fire|serve`."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime

import click

from toolshell.frontends.cli.binding import PORT, listen_address
from toolshell.frontends.cli.options import (
    accept_state,
    config_opt,
    group_paths,
    guard,
    load_config,
    run_async,
    state_opt,
)


@click.group()
@group_paths
def triggers() -> None:
    """Run saved scripts on a schedule or a webhook, with no model involved."""


@triggers.command("list")
@config_opt
@accept_state
def triggers_list(config_path: str | None) -> None:
    """The configured triggers and when each schedule runs next."""
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    from toolshell.scripts.triggers import Trigger

    loaded = guard(lambda: load_config(config_path))
    found = [Trigger.from_config(t) for t in loaded.triggers]
    now = datetime.now().astimezone()
    if not found:
        click.echo("no [[triggers]] in the config")
    for t in found:
        when = f"next {cron.next_after(now):%Y-%m-%d %H:%M}" if (cron := t.cron) else "webhook only"
        hook = f"POST /hooks/{t.name}" if t.webhook else ""
        click.echo(f"{t.name:<20} script={t.script:<20} {t.schedule or '-':<16} {when}  {hook}".rstrip())


@triggers.command("history")
@config_opt
@state_opt
@click.argument("name", required=False)
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
def triggers_history(
    config_path: str | None, state_dir: str | None, name: str | None, limit: int, as_json: bool
) -> None:
    """The latest trigger runs on this state store, newest first: which slot or Idempotency-Key,
    which process claimed it, when, and its exit code (`running` while it runs, `lost` when its
    process stopped heartbeating before it ended)."""
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    from toolshell import config as cfg
    from toolshell.scripts.claims import TriggerClaims
    from toolshell.store.engines import open_store
    from toolshell.store.workers import Workers

    loaded = guard(lambda: load_config(config_path))
    store = guard(lambda: open_store(cfg.state_location(loaded, state_dir)))
    claims = guard(lambda: TriggerClaims(store, workers=Workers(store, loaded.serve.heartbeat_seconds)))
    rows = claims.history(name, limit)
    claims.store.close()
    if as_json:
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    if not rows:
        click.echo("no trigger runs recorded yet")
    for r in rows:
        when = datetime.fromtimestamp(r["claimed_at"], UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        slot = r["slot"] if r["kind"] == "schedule" else "key " + json.dumps(r["slot"])
        ended = "running" if r["finished_at"] is None else "lost" if r["ended_by"] else f"exit {r['exit_code']}"
        click.echo(f"{r['trigger_name']:<20} {slot:<24} {ended:<8} claimed {when} by {r['claimed_by']}")


@triggers.command("fire")
@config_opt
@state_opt
@click.argument("name")
def triggers_fire(config_path: str | None, state_dir: str | None, name: str) -> None:
    """Run one trigger now (its saved script with its input); prints the outcome as JSON."""
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    from toolshell.frontends.trigger_server import fire

    outcome = run_async(lambda: fire(load_config(config_path), state_dir, name))
    click.echo(json.dumps(outcome.to_dict(), ensure_ascii=False))
    sys.exit(outcome.exit_code)


@triggers.command("serve")
@config_opt
@state_opt
@click.option("--host", "bind", default="127.0.0.1", show_default=True)
@click.option(
    "--port",
    type=PORT,
    default=None,
    help="The port for webhooks and the probes /healthz and /readyz (default 8766 when there are "
    "webhooks; with none, no port is opened unless this is given).",
)
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Allow --host to be a non-loopback address. Webhooks check their secret_env token "
    "(those with allow_unauthenticated = true check none).",
)
def triggers_serve(
    config_path: str | None, state_dir: str | None, bind: str, port: int | None, allow_remote: bool
) -> None:
    """Run schedules, and serve webhooks at POST /hooks/<trigger> (loopback by default)."""
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    from toolshell.frontends.trigger_server import listened_port, serve_triggers
    from toolshell.scripts.triggers import Trigger, tokens_from_env  # lazy: CLI start-up

    loaded = guard(lambda: load_config(config_path))
    guard(lambda: tokens_from_env([Trigger.from_config(t) for t in loaded.triggers]))  # fail before starting
    opened = listened_port(loaded, port)
    host = listen_address(bind, opened, allow_remote=allow_remote, what="fire your saved scripts")
    run_async(lambda: serve_triggers(loaded, state_dir, host, port))
