"""`toolshell approvals`: list, grant, deny and revoke."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from toolshell.frontends.cli.listed import remember, terminal, was_listed
from toolshell.frontends.cli.options import UTF8, group_paths, guard, load_config, paths
from toolshell.safe_text import escape

BY_CLI = "a person with `toolshell approvals {}`"
_json_opt = click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")


@click.group(invoke_without_command=True)
@group_paths
@_json_opt
@click.pass_context
def approvals(ctx: click.Context, as_json: bool = False) -> None:
    """List, grant or deny approval requests (alone: the pending ones, `--json` too)."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(approvals_list, as_json=as_json)
    elif as_json:
        sub = ctx.invoked_subcommand
        raise click.UsageError(f"write --json after the subcommand: toolshell approvals {sub} --json")


def _approvals(ctx: click.Context) -> Any:
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    from toolshell import config as cfg
    from toolshell.policy.approvals import Approvals
    from toolshell.store.engines import open_store

    config_path, state_dir = paths(ctx)
    loaded = guard(lambda: load_config(config_path))
    store = guard(lambda: open_store(cfg.state_location(loaded, state_dir)))
    return guard(lambda: Approvals(store, expire_seconds=loaded.approval.wait_seconds))


def _state_dir(ctx: click.Context) -> Path:
    """The local state dir (where this terminal's listings are recorded, whatever the store)."""
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    from toolshell import config as cfg

    config_path, state_dir = paths(ctx)
    return cfg.state_dir(guard(lambda: load_config(config_path)), state_dir)


def _configured_programs(ctx: click.Context) -> dict[str, Any]:
    """The program each configured server runs now, by name: a grant applies to its own program only."""
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    from toolshell.registry.server_identity import configured_identities

    return configured_identities(guard(lambda: load_config(paths(ctx)[0])))


@approvals.command("list")
@group_paths
@_json_opt
@click.option("--expired", is_flag=True, help="The requests that expired unanswered instead, newest first.")
@click.pass_context
def approvals_list(ctx: click.Context, as_json: bool = False, expired: bool = False) -> None:
    """Pending approval requests (--json: `[{id, tool, input, risk, why, status, created}, …]`).

    A request nobody answers expires after `[approval] wait_seconds`; `--expired` lists those."""
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    from toolshell.frontends.listings import approval_json

    store = _approvals(ctx)
    listed = store.list_expired() if expired else store.list_pending()
    remember(_state_dir(ctx), [r.id for r in listed])  # `grant` asks about a request never listed here
    if as_json:
        click.echo(json.dumps([approval_json(r) for r in listed], indent=2, ensure_ascii=False))
        return
    if not listed:
        click.echo("no expired approval requests" if expired else "no pending approval requests")
    for r in listed:
        mark = "  expired" if expired else ""
        click.echo(escape(f"{r.id}  {r.command}  {json.dumps(r.input, ensure_ascii=False)}  ({r.why}){mark}"))


@approvals.command("grant")
@group_paths
@click.argument("request_id", type=UTF8)
@click.option("--always", is_flag=True, help="Allow this tool from now on (until it changes).")
@click.option("--yes", is_flag=True, help="Grant without asking, even a request this terminal never listed.")
@click.pass_context
def approvals_grant(ctx: click.Context, request_id: str, always: bool, yes: bool) -> None:
    """Grant a request once (that exact call) or --always (the tool); prints what it grants.

    On a terminal that never listed the request (`toolshell approvals list`), it is shown and you
    are asked first: an id handed to you may name another call than you think."""
    store = _approvals(ctx)
    request = guard(lambda: store.get(request_id))
    what = _granted(request, always)
    if not yes and terminal() is not None and not was_listed(_state_dir(ctx), request_id):
        click.echo(escape(f"{request_id} was never listed on this terminal; it asks for {what}"))
        if not click.confirm("Grant it?", default=False):
            click.echo(f"not granted: {request_id} stays pending", err=True)
            sys.exit(1)
    guard(lambda: store.grant(request_id, always=always, by=BY_CLI.format("grant")))
    click.echo(escape(f"granted {request_id} " + ("(always)" if always else "(once)") + f": {what}"))


def _granted(request: Any, always: bool) -> str:
    """What a grant of `request` allows, as one line."""
    if always:
        return f"{request.command} with any input, while its server stays the same"
    return f"{request.command} {json.dumps(request.input, ensure_ascii=False)} ({request.why})"


@approvals.command("grants")
@group_paths
@_json_opt
@click.pass_context
def approvals_grants(ctx: click.Context, as_json: bool) -> None:
    """The grants (once: that exact call; always: the tool until it changes), each with the server
    program it was given for, and why it does not apply when that is no longer the program configured."""
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    from toolshell.frontends.listings import grant_json

    grants = _approvals(ctx).list_grants(_configured_programs(ctx))
    if as_json:
        click.echo(json.dumps([grant_json(g) for g in grants], indent=2, ensure_ascii=False))
        return
    if not grants:
        click.echo("no grants in force")
    for g in grants:
        shown = "" if g["input"] is None else "  " + json.dumps(g["input"], ensure_ascii=False)
        click.echo(escape(f"{g['kind']:<7} {g['command']}{shown}  ({_whose(g)})"))


def _whose(grant: dict[str, Any]) -> str:
    """Which server program a grant belongs to, and why it does not apply when it does not."""
    server = grant["server"] or "no server"
    whose = f"server {server}: {grant['program']}" if grant["program"] else f"server {server}"
    return f"{whose}; {grant['note']}" if grant["note"] else whose


@approvals.command("revoke")
@group_paths
@click.argument("tool", nargs=-1, required=True, type=UTF8)
@click.pass_context
def approvals_revoke(ctx: click.Context, tool: tuple[str, ...]) -> None:
    """Withdraw the grants of a tool, e.g. `toolshell approvals revoke github delete-branch` (or
    `"tools github delete-branch"`, `mcp_github__delete_branch`, as listings print it). Exit 1
    when no grant matched."""
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    from toolshell.policy.approvals import tool_command

    store, named = _approvals(ctx), " ".join(tool)
    n = store.revoke(named)
    if n == 0:
        near = store.nearest_grants(named)
        hint = f"; did you mean {', '.join(near)}?" if near else "; `toolshell approvals grants` lists them"
        click.echo(escape(f"no grant in force for {tool_command(named)}{hint}"), err=True)
        sys.exit(1)
    click.echo(escape(f"revoked {n} grant{'s' if n != 1 else ''} of {tool_command(named)}"))


@approvals.command("deny")
@group_paths
@click.argument("request_id", type=UTF8)
@click.pass_context
def approvals_deny(ctx: click.Context, request_id: str) -> None:
    """Deny a request."""
    guard(lambda: _approvals(ctx).deny(request_id, by=BY_CLI.format("deny")))
    click.echo(f"denied {request_id}")
