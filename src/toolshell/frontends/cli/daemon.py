"""`toolshell daemon start|stop|status`: a warm host for this config, directory and state."""

from __future__ import annotations

import json
from typing import Any

import click

from toolshell.frontends.cli.options import Seconds, config_opt, group_paths, guard, state_opt


@click.group()
@group_paths
def daemon() -> None:
    """A background process that keeps the servers of this config and directory connected, so
    `run`, `plan`, `servers` and `scripts` answer at once (they use it by themselves; `--no-daemon`
    skips it). One per config file, working directory and state dir; it exits when idle."""


@daemon.command()
@config_opt
@state_opt
@click.option(
    "--idle-seconds", type=Seconds(), help="Exit after this long without a request (default: [cli] idle_seconds)."
)
@click.option("--foreground", is_flag=True, help="Serve in this process, logging to stderr, until stopped.")
@click.option("--json", "as_json", is_flag=True)
def start(
    config_path: str | None, state_dir: str | None, idle_seconds: float | None, foreground: bool, as_json: bool
) -> None:
    """Start the daemon; returns once it serves."""
    # lazy: the daemon's modules import the host
    from toolshell.frontends.daemon import control
    from toolshell.frontends.daemon.folder import DaemonError
    from toolshell.frontends.daemon.process import run_daemon

    try:
        if foreground:
            guard(lambda: run_daemon(config_path, state_dir, idle_seconds, _say_ready))
            return
        started = guard(lambda: control.start(config_path, state_dir, idle_seconds))
    except DaemonError as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        click.echo(json.dumps(started, indent=2, ensure_ascii=False))
        return
    verb = "already running" if started.get("already") else "started"
    click.echo(f"daemon {verb} (pid {started.get('pid')}) for {_what(started)}")


@daemon.command()
@config_opt
@state_opt
def stop(config_path: str | None, state_dir: str | None) -> None:
    """Stop the daemon and wait until it has exited."""
    # lazy: the daemon's modules import the host
    from toolshell.frontends.daemon import control
    from toolshell.frontends.daemon.folder import DaemonError

    try:
        address = control.locate(config_path, state_dir)
    except DaemonError as e:
        raise click.ClickException(str(e)) from None
    stopped = control.stop(address)
    if stopped is None:
        click.echo(_none_answers(address, control))
        return
    click.echo(f"stopped the daemon (pid {stopped.get('pid')}) for {_what(stopped)}")


@daemon.command()
@config_opt
@state_opt
@click.option("--json", "as_json", is_flag=True)
def status(config_path: str | None, state_dir: str | None, as_json: bool) -> None:
    """What the daemon serves: config, directory, state dir, servers, uptime, requests. Exits 1
    when none runs."""
    # lazy: the daemon's modules import the host
    from toolshell.frontends.daemon import control
    from toolshell.frontends.daemon.folder import DaemonError

    try:
        address = control.locate(config_path, state_dir)
    except DaemonError as e:
        raise click.ClickException(str(e)) from None
    found = control.status(address)
    if as_json:
        click.echo(json.dumps(found or {"running": False, **address.shown()}, indent=2, ensure_ascii=False))
    elif found is None:
        click.echo(_none_answers(address, control))
    else:
        click.echo(_status_text(found))
    if found is None:
        raise SystemExit(1)


def _none_answers(address: Any, control: Any) -> str:
    """No daemon answered: none runs, or one holds the lock without answering (stopped, stuck)."""
    pid = control.holder(address)
    if pid is None:
        return f"no daemon runs for {_what(address.shown())}"
    return f"a daemon (pid {pid}) holds {address.lock} but does not answer; stop it with `kill {pid}`"


def _what(where: dict[str, Any]) -> str:
    config = where.get("config") or "the embedded default config"
    return f"{config} in {where.get('cwd')} (state dir {where.get('state_dir')})"


def _status_text(s: dict[str, Any]) -> str:
    lines = [
        f"daemon pid {s['pid']}, toolshell {s['version']}, up {s['uptime_seconds']:g} s, "
        f"{s['requests']} request(s) served, {s['reloads']} reload(s); exits after {s['idle_seconds']:g} s idle",
        f"config:    {s.get('serving') or 'the embedded default'}"
        + ("" if s.get("serving") == s.get("config") else f" (for {s.get('config') or 'no config file'} here)"),
        f"directory: {s['cwd']}",
        f"state dir: {s['state_dir']}" + (f" (state URL {s['state_url']})" if s.get("state_url") else ""),
        f"socket:    {s['socket']}",
        "servers:",
    ]
    for server in s["servers"]:
        count = server["tools"]
        tools = "" if count is None else f", {count} tool{'' if count == 1 else 's'}"
        lines.append(f"  {server['name']}: {server['state']}{tools}")
    return "\n".join(lines)


def _say_ready(message: dict[str, Any]) -> None:
    click.echo(f"daemon serving (pid {message['pid']}) on {message['socket']}; Ctrl-C stops it", err=True)
