"""What every `toolshell` command shares: the common options, loading the config, and the one place
that turns errors into a message and an exit code."""

from __future__ import annotations

import math
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from toolshell.errors import ConfigError, ToolshellError, error_line
from toolshell.utf8 import bad_byte, not_utf8

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class Utf8Text(click.ParamType[Any, Any]):
    """A text argument that must be UTF-8: argv bytes that are not arrive as lone surrogates, and
    would fail deep inside (bashkit, SQLite) instead of here with a usage error (exit 2)."""

    name = "text"

    def __init__(self, what: str = "the value", *, script: bool = False) -> None:
        self.what, self.script = what, script

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and (message := not_utf8(self.what, value, script=self.script)):
            self.fail(message, param, ctx)
        return value


UTF8 = Utf8Text()
SCRIPT = Utf8Text("the script", script=True)


class Seconds(click.FloatRange):
    """A duration in seconds: positive, at most a day, and a number (click's range lets `nan` by)."""

    name = "seconds"

    def __init__(self) -> None:
        super().__init__(min=0, max=86_400, min_open=True)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if math.isnan(number):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        return number


_CONFIG_KEY, _STATE_KEY = "toolshell.config_path", "toolshell.state_dir"
_CONFIG_HELP = "Config file (TOML or mcpServers JSON)."
_STATE_HELP = "Where state (SQLite) lives."


def _remember(key: str) -> Callable[[click.Context, click.Parameter, str | None], str | None]:
    """Let `--config`/`--state-dir` be written before or after the subcommand: `ctx.meta` is shared by
    every context of one invocation, so the value given nearest the command wins and the others
    fall back to one given further out (`toolshell approvals --config X list` and `… list --config X`)."""

    def callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        if value is not None:
            ctx.meta[key] = value
            return value
        found = ctx.meta.get(key)
        return found if isinstance(found, str) else None

    return callback


config_opt = click.option("--config", "config_path", metavar="PATH", help=_CONFIG_HELP, callback=_remember(_CONFIG_KEY))
state_opt = click.option("--state-dir", metavar="DIR", help=_STATE_HELP, callback=_remember(_STATE_KEY))


accept_state = click.option(
    "--state-dir", metavar="DIR", help=_STATE_HELP, expose_value=False, callback=_remember(_STATE_KEY)
)
"""`--state-dir` accepted (and remembered for `paths`) where the command itself does not use it."""


def group_paths(fn: F) -> F:
    """`--config` and `--state-dir` on a group, for its subcommands (which accept them too); read
    them with `paths(ctx)`."""
    fn = accept_state(fn)
    return click.option(
        "--config", metavar="PATH", help=_CONFIG_HELP, expose_value=False, callback=_remember(_CONFIG_KEY)
    )(fn)


def paths(ctx: click.Context) -> tuple[str | None, str | None]:
    """The `--config` and `--state-dir` given anywhere on the command line (nearest the command wins)."""
    return ctx.meta.get(_CONFIG_KEY), ctx.meta.get(_STATE_KEY)


role_opt = click.option(
    "--role", metavar="NAME", type=UTF8, help="The session's role (a [[roles]] name or an auto_bind tag)."
)


def load_config(config_path: str | None) -> Any:
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    from toolshell import config as cfg

    return cfg.load(config_path)


def guard(fn: Callable[[], T]) -> T:
    """Turn known errors into a clear message and an exit code; never a traceback. A known error
    inside a task group's `ExceptionGroup` (raised while the host was starting) counts too."""
    try:
        return fn()
    except BaseExceptionGroup as group:
        known = _known_leaf(group)
        if known is None:
            raise
        _exit_with(known)
    except (ConfigError, ToolshellError) as e:
        _exit_with(e)
    except KeyboardInterrupt:
        sys.exit(130)


def _known_leaf(group: BaseExceptionGroup[BaseException]) -> ConfigError | ToolshellError | None:
    for exc in group.exceptions:
        found = _known_leaf(exc) if isinstance(exc, BaseExceptionGroup) else exc
        if isinstance(found, ConfigError | ToolshellError):
            return found
    return None


def _exit_with(e: ConfigError | ToolshellError) -> NoReturn:
    if isinstance(e, ConfigError):
        click.echo(f"config error in {e.source or 'configuration'}:", err=True)
        for place, msg in e.problems:
            click.echo(f"  {place}: {msg}" if place else f"  {msg}", err=True)
        sys.exit(2)  # like a usage error: what to change is in the config, not in the run
    click.echo(error_line(e), err=True, nl=False)
    sys.exit(2 if getattr(e, "usage_error", False) else 1)  # a misspelt option value, e.g. `--role`


def run_async(factory: Callable[[], Awaitable[T]], *, fast_loop: bool = False) -> T:
    """`factory()` run to its end; `fast_loop`: on uvloop where it is installed (`serve`: a long-lived process whose
    every request crosses the event loop several times; a short command would only pay its import)."""
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    import anyio

    options = {"use_uvloop": fast_loop and _has_uvloop()}
    return guard(lambda: anyio.run(factory, backend_options=options))


def _has_uvloop() -> bool:
    import importlib.util  # lazy: only `serve` asks

    return importlib.util.find_spec("uvloop") is not None


def script_text(command: str | None, file: str | None) -> str:
    """The script from `-c` (already checked by `UTF8`), a FILE, or stdin (`-` or no FILE)."""
    if command is not None and file is not None:
        raise click.UsageError(f"give the script either with -c or as a FILE, not both (got FILE {file!r})")
    if command is not None:
        return command
    if file is None or file == "-":
        return read_stdin("the script on stdin")
    try:
        data = Path(file).read_bytes()
    except OSError as e:
        raise click.ClickException(f"cannot read {file}: {e.strerror}") from None
    return _decode(data, f"the script in {file}")


def read_stdin(what: str, *, script: bool = True) -> str:
    """All of stdin as UTF-8 text, whatever the locale says; other bytes are one clear error."""
    if sys.stdin is None:  # closed (`<&-`)
        raise click.UsageError(f"stdin is closed, so {what} cannot be read; give it with -c, a FILE, or a pipe")
    return _decode(sys.stdin.buffer.read(), what, script=script)


def _decode(data: bytes, what: str, *, script: bool = True) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        at = len(data[: e.start].decode("utf-8"))  # valid up to the bad byte
        raise click.ClickException(bad_byte(what, at, data[e.start], script=script)) from None


no_daemon_opt = click.option(
    "--no-daemon", is_flag=True, help="Run here even when a daemon serves this config (`toolshell daemon`)."
)


def warm_later(config: Any, config_path: str | None, state_dir: str | None, no_daemon: bool) -> None:
    """`[cli] keep_warm`: start the daemon in the background for the next command when none runs
    (this one runs cold meanwhile). A daemon that cannot start is said once; the command goes on."""
    if not config.cli.keep_warm or no_daemon:
        return
    # lazy: only `keep_warm` needs the daemon's modules
    from toolshell.frontends.daemon import control
    from toolshell.frontends.daemon.address import address_for
    from toolshell.frontends.daemon.folder import DaemonError

    try:
        control.start(config_path, state_dir, wait=False)
    except (DaemonError, OSError) as e:
        address = address_for(config_path, state_dir)
        if address is None or control.note_failure(address, str(e)):  # said once, until a `daemon start` works
            click.echo(
                f"toolshell: keep_warm: no daemon ({e}); tried again in 10 minutes, `toolshell daemon start` says more",
                err=True,
            )
