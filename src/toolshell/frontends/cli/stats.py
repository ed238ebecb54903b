"""`toolshell stats`: per server and tool, from the timeline — calls, errors by code, approvals
asked, and the p50/p95/max duration (the web page shows the same table); with `[[quotas]]`, each
caller's use of the day."""

from __future__ import annotations

import json
import time

import click

from toolshell.frontends.cli.options import UTF8, config_opt, guard, load_config, state_opt


def _since(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    from toolshell.timeline.stats import parse_duration

    if value is None:
        return None
    try:
        return time.time() - parse_duration(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


@click.command()
@config_opt
@state_opt
@click.option(
    "--since", "since", metavar="DURATION", callback=_since, help="Only calls this recent: 30m, 2h, 7d, 1h30m."
)
@click.option("--server", type=UTF8, help="Only this server's tools.")
@click.option("--json", "as_json", is_flag=True)
def stats(
    config_path: str | None, state_dir: str | None, since: float | None, server: str | None, as_json: bool
) -> None:
    """Calls, errors, approvals and durations per server and tool, from the timeline."""
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    from toolshell import config as cfg
    from toolshell.policy.approvals import Approvals
    from toolshell.policy.limits import Limits, render_usage
    from toolshell.store.engines import open_store
    from toolshell.timeline.stats import render_stats, stats_json, tool_stats

    loaded = guard(lambda: load_config(config_path))
    store = guard(lambda: open_store(cfg.state_location(loaded, state_dir)))
    Approvals(store)  # its table: a state where nothing was ever asked has none yet
    rows = tool_stats(store, since, server)
    usage = Limits(store, [], loaded.quotas).usage()  # today's use per caller, where `[[quotas]]` are set
    if as_json:
        shown = stats_json(rows, since)
        if loaded.quotas:
            shown["quotas"] = usage
        click.echo(json.dumps(shown, indent=2))
        return
    click.echo(render_stats(rows), nl=False)
    if loaded.quotas:
        click.echo(render_usage(usage), nl=False)
