"""`toolshell config validate`, `config import` and `config trust`."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from toolshell.frontends.cli.options import accept_state, config_opt, guard
from toolshell.safe_text import escape

if TYPE_CHECKING:
    from toolshell.config import Config
    from toolshell.config.trust import TrustState


@click.group()
def config() -> None:
    """Check or convert configuration files."""


@config.command("validate")
@click.argument("path", required=False)
@config_opt
@accept_state
def config_validate(path: str | None, config_path: str | None) -> None:
    """Check a config file (PATH or --config); print every problem with its place and what to write instead."""
    if path is not None and config_path is not None and path != config_path:
        raise click.UsageError(f"name the file once: PATH {path!r} or --config {config_path!r}")
    path = path or config_path
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    from toolshell import config as cfg
    from toolshell.redact import Redactor
    from toolshell.registry.filters import config_warnings

    found = cfg.find_config_path(path)
    if found is None:
        click.echo("no config file found; toolshell uses the embedded default (built-in servers only)")
        return
    loaded = guard(lambda: cfg.load_file(found))
    names = ", ".join(s.name for s in loaded.mcp.servers) or "none"
    click.echo(f"{found}: ok ({len(loaded.mcp.servers)} servers: {names})")
    redact = Redactor(loaded.secrets)  # a warning quotes config values as expanded: the secrets in them masked
    for place, message in [*config_warnings(loaded), *_missing_commands(loaded)]:
        click.echo(redact(f"  warning: {place}: {message}"), err=True)


def _missing_commands(loaded: Config) -> list[tuple[str, str]]:
    """Each enabled stdio server whose `command` is neither an executable path nor on PATH (its own
    `env` PATH when it sets one), as the host would fail to start it."""
    found: list[tuple[str, str]] = []
    for server in loaded.mcp.servers:
        command = server.command or ""
        if server.type != "stdio" or not server.enabled or not command:
            continue
        shown = escape(json.dumps(command, ensure_ascii=False))
        if "/" in command:
            path = Path(server.cwd or ".") / command
            if not (path.is_file() and os.access(path, os.X_OK)):
                why = "is not an executable file" if path.exists() else "does not exist"
                found.append((f"mcp.servers[{server.name}].command", f"{shown} {why}; install it or fix the path"))
        elif shutil.which(command, path=server.env.get("PATH") or os.environ.get("PATH")) is None:
            found.append(
                (
                    f"mcp.servers[{server.name}].command",
                    f"{shown} is not found on PATH; install it, or write its full path",
                )
            )
    return found


@config.command("import")
@click.argument("file")
def config_import(file: str) -> None:
    """Print a config as toolshell TOML: another host's {"mcpServers": ...} JSON, or a TOML file
    (every section kept).

    A literal token or key (an Authorization header, a header or env value named like a secret) is
    written as `${VAR}`; stderr names each variable to set.
    """
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    from toolshell import config as cfg
    from toolshell.config.lift import lift_secrets

    loaded = guard(lambda: cfg.load_file(file, expand=False))  # `${VAR}` stays as written: no secret printed
    lifted = lift_secrets([{"name": s.name, "headers": s.headers, "env": s.env} for s in loaded.mcp.servers])
    click.echo(cfg.to_toml(loaded), nl=False)
    for item in lifted:
        click.echo(f"note: {item.place} held a secret; written as ${{{item.variable}}}: set {item.variable}", err=True)


@config.command("trust")
@click.argument("path", default="toolshell.toml")
@click.option("--yes", is_flag=True, help="Trust without asking (for scripts); what is trusted is still printed.")
def config_trust(path: str, yes: bool) -> None:
    """Use a toolshell.toml found in the working directory (it can start programs: read it first).

    Prints what the file would start (each server's command line or URL; after an edit, the
    difference since it was last trusted), asks on a terminal, then records the file's path as
    given (a symlink is trusted as itself, not as the file it points to), its SHA-256 and its
    directory under the state dir; editing the file withdraws the trust, and its relative
    `command`/`cwd` resolve against that directory.
    """
    from toolshell.config import trust, user_data_dir  # lazy: CLI start-up

    file = Path(path)
    if not file.is_file():
        raise click.UsageError(f"{path} is not a file; give the path of the toolshell.toml to trust")
    try:
        data = file.read_bytes()  # read once: what is shown is what is trusted
    except OSError as e:
        raise click.ClickException(f"cannot read {path}: {e.strerror}") from None
    servers = trust.describe(guard(lambda: cfg_check(data, path)))
    database = trust.trust_database(user_data_dir())
    before = guard(lambda: trust.trust_state(file, database, data=data))
    found = trust.as_found(file)
    if before.state == "trusted" and before.servers is not None:
        click.echo(f"{found} is trusted already, as it is now")
        return
    _show(found, servers, before)
    if not yes:
        if not sys.stdin.isatty():
            again = f"toolshell config trust {shlex.quote(path)} --yes"
            click.echo(f"not trusted: there is no terminal to ask on; to trust it, run `{again}`", err=True)
            sys.exit(1)
        if not click.confirm("Trust it?", default=False):
            click.echo("not trusted", err=True)
            sys.exit(1)
    digest = guard(lambda: trust.trust(file, database, servers, data=data))
    click.echo(f"trusted {found} (sha256 {digest[:16]}…); editing it withdraws the trust")


def _show(found: Path, servers: list[str], before: TrustState) -> None:
    """What trusting `found` allows: everything it starts, or after an edit what changed since."""
    from toolshell.config.trust import changes  # lazy: CLI start-up

    if before.state == "changed" and before.servers is not None:
        diff = changes(before.servers, servers)
        click.echo(f"{found} changed since it was trusted; what it starts, then (-) and now (+):")
        for line in diff or ["  (the same servers; other settings changed)"]:
            click.echo(f"  {line}")
        return
    click.echo(f"{found} would start:")
    for line in servers or ["(no servers)"]:
        click.echo(f"  {line}")


def cfg_check(data: bytes, source: str) -> Config:
    """Trust only a file that loads: a broken one would be refused later anyway."""
    from toolshell import config as cfg  # lazy: CLI start-up
    from toolshell.errors import ConfigError  # lazy: CLI start-up

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError([("", f"not UTF-8 text (byte {e.start}); save the file as UTF-8")], source) from None
    return cfg.load_text(text, source=source, expand=False)
