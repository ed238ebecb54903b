"""What every `toolshell` command shares: the common options, loading the config, and the one place
that turns errors into a message and an exit code."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from toolshell.errors import ConfigError, ToolshellError, error_line

T = TypeVar("T")

config_opt = click.option("--config", "config_path", metavar="PATH", help="Config file (TOML or mcpServers JSON).")
state_opt = click.option("--state-dir", metavar="DIR", help="Where state (SQLite) lives.")
role_opt = click.option("--role", metavar="NAME", help="The session's role (a [[roles]] name or an auto_bind tag).")


def load_config(config_path: str | None) -> Any:
    from toolshell import config as cfg

    return cfg.load(config_path)


def guard(fn: Callable[[], T]) -> T:
    """Turn known errors into a clear message and an exit code; never a traceback."""
    try:
        return fn()
    except ConfigError as e:
        click.echo(f"config error in {e.source or 'configuration'}:", err=True)
        for place, msg in e.problems:
            click.echo(f"  {place}: {msg}" if place else f"  {msg}", err=True)
        sys.exit(1)
    except ToolshellError as e:
        click.echo(error_line(e), err=True, nl=False)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)


def run_async(factory: Callable[[], Awaitable[T]]) -> T:
    import anyio

    return guard(lambda: anyio.run(factory))


def script_text(command: str | None, file: str | None) -> str:
    if command is not None and file is not None:
        raise click.UsageError(f"give the script either with -c or as a FILE, not both (got FILE {file!r})")
    if command is not None:
        return command
    if file is None or file == "-":
        return sys.stdin.read()
    try:
        return Path(file).read_text(encoding="utf-8")
    except OSError as e:
        raise click.ClickException(f"cannot read {file}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise click.ClickException(f"{file} is not UTF-8 text (byte {e.start}); save the script as UTF-8") from None
